//! `wasmctrl apiserver`: runs the embedded Kubernetes API server on a loopback port, writes a
//! kubeconfig for it, and stops cleanly on SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::apiserver::{ApiServer, Kubelet, WORKLOAD_CONTROLLERS};

/// Arguments of `wasmctrl apiserver`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Where to write a kubeconfig pointing at the server.
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Persist objects in this directory (survives restarts).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Events kept per resource for watch resume.
    #[arg(long, default_value_t = 1000)]
    pub history: usize,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Who runs Pods in the embedded server's cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pods {
    /// A kubelet stand-in: fake Nodes, a scheduler, and Pods that start, become Ready and
    /// finish by themselves (annotations `kubelet.wasmctrl.dev/...` change one Pod's course).
    Auto,
    /// Nobody: Pods stay as written, as on a cluster without nodes; clients report their
    /// status themselves (`kubectl patch pod --subresource=status`).
    Manual,
}

/// How the embedded server's cluster runs Pods (`wasmctrl apiserver`, `wasmctrl dev`).
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Who runs Pods: `auto` (a kubelet stand-in with fake Nodes and a scheduler) or `manual`
    /// (nobody, as with envtest). Default: `auto` for `wasmctrl dev`, `manual` for `wasmctrl
    /// apiserver`.
    #[arg(long, value_enum)]
    pub pods: Option<Pods>,
    /// Fake Nodes with `--pods=auto` (`wasmctrl-node-0`, ...; more can be added as Nodes
    /// annotated `kubelet.wasmctrl.dev/fake: "true"`).
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Seconds a scheduled Pod's containers take to start, with `--pods=auto`.
    #[arg(long, default_value_t = 1.0, value_parser = seconds)]
    pub pod_start_seconds: f64,
    /// kube-controller-manager's controllers to run, as its `--controllers` takes them: `*` for
    /// all, a name to add one, `-name` to leave one out (comma-separated or repeated). Names:
    /// garbage-collector-controller, namespace-controller, serviceaccount-controller (with the
    /// root CA publisher), persistentvolume-binder-controller, cronjob-controller,
    /// job-controller (with ttl-after-finished), deployment-controller, replicaset-controller,
    /// statefulset-controller, daemonset-controller, endpointslice-controller (with endpoints).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,
    /// Seconds the containers of Pods that do not restart them (`restartPolicy: Never` or
    /// `OnFailure`, as Jobs') run before exiting 0, with `--pods=auto`.
    #[arg(long, default_value_t = 5.0, value_parser = seconds)]
    pub pod_run_seconds: f64,
    /// Take KEP-5866's `shardSelector` on lists and watches, as Kubernetes 1.36 and later with
    /// the alpha feature on; `--shard-selectors=false` ignores it, as older servers do (for
    /// trying `run --sharding`'s client-side filtering).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set, require_equals = true)]
    pub shard_selectors: bool,
    /// Serve the admin endpoints (`/_admin/...`): fault injection, the request log, and the test
    /// clock (`POST /_admin/advance-cronjob-clock` `{"seconds": n}`), which `wasmctrl dev`'s
    /// plugins are told the time by too.
    #[arg(long)]
    pub admin: bool,
}

impl ClusterArgs {
    /// The kubelet stand-in these arguments ask for, `--pods` defaulting to `default`.
    pub fn kubelet(&self, default: Pods) -> Option<Kubelet> {
        (self.pods.unwrap_or(default) == Pods::Auto).then(|| Kubelet {
            nodes: self.nodes,
            start: Duration::from_secs_f64(self.pod_start_seconds),
            run: Duration::from_secs_f64(self.pod_run_seconds),
        })
    }
}

/// The controllers besides the workload ones, by kube-controller-manager's names.
const CORE_CONTROLLERS: [&str; 3] = [
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
];

impl ClusterArgs {
    /// The controllers `--controllers` enables; an unknown name is an error.
    pub fn enabled_controllers(&self) -> anyhow::Result<Vec<&'static str>> {
        let known: Vec<&'static str> = CORE_CONTROLLERS
            .iter()
            .chain(WORKLOAD_CONTROLLERS.iter())
            .copied()
            .collect();
        let mut on: Vec<&'static str> = Vec::new();
        for word in self
            .controllers
            .iter()
            .map(|w| w.trim())
            .filter(|w| !w.is_empty())
        {
            if word == "*" {
                on = known.clone();
                continue;
            }
            let (off, name) = match word.strip_prefix('-') {
                Some(name) => (true, name),
                None => (false, word),
            };
            let Some(name) = known.iter().copied().find(|k| *k == name) else {
                anyhow::bail!(
                    "--controllers: unknown controller {name:?}; known: {}",
                    known.join(", ")
                );
            };
            on.retain(|n| *n != name);
            if !off {
                on.push(name);
            }
        }
        Ok(on)
    }

    /// A server builder with the controllers and the kubelet these arguments ask for
    /// (`--pods` defaulting to `default`).
    pub fn builder(&self, default: Pods) -> anyhow::Result<crate::apiserver::Builder> {
        let on = self.enabled_controllers()?;
        Ok(ApiServer::builder()
            .gc(on.contains(&"garbage-collector-controller"))
            .namespace_cleanup(on.contains(&"namespace-controller"))
            .service_accounts(on.contains(&"serviceaccount-controller"))
            .workload_controllers(on.iter().copied())
            .kubelet(self.kubelet(default))
            .shard_selectors(self.shard_selectors)
            .admin(self.admin))
    }
}

fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=86_400.0).contains(&s) => Ok(s),
        _ => Err(format!(
            "{text:?} is not a number of seconds between 0 and 86400"
        )),
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(serve(args))
}

async fn serve(args: Args) -> anyhow::Result<ExitCode> {
    let server = (args.cluster.builder(Pods::Manual)?)
        .history(args.history)
        .data_dir(args.data_dir.clone())
        .build()?;
    let http = server.serve(args.listen).await?;
    if let Some(path) = &args.kubeconfig_out {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, http.kubeconfig())
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    }
    super::say(format_args!("listening on {}", http.url()));
    tracing::info!(addr = %http.addr(), "apiserver ready");
    wait_for_signal().await?;
    http.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
