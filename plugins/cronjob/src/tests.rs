//! The tutorial's behaviour, natively, through the SDK's harness.

use serde_json::{Value, json};
use wasmctrl_sdk::testing::Harness;

use super::*;

const UID: &str = "5d0c8a4e-2f1b-4e7a-9c3d-8b6a4f2e1d09";
const CREATED: &str = "2026-11-28T10:00:30Z";

fn cronjob(spec: Value, status: Value) -> Value {
    json!({
        "apiVersion": "batch.tutorial.kubebuilder.io/v1", "kind": "CronJob",
        "metadata": {"name": "sample", "namespace": "default", "uid": UID,
            "creationTimestamp": CREATED},
        "spec": spec,
        "status": status,
    })
}

fn every_minute() -> Value {
    json!({"schedule": "*/1 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
        "restartPolicy": "OnFailure",
        "containers": [{"name": "hello", "image": "busybox", "args": ["date"]}]}}}}})
}

/// A Job of the CronJob's for the run at `at`, finished as `state` (`None`: active).
fn job(at: &str, state: Option<&str>) -> Value {
    let at: Timestamp = at.parse().unwrap();
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": format!("sample-{}", at.as_second()), "namespace": "default",
            "uid": format!("job-{}", at.as_second()),
            "annotations": {SCHEDULED_AT: at.to_string()},
            "ownerReferences": [{"apiVersion": "batch.tutorial.kubebuilder.io/v1",
                "kind": "CronJob", "name": "sample", "uid": UID, "controller": true}]},
        "status": {"startTime": at.to_string()},
    });
    if let Some(state) = state {
        job["status"]["conditions"] = json!([{"type": state, "status": "True"}]);
    }
    job
}

fn reconcile(h: Harness, now: &str, object: &Value) -> Outcome {
    h.now(now).reconcile::<CronJobController>(object).unwrap()
}

#[test]
fn nothing_runs_before_the_first_scheduled_time_which_it_waits_for() {
    let outcome = reconcile(
        Harness::new(),
        "2026-11-28T10:00:45Z",
        &cronjob(every_minute(), json!({})),
    );
    assert!(outcome.applied::<Job>().is_empty(), "{outcome:?}");
    assert_eq!(
        outcome.requeue_after,
        Some(std::time::Duration::from_secs(15))
    );
}

#[test]
fn the_most_recent_missed_run_starts_once_named_by_its_time() {
    let outcome = reconcile(
        Harness::new(),
        "2026-11-28T10:03:10Z",
        &cronjob(every_minute(), json!({})),
    );
    let [job] = &outcome.applied::<Job>()[..] else {
        panic!("one Job: {outcome:?}");
    };
    // Of the runs at 10:01, 10:02 and 10:03 only the latest starts, as in the tutorial.
    let at: Timestamp = "2026-11-28T10:03:00Z".parse().unwrap();
    assert_eq!(
        job.metadata.name.as_deref(),
        Some(format!("sample-{}", at.as_second()).as_str())
    );
    assert_eq!(job.annotations()[SCHEDULED_AT], at.to_string());
    let containers = &job
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers;
    assert_eq!(containers[0].image.as_deref(), Some("busybox"));
    assert_eq!(
        outcome.requeue_after,
        Some(std::time::Duration::from_secs(50))
    );
}

#[test]
fn status_lists_active_jobs_and_the_last_schedule_time() {
    let h = Harness::new()
        .object(job("2026-11-28T10:01:00Z", Some("Complete")))
        .object(job("2026-11-28T10:02:00Z", None));
    let status = json!({"lastScheduleTime": "2026-11-28T10:01:00Z"});
    let outcome = reconcile(h, "2026-11-28T10:02:30Z", &cronjob(every_minute(), status));
    let status: CronJobStatus = outcome.status().expect("a status");
    let active: Vec<_> = status
        .active
        .iter()
        .filter_map(|r| r.name.clone())
        .collect();
    let run: Timestamp = "2026-11-28T10:02:00Z".parse().unwrap();
    assert_eq!(active, [format!("sample-{}", run.as_second())]);
    assert_eq!(status.last_schedule_time, Some(Time(run)));
    assert!(
        outcome.applied::<Job>().is_empty(),
        "10:02 ran already: {outcome:?}"
    );
}

#[test]
fn history_limits_delete_the_oldest_finished_jobs() {
    let mut h = Harness::new();
    for minute in 1..=4 {
        h = h.object(job(
            &format!("2026-11-28T10:0{minute}:00Z"),
            Some("Complete"),
        ));
    }
    h = h.object(job("2026-11-28T10:05:00Z", Some("Failed")));
    let mut spec = every_minute();
    spec["successfulJobsHistoryLimit"] = json!(2);
    spec["failedJobsHistoryLimit"] = json!(0);
    let status = json!({"lastScheduleTime": "2026-11-28T10:05:00Z"});
    let outcome = reconcile(h, "2026-11-28T10:05:30Z", &cronjob(spec, status));
    let deleted: Vec<&str> = outcome.deleted().map(|o| o.name.as_str()).collect();
    let name = |t: &str| format!("sample-{}", t.parse::<Timestamp>().unwrap().as_second());
    assert_eq!(
        deleted,
        [
            name("2026-11-28T10:05:00Z"),
            name("2026-11-28T10:01:00Z"),
            name("2026-11-28T10:02:00Z")
        ]
    );
}

#[test]
fn forbid_skips_a_run_while_one_is_active_and_replace_deletes_it() {
    let h = || Harness::new().object(job("2026-11-28T10:01:00Z", None));
    let status = json!({"lastScheduleTime": "2026-11-28T10:01:00Z"});
    let mut spec = every_minute();
    spec["concurrencyPolicy"] = json!("Forbid");
    let outcome = reconcile(
        h(),
        "2026-11-28T10:02:05Z",
        &cronjob(spec.clone(), status.clone()),
    );
    assert!(outcome.applied::<Job>().is_empty(), "{outcome:?}");

    spec["concurrencyPolicy"] = json!("Replace");
    let outcome = reconcile(h(), "2026-11-28T10:02:05Z", &cronjob(spec, status));
    let deleted: Vec<&str> = outcome.deleted().map(|o| o.name.as_str()).collect();
    let old: Timestamp = "2026-11-28T10:01:00Z".parse().unwrap();
    assert_eq!(deleted, [format!("sample-{}", old.as_second())]);
    assert_eq!(outcome.applied::<Job>().len(), 1);
}

#[test]
fn suspended_starts_nothing_and_a_passed_deadline_skips_the_run() {
    let mut spec = every_minute();
    spec["suspend"] = json!(true);
    let outcome = reconcile(
        Harness::new(),
        "2026-11-28T10:03:10Z",
        &cronjob(spec, json!({})),
    );
    assert!(outcome.applied::<Job>().is_empty(), "{outcome:?}");

    let mut spec = every_minute();
    spec["startingDeadlineSeconds"] = json!(5);
    let outcome = reconcile(
        Harness::new(),
        "2026-11-28T10:03:10Z",
        &cronjob(spec, json!({})),
    );
    assert!(
        outcome.applied::<Job>().is_empty(),
        "10:03 is 10 s late: {outcome:?}"
    );
}

#[test]
fn bad_schedules_and_too_many_missed_runs_are_terminal_errors_naming_the_object() {
    let mut spec = every_minute();
    spec["schedule"] = json!("not a schedule");
    let err = Harness::new()
        .now("2026-11-28T10:03:10Z")
        .reconcile::<CronJobController>(&cronjob(spec, json!({})))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("CronJob default/sample: unparseable schedule"),
        "{err}"
    );

    let err = Harness::new()
        .now("2026-11-28T13:00:00Z")
        .reconcile::<CronJobController>(&cronjob(every_minute(), json!({})))
        .unwrap_err();
    assert!(
        err.to_string().contains("too many missed start times"),
        "{err}"
    );
}

#[test]
fn crd_is_generated_from_the_types() {
    // Without descriptions, as kubebuilder's `crd:maxDescLen=0`: the embedded Job template's
    // documentation would outgrow a plain `kubectl apply`.
    wasmctrl_sdk::testing::check_crd_trimmed::<CronJob>(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/cronjob/crd.yaml"
        ),
        0,
    );
}
