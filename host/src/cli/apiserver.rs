//! `wasmctrl apiserver`: runs the embedded Kubernetes API server on a loopback port, writes a
//! kubeconfig for it, and stops cleanly on SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::apiserver::ApiServer;

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
    /// Serve the fault-injection admin endpoints (`/_admin/...`).
    #[arg(long)]
    pub admin: bool,
    /// Events kept per resource for watch resume.
    #[arg(long, default_value_t = 1000)]
    pub history: usize,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(serve(args))
}

async fn serve(args: Args) -> anyhow::Result<ExitCode> {
    let server = ApiServer::builder()
        .history(args.history)
        .data_dir(args.data_dir.clone())
        .gc(true)
        .namespace_cleanup(true)
        .service_accounts(true)
        .replica_sets(true)
        .admin(args.admin)
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
