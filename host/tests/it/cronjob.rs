//! kubebuilder's CronJob tutorial, ported (`plugins/cronjob`, `examples/cronjob`), in `wasmctrl
//! dev` with kubectl: time moves by the dev cluster's test clock (`POST
//! /_admin/advance-cronjob-clock`), which the plugin is told too; each minute moved starts the
//! run it gave as a Job named by its time, the kubelet stand-in runs its Pod to completion, the
//! status follows, and the successful-jobs history limit keeps the two latest.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use common::process::{Process, kubectl, wait_for};
use serde_json::Value;

const SCHEDULED_AT: &str = "batch.tutorial.kubebuilder.io/scheduled-at";

fn get_json(kubeconfig: &Path, args: &[&str]) -> Option<Value> {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    let (ok, out) = kubectl(kubeconfig, &args);
    ok.then(|| serde_json::from_str(&out).ok()).flatten()
}

/// The CronJob's Jobs (those it controls): `(name, scheduled-at, complete)`, by name.
fn jobs(kubeconfig: &Path) -> Vec<(String, String, bool)> {
    let Some(list) = get_json(kubeconfig, &["get", "jobs"]) else {
        return Vec::new();
    };
    let ours = |j: &&Value| j["metadata"]["ownerReferences"][0]["name"] == "cronjob-sample";
    let complete = |j: &Value| {
        (j["status"]["conditions"].as_array().into_iter().flatten())
            .any(|c| c["type"] == "Complete" && c["status"] == "True")
    };
    let mut jobs: Vec<_> = (list["items"].as_array().into_iter().flatten())
        .filter(ours)
        .map(|j| {
            let name = j["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let at = j["metadata"]["annotations"][SCHEDULED_AT]
                .as_str()
                .unwrap_or_default();
            (name, at.to_string(), complete(j))
        })
        .collect();
    jobs.sort();
    jobs
}

/// Moves the cluster's (and so the plugin's) clock a minute ahead.
fn advance_a_minute(kubeconfig: &Path, dir: &Path) {
    let body = dir.join("advance.json");
    std::fs::write(&body, r#"{"seconds": 60}"#).unwrap();
    let raw = ["create", "--raw", "/_admin/advance-cronjob-clock", "-f"];
    let (ok, out) = kubectl(kubeconfig, &[&raw[..], &[body.to_str().unwrap()]].concat());
    assert!(ok, "{out}");
}

#[test]
fn the_cronjob_tutorial_runs_jobs_on_the_test_clock_and_keeps_its_history_limit() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = common::process::plugin_dir(dir.path(), &[("cronjob", None)]);
    let kubeconfig = dir.path().join("kubeconfig");
    let extra = ["--admin", "--pod-run-seconds", "0.5"];
    let host = Process::dev_with(&plugins, &kubeconfig, dir.path().join("host.log"), &extra);
    wait_for(30, "the kubeconfig", || kubeconfig.exists());
    let (ok, out) = kubectl(&kubeconfig, &["apply", "-f", "examples/cronjob/crd.yaml"]);
    assert!(ok, "{out}");
    wait_for(30, "the CRD to be served", || {
        kubectl(
            &kubeconfig,
            &["get", "cronjobs.batch.tutorial.kubebuilder.io"],
        )
        .0
    });
    let (ok, out) = kubectl(
        &kubeconfig,
        &["apply", "-f", "examples/cronjob/sample.yaml"],
    );
    assert!(ok, "{out}");
    // Reconciled once, before any time has moved: nothing was due (the schedule's next minute
    // has not come in real time within the test's first seconds, or it ran, which the loop
    // below counts alike).
    host.wait_reconciled("default/cronjob-sample", 0);

    let mut seen = BTreeSet::new();
    for run in 1..=4 {
        let before = seen.len();
        advance_a_minute(&kubeconfig, dir.path());
        wait_for(60, &format!("run {run}'s Job"), || {
            seen.extend(
                jobs(&kubeconfig)
                    .into_iter()
                    .map(|(name, at, _)| (name, at)),
            );
            seen.len() > before
        });
        wait_for(60, &format!("run {run}'s Job complete"), || {
            jobs(&kubeconfig).iter().all(|(.., complete)| *complete)
        });
    }
    assert!(seen.len() >= 4, "{seen:?}");
    // Each Job is named by the run's time and annotated with it; no run started twice.
    for (name, at) in &seen {
        let seconds = at.parse::<jiff::Timestamp>().unwrap().as_second();
        assert_eq!(name, &format!("cronjob-sample-{seconds}"));
    }

    // successfulJobsHistoryLimit: 2 keeps the two latest runs. The test clock is real time plus
    // the offset moved, so on a slow machine a real minute may start another run meanwhile:
    // every Job seen joins `seen`, and "latest" is judged against all of them.
    wait_for(60, "only the two latest Jobs kept", || {
        let names: Vec<String> = jobs(&kubeconfig)
            .into_iter()
            .map(|(name, at, _)| {
                seen.insert((name.clone(), at));
                name
            })
            .collect();
        let mut latest = seen.iter().rev().take(2).map(|(n, _)| n);
        names.len() == 2 && latest.all(|n| names.contains(n))
    });
    wait_for(30, "the status naming the last run, none active", || {
        seen.extend(
            jobs(&kubeconfig)
                .into_iter()
                .map(|(name, at, _)| (name, at)),
        );
        let cronjob = get_json(
            &kubeconfig,
            &[
                "get",
                "cronjobs.batch.tutorial.kubebuilder.io",
                "cronjob-sample",
            ],
        );
        cronjob.is_some_and(|c| {
            c["status"]["lastScheduleTime"] == seen.iter().next_back().unwrap().1.as_str()
                && c["status"]["active"].is_null()
        })
    });
    let latest: Vec<String> = seen.iter().rev().take(2).map(|(n, _)| n.clone()).collect();
    // Each Job's Pod ran to completion on the kubelet stand-in.
    for name in &latest {
        let job = get_json(&kubeconfig, &["get", "job", name]).unwrap();
        assert_eq!(job["status"]["succeeded"], 1, "{job:#}");
    }
    assert_eq!(
        host.sample(r#"controller_runtime_reconcile_errors_total{controller="cronjob"}"#),
        Some(0.0),
        "{}",
        host.log()
    );
    host.assert_quiet("host's");
}
