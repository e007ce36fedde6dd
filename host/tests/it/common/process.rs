//! Real processes for end-to-end tests: `wasmctrl apiserver` and `wasmctrl run` as separate
//! processes, so that a test can kill and restart the host while the cluster state stays, and
//! kubectl against them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Polls `check` every 100 ms until it holds, failing the test after `secs` seconds.
pub fn wait_for(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs kubectl from the repository root; returns whether it succeeded and stdout + stderr.
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .current_dir(super::repo_root())
        .output()
        .expect("kubectl is installed (make deps)");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Runs `wasmctrl test <args>` from the repository root.
pub fn wasmctrl_test(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .arg("test")
        .args(args)
        .current_dir(super::repo_root())
        .output()
        .expect("run wasmctrl")
}

/// `wasmctrl test <args>`, which must succeed; its JSON report.
pub fn wasmctrl_test_report(args: &[&str]) -> serde_json::Value {
    let out = wasmctrl_test(args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "wasmctrl test {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).expect("a JSON report")
}

/// The WARN and ERROR lines of a log.
pub fn complaints(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect()
}

/// Fails the test if `log` has WARN or ERROR lines; `which` names whose log it is.
pub fn assert_quiet(log: &str, which: &str) {
    let complaints = complaints(log);
    assert!(
        complaints.is_empty(),
        "warnings or errors in the {which} log:\n{}",
        complaints.join("\n")
    );
}

/// A `wasmctrl` child process whose stderr goes to a log file. Killed when dropped.
pub struct Process {
    child: Option<Child>,
    log: PathBuf,
}

impl Process {
    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is still running: false once it has exited or been stopped.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| child.try_wait().expect("wait").is_none())
    }

    /// Reconciles of `key` (`namespace/name`) the host has finished so far, from the debug
    /// record the controller writes after each one.
    pub fn reconciles(&self, key: &str) -> usize {
        let key = format!("object.key={key} ");
        self.log()
            .lines()
            .filter(|l| l.contains(" reconciled ") && l.contains(&key))
            .count()
    }

    /// Waits until the host has finished more than `before` reconciles of `key`: the positive
    /// signal that it has moved past a change.
    pub fn wait_reconciled(&self, key: &str, before: usize) {
        wait_for(30, &format!("a reconcile of {key}"), || {
            self.reconciles(key) > before
        });
    }

    /// The address the host logged for `what` (`metrics`, `health probes`), from a text or a
    /// JSON log.
    pub fn address(&self, what: &str) -> String {
        let mut found = String::new();
        wait_for(30, &format!("the {what} address"), || {
            let log = self.log();
            let Some(line) = log
                .lines()
                .find(|l| l.contains(&format!("{what} listening")))
            else {
                return false;
            };
            found = match serde_json::from_str::<serde_json::Value>(line) {
                Ok(json) => json["fields"]["address"].as_str().map(String::from),
                Err(_) => line
                    .split("address=")
                    .nth(1)
                    .and_then(|a| a.split_whitespace().next())
                    .map(String::from),
            }
            .unwrap_or_default();
            !found.is_empty()
        });
        found
    }

    /// The value of one series (`name{labels}` as the host writes it) in a scrape of this
    /// host's `/metrics`, if it is there.
    pub fn sample(&self, series: &str) -> Option<f64> {
        let text = self.scrape();
        let line = text.lines().find(|l| {
            l.strip_prefix(series)
                .is_some_and(|rest| rest.starts_with(' '))
        })?;
        line.rsplit(' ').next()?.parse().ok()
    }

    /// `GET /metrics` from this host, which must answer 200: the exposition.
    pub fn scrape(&self) -> String {
        let (code, body) = super::http::get(&self.address("metrics"), "/metrics");
        assert_eq!(code, 200, "{body}");
        body
    }

    /// Starts `wasmctrl <args>` with `RUST_LOG=info` (and the controller's per-reconcile debug
    /// records, see [`reconciles`](Self::reconciles)), logging to `log`. The binary is the one
    /// cargo built with the tests, or a copy `WASMCTRL_BIN` names: worktrees sharing a target
    /// directory replace each other's `target/debug/wasmctrl`.
    pub fn wasmctrl(args: &[&str], log: PathBuf, envs: &[(&str, &str)]) -> Self {
        let binary = std::env::var_os("WASMCTRL_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_wasmctrl").into());
        let mut command = Command::new(binary);
        command
            .args(args)
            .env("RUST_LOG", "info,wasmctrl::reconcile::controller=debug")
            .envs(envs.iter().copied());
        Self::spawn(command, log)
    }

    /// Starts `command` (a `wasmctrl` however it is launched, e.g. from an image's root
    /// filesystem) with its stderr going to `log`.
    pub fn spawn(mut command: Command, log: PathBuf) -> Self {
        let file = std::fs::File::create(&log).expect("create log file");
        let child = command
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start wasmctrl");
        Self {
            child: Some(child),
            log,
        }
    }

    /// `wasmctrl dev` on a free loopback port over `plugins`, writing its kubeconfig to
    /// `kubeconfig`, logging to `log`.
    pub fn dev(plugins: &Path, kubeconfig: &Path, log: PathBuf) -> Self {
        Self::dev_with(plugins, kubeconfig, log, &[])
    }

    /// `wasmctrl dev` over the one plugin `name` (a copy in `dir`), with the CRD file `crd`
    /// (relative to the repository) applied by kubectl once the server is up: the host and its
    /// kubeconfig.
    pub fn dev_with_crd(dir: &Path, name: &str, crd: &str) -> (Self, PathBuf) {
        let plugins = plugin_dir(dir, &[(name, None)]);
        let kubeconfig = dir.join("kubeconfig");
        let host = Self::dev(&plugins, &kubeconfig, dir.join("host.log"));
        wait_for(30, "the kubeconfig", || kubeconfig.exists());
        let (ok, out) = kubectl(&kubeconfig, &["apply", "-f", crd]);
        assert!(ok, "kubectl apply -f {crd}: {out}\n{}", host.log());
        (host, kubeconfig)
    }

    /// [`dev`](Self::dev) with more arguments.
    pub fn dev_with(plugins: &Path, kubeconfig: &Path, log: PathBuf, extra: &[&str]) -> Self {
        let args = [
            "dev",
            "--listen",
            "127.0.0.1:0",
            "--plugins",
            plugins.to_str().expect("utf-8 path"),
            "--kubeconfig-out",
            kubeconfig.to_str().expect("utf-8 path"),
            "--health-probe-bind-address",
            "127.0.0.1:0",
            "--metrics-bind-address",
            "127.0.0.1:0",
        ];
        let args: Vec<&str> = args.iter().chain(extra).copied().collect();
        Self::wasmctrl(&args, log, &[])
    }

    /// What the process has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log's WARN and ERROR lines.
    pub fn complaints(&self) -> Vec<String> {
        complaints(&self.log())
            .into_iter()
            .map(String::from)
            .collect()
    }

    /// Fails the test if the log so far has WARN or ERROR lines; `which` names the process.
    pub fn assert_quiet(&self, which: &str) {
        assert_quiet(&self.log(), which);
    }

    /// SIGTERM, then waits (30 s at most) for the exit status.
    pub fn terminate(self) -> ExitStatus {
        self.signal("TERM")
    }

    /// SIGINT (Ctrl-C), then waits (30 s at most) for the exit status.
    pub fn interrupt(self) -> ExitStatus {
        self.signal("INT")
    }

    fn signal(mut self, signal: &str) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "wasmctrl did not exit after SIG{signal}; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL: no chance to finish anything, as in a node failure.
    pub fn kill(mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The embedded API server as its own process (`wasmctrl apiserver`), persisting to a data
/// directory, with garbage collection and the admin endpoints (faults, request log) on, plus
/// what a test needs to drive hosts against it.
pub struct Cluster {
    dir: PathBuf,
    /// The kubeconfig the server wrote.
    pub kubeconfig: PathBuf,
    server: Process,
    hosts: AtomicUsize,
}

impl Cluster {
    /// Starts the server with its kubeconfig, data and logs under `dir`.
    pub fn start(dir: &Path) -> Self {
        Self::started(dir, true, &[])
    }

    /// Starts the server as [`start`](Self::start) does, with more arguments (`--pods`, ...).
    pub fn start_with(dir: &Path, extra: &[&str]) -> Self {
        Self::started(dir, true, extra)
    }

    /// Starts the server keeping its objects in memory only (`wasmctrl apiserver`'s default),
    /// kubeconfig and logs under `dir`.
    pub fn in_memory(dir: &Path) -> Self {
        Self::started(dir, false, &[])
    }

    /// Starts the server in memory as [`in_memory`](Self::in_memory) does, with more arguments.
    pub fn in_memory_with(dir: &Path, extra: &[&str]) -> Self {
        Self::started(dir, false, extra)
    }

    fn started(dir: &Path, persist: bool, extra: &[&str]) -> Self {
        let kubeconfig = dir.join("kubeconfig");
        let data = dir.join("apiserver-data");
        let mut args = vec![
            "apiserver",
            "--listen",
            "127.0.0.1:0",
            "--kubeconfig-out",
            kubeconfig.to_str().expect("utf-8 path"),
            "--admin",
        ];
        if persist {
            args.extend(["--data-dir", data.to_str().expect("utf-8 path")]);
        }
        args.extend(extra);
        let server = Process::wasmctrl(&args, dir.join("apiserver.log"), &[]);
        wait_for(30, "the API server's kubeconfig", || kubeconfig.exists());
        Self {
            dir: dir.to_path_buf(),
            kubeconfig,
            server,
            hosts: AtomicUsize::new(0),
        }
    }

    /// kubectl against this server.
    pub fn kubectl(&self, args: &[&str]) -> (bool, String) {
        kubectl(&self.kubeconfig, args)
    }

    /// kubectl that must succeed; returns its output.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let (ok, out) = self.kubectl(args);
        assert!(ok, "kubectl {args:?} failed: {out}");
        out
    }

    /// `kubectl get <args> -o json`, parsed; `None` when kubectl fails (e.g. not found).
    pub fn get_json(&self, args: &[&str]) -> Option<serde_json::Value> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let (ok, out) = self.kubectl(&[&["get"], all.as_slice()].concat());
        if !ok {
            eprintln!("kubectl get {}: {out}", args.join(" "));
            return None;
        }
        serde_json::from_str(&out).ok()
    }

    /// A kube client for this server.
    pub async fn client(&self) -> kube::Client {
        kube::Client::try_from(self.client_config().await).expect("client")
    }

    /// The client configuration for this server (its kubeconfig's).
    pub async fn client_config(&self) -> kube::Config {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig");
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("client config")
    }

    /// The API server process's id.
    pub fn server_pid(&self) -> u32 {
        self.server.pid().expect("the API server is running")
    }

    /// Starts `wasmctrl run --plugins <plugins> --kubeconfig <ours> <extra>`; each start logs to
    /// its own `host-<n>.log`.
    pub fn run_host(&self, plugins: &Path, extra: &[&str], envs: &[(&str, &str)]) -> Process {
        self.run_host_with(&self.kubeconfig, plugins, extra, envs)
    }

    /// As [`run_host`](Self::run_host), as ServiceAccount `wasmctrl/wasmctrl` with only the RBAC
    /// `wasmctrl rbac` generates for the plugins in `plugins` (applied first).
    pub fn run_host_rbac(&self, plugins: &Path, extra: &[&str], envs: &[(&str, &str)]) -> Process {
        self.apply_yaml(&rbac_yaml(plugins));
        let kubeconfig = self.service_account_kubeconfig("wasmctrl", "wasmctrl");
        self.run_host_with(&kubeconfig, plugins, extra, envs)
    }

    /// A condition of the object `kubectl get <args>` names: status, reason and message.
    pub fn condition(&self, args: &[&str], type_: &str) -> Option<(String, String, String)> {
        let object = self.get_json(args)?;
        let found = (object["status"]["conditions"].as_array()?.iter())
            .find(|c| c["type"] == type_)?
            .clone();
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        Some((
            text(&found["status"]),
            text(&found["reason"]),
            text(&found["message"]),
        ))
    }

    /// `kubectl apply -f` of YAML text (creating the `wasmctrl` namespace first if missing).
    pub fn apply_yaml(&self, yaml: &str) {
        if !self.kubectl(&["get", "namespace", "wasmctrl"]).0 {
            self.kubectl_ok(&["create", "namespace", "wasmctrl"]);
        }
        let file = tempfile::Builder::new()
            .suffix(".yaml")
            .tempfile_in(&self.dir)
            .expect("a manifest file");
        std::fs::write(file.path(), yaml).expect("write manifest");
        self.kubectl_ok(&["apply", "-f", file.path().to_str().expect("utf-8 path")]);
    }

    /// A kubeconfig for this server that authenticates with a fresh token of ServiceAccount
    /// `namespace/name` (`kubectl create token`).
    pub fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        let token = self.kubectl_ok(&["create", "token", name, "-n", namespace, "--duration=24h"]);
        let admin = std::fs::read_to_string(&self.kubeconfig).expect("the kubeconfig");
        let text: Vec<String> = admin
            .lines()
            .map(|l| match l.trim_start().strip_prefix("token: ") {
                Some(_) => format!("    token: {}", token.trim()),
                None => l.to_string(),
            })
            .collect();
        let path = self.dir.join(format!("kubeconfig-{namespace}-{name}"));
        std::fs::write(&path, text.join("\n") + "\n").expect("write kubeconfig");
        path
    }

    /// A token of a new ServiceAccount `monitoring/<name>`, as Prometheus would scrape with;
    /// when `reader`, it is bound to the `wasmctrl-metrics-reader` ClusterRole that `wasmctrl
    /// rbac` generates (applied first).
    pub fn scraper_token(&self, name: &str, reader: bool) -> String {
        let none = self.dir.join("no-plugins");
        std::fs::create_dir_all(&none).expect("an empty plugin directory");
        self.apply_yaml(&rbac_yaml(&none));
        if !self.kubectl(&["get", "namespace", "monitoring"]).0 {
            self.kubectl_ok(&["create", "namespace", "monitoring"]);
        }
        self.kubectl_ok(&["create", "serviceaccount", name, "-n", "monitoring"]);
        if reader {
            let account = format!("--serviceaccount=monitoring:{name}");
            let binding = format!("scrape-{name}");
            let role = "--clusterrole=wasmctrl-metrics-reader";
            self.kubectl_ok(&["create", "clusterrolebinding", &binding, role, &account]);
        }
        let token = self.kubectl_ok(&["create", "token", name, "-n", "monitoring"]);
        token.trim().to_string()
    }

    /// As [`run_host`](Self::run_host), with another kubeconfig (a ServiceAccount's, say).
    pub fn run_host_with(
        &self,
        kubeconfig: &Path,
        plugins: &Path,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> Process {
        let n = self.hosts.fetch_add(1, Ordering::Relaxed) + 1;
        let mut args = vec![
            "run",
            "--plugins",
            plugins.to_str().expect("utf-8 path"),
            "--kubeconfig",
            kubeconfig.to_str().expect("utf-8 path"),
        ];
        // Tests run hosts side by side: each serves its probes and metrics on a free port
        // unless told otherwise.
        for flag in [
            "--health-probe-bind-address",
            "--metrics-bind-address",
            "--webhook-bind-address",
        ] {
            if !extra.contains(&flag) {
                args.extend([flag, "127.0.0.1:0"]);
            }
        }
        // Metrics over plain HTTP, which `Process::scrape` reads without a token, unless the
        // test asks for the secure endpoint.
        if !extra.iter().any(|a| a.starts_with("--metrics-secure")) {
            args.push("--metrics-secure=false");
        }
        args.extend_from_slice(extra);
        Process::wasmctrl(&args, self.dir.join(format!("host-{n}.log")), envs)
    }

    /// Every resource request the server has answered so far, oldest first
    /// (`/_admin/requests`).
    pub async fn requests(&self) -> Vec<serde_json::Value> {
        let client = self.client().await;
        let request = http::Request::post("/_admin/requests")
            .body(Vec::new())
            .expect("request");
        let text = client.request_text(request).await.expect("the request log");
        serde_json::from_str(&text).expect("the request log is JSON")
    }

    /// The API server's log so far.
    pub fn server_log(&self) -> String {
        self.server.log()
    }
}

/// What `wasmctrl rbac` prints for the plugins in `plugins` (CRDs from `examples/`), for host
/// `wasmctrl/wasmctrl`.
pub fn rbac_yaml(plugins: &Path) -> String {
    rbac_yaml_with(plugins, &[])
}

/// As [`rbac_yaml`], with more arguments (`--sharding`).
pub fn rbac_yaml_with(plugins: &Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(["rbac", "--plugins"])
        .arg(plugins)
        .args(["--crds", "examples", "--namespace", "wasmctrl"])
        .args(extra)
        .current_dir(super::repo_root())
        .output()
        .expect("run wasmctrl rbac");
    assert!(
        out.status.success(),
        "wasmctrl rbac failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("YAML")
}

/// A plugin directory under `dir` holding the named built plugins (copied from the build
/// output), each with the given operator config text written beside it as `<name>.toml`.
pub fn plugin_dir(dir: &Path, plugins: &[(&str, Option<&str>)]) -> PathBuf {
    let out = dir.join("plugins");
    std::fs::create_dir_all(&out).expect("create plugin dir");
    for (name, config) in plugins {
        std::fs::copy(super::plugin_path(name), out.join(format!("{name}.wasm")))
            .expect("copy plugin");
        if let Some(config) = config {
            std::fs::write(out.join(format!("{name}.toml")), config).expect("write config");
        }
    }
    out
}
