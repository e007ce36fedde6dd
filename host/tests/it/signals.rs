//! Every long-running command stops cleanly, exit status 0, on Ctrl-C (SIGINT) as on SIGTERM.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::process::{Cluster, Process, wait_for};

#[test]
fn apiserver_run_and_dev_exit_zero_on_sigint_and_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();

    // `wasmctrl run` against a separate `wasmctrl apiserver`, stopped each way.
    let cluster = Cluster::start(dir.path());
    for stop in [Process::interrupt, Process::terminate] {
        let host = cluster.run_host(&plugins, &[], &[]);
        wait_for(30, "the host to serve", || {
            host.log().contains("serving plugins")
        });
        let log = host.log();
        let status = stop(host);
        assert!(status.success(), "wasmctrl run: {status}\n{log}");
    }

    // `wasmctrl dev` and `wasmctrl apiserver` on their own.
    for stop in [Process::interrupt, Process::terminate] {
        let kubeconfig = dir.path().join("dev.kubeconfig");
        let _ = std::fs::remove_file(&kubeconfig);
        let dev = Process::dev(&plugins, &kubeconfig, dir.path().join("dev.log"));
        wait_for(30, "wasmctrl dev to serve", || {
            dev.log().contains("serving plugins")
        });
        let status = stop(dev);
        assert!(status.success(), "wasmctrl dev: {status}");

        let kubeconfig = dir.path().join("alone.kubeconfig");
        let _ = std::fs::remove_file(&kubeconfig);
        let server = Process::wasmctrl(
            &[
                "apiserver",
                "--listen",
                "127.0.0.1:0",
                "--kubeconfig-out",
                kubeconfig.to_str().unwrap(),
            ],
            dir.path().join("alone.log"),
            &[],
        );
        wait_for(30, "the kubeconfig", || kubeconfig.exists());
        let status = stop(server);
        assert!(status.success(), "wasmctrl apiserver: {status}");
    }
}
