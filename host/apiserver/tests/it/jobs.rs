//! kube-controller-manager's Job, CronJob and TTL-after-finished controllers in the embedded
//! server: the tests play the kubelet by writing Pods' status, as a cluster's would.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Timelike, Utc};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wasmctrl_apiserver::ApiServer;

use crate::common;
use common::{condition, eventually};

const FINALIZER: &str = "batch.kubernetes.io/job-tracking";
const INDEX: &str = "batch.kubernetes.io/job-completion-index";

fn server() -> ApiServer {
    ApiServer::builder()
        .gc(true)
        .workloads(true)
        .build()
        .unwrap()
}

fn job_spec(extra: Value) -> Value {
    let mut spec = json!({"template": {"spec": {"restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox"}]}}});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    spec
}

async fn create_job(client: &Client, name: &str, spec: Value) -> Value {
    let jobs: Api<Job> = Api::default_namespaced(client.clone());
    let job = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    json!(jobs.create(&PostParams::default(), &job).await.unwrap())
}

async fn job(client: &Client, name: &str) -> Value {
    let jobs: Api<Job> = Api::default_namespaced(client.clone());
    json!(jobs.get(name).await.unwrap())
}

/// The Job's Pods (by its `job-name` label), as JSON, oldest first.
async fn pods_of(client: &Client, job: &str) -> Vec<Value> {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    let mut list: Vec<Value> = (pods.list(&lp).await.unwrap().items.iter())
        .map(|p| json!(p))
        .collect();
    list.sort_by_key(|p| {
        p["metadata"]["creationTimestamp"]
            .as_str()
            .map(String::from)
    });
    list
}

fn running(pods: &[Value]) -> Vec<&Value> {
    pods.iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
        .collect()
}

fn name(o: &Value) -> String {
    o["metadata"]["name"].as_str().unwrap().to_string()
}

fn has_finalizer(pod: &Value) -> bool {
    (pod["metadata"]["finalizers"].as_array()).is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// Plays the kubelet: the Pod ends in `phase`.
async fn finish(client: &Client, pod: &str, phase: &str) {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let status = json!({"status": {"phase": phase}});
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

fn condition_types(o: &Value) -> Vec<&str> {
    (o["status"]["conditions"].as_array().into_iter().flatten())
        .filter_map(|c| c["type"].as_str())
        .collect()
}

fn time(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap())
        .unwrap()
        .to_utc()
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// As kube-controller-manager runs a Job: `parallelism` Pods at a time (named after it,
/// controlled by it, labelled with it, held by the tracking finalizer until counted) until
/// `completions` succeed, then `SuccessCriteriaMet` and `Complete` and kube's status.
#[tokio::test]
async fn a_job_runs_its_completions_parallelism_at_a_time() {
    let server = server();
    let client = server.client();
    let created = create_job(
        &client,
        "count",
        job_spec(json!({"completions": 3, "parallelism": 2})),
    )
    .await;
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let first = eventually("two Pods running", || async {
        let pods = pods_of(&client, "count").await;
        let counted = job(&client, "count").await["status"]["active"] == 2;
        (pods.len() == 2 && counted).then_some(pods)
    })
    .await;
    for pod in &first {
        let meta = &pod["metadata"];
        assert_eq!(meta["generateName"], "count-");
        assert!(name(pod).starts_with("count-"));
        let owner = &meta["ownerReferences"][0];
        assert_eq!(
            (
                &owner["kind"],
                &owner["name"],
                &owner["uid"],
                &owner["controller"]
            ),
            (&json!("Job"), &json!("count"), &json!(uid), &json!(true))
        );
        assert!(has_finalizer(pod), "{pod}");
        for label in ["batch.kubernetes.io/controller-uid", "controller-uid"] {
            assert_eq!(meta["labels"][label], json!(uid));
        }
        for label in ["batch.kubernetes.io/job-name", "job-name"] {
            assert_eq!(meta["labels"][label], "count");
        }
    }
    let mut status = job(&client, "count").await["status"].clone();
    assert!(status["startTime"].is_string());
    status.as_object_mut().unwrap().remove("startTime");
    assert_eq!(
        status,
        json!({"active": 2, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}})
    );

    finish(&client, &name(&first[0]), "Succeeded").await;
    let pods = eventually("a third Pod for the last completion", || async {
        let pods = pods_of(&client, "count").await;
        let status = job(&client, "count").await["status"].clone();
        (pods.len() == 3 && status["succeeded"] == 1 && status["active"] == 2).then_some(pods)
    })
    .await;
    let counted = pods.iter().find(|p| name(p) == name(&first[0])).unwrap();
    assert!(!has_finalizer(counted), "a counted Pod loses its finalizer");
    for pod in running(&pods) {
        finish(&client, &name(pod), "Succeeded").await;
    }
    let done = eventually("the Job complete", || async {
        let j = job(&client, "count").await;
        condition(&j, "Complete").is_some().then_some(j)
    })
    .await;
    assert_eq!(condition_types(&done), ["SuccessCriteriaMet", "Complete"]);
    for kind in ["SuccessCriteriaMet", "Complete"] {
        let c = condition(&done, kind).unwrap();
        assert_eq!(
            (&c["status"], &c["reason"], &c["message"]),
            (
                &json!("True"),
                &json!("CompletionsReached"),
                &json!("Reached expected number of succeeded pods")
            )
        );
        assert!(c["lastProbeTime"].is_string() && c["lastTransitionTime"].is_string());
    }
    let status = &done["status"];
    assert_eq!(
        status["completionTime"],
        condition(&done, "Complete").unwrap()["lastTransitionTime"]
    );
    assert_eq!(
        (&status["succeeded"], &status["active"], &status["failed"]),
        (&json!(3), &Value::Null, &Value::Null)
    );
    assert_eq!(
        (
            &status["ready"],
            &status["terminating"],
            &status["uncountedTerminatedPods"]
        ),
        (&json!(0), &json!(0), &json!({}))
    );
    let pods = pods_of(&client, "count").await;
    assert_eq!(pods.len(), 3);
    assert!(pods.iter().all(|p| !has_finalizer(p)));
}

/// A Job with more failed Pods than its `backoffLimit` fails (`FailureTarget`, then `Failed`
/// once no Pod is terminating) and deletes its running Pods, which count as failed.
#[tokio::test]
async fn a_job_past_its_backoff_limit_fails_and_deletes_its_pods() {
    let server = server();
    let client = server.client();
    let spec = job_spec(json!({"completions": 4, "parallelism": 2, "backoffLimit": 0}));
    create_job(&client, "fragile", spec).await;
    let pods = eventually("two Pods", || async {
        let pods = pods_of(&client, "fragile").await;
        (pods.len() == 2).then_some(pods)
    })
    .await;
    finish(&client, &name(&pods[0]), "Failed").await;
    let failed = eventually("the Job failed", || async {
        let j = job(&client, "fragile").await;
        condition(&j, "Failed").is_some().then_some(j)
    })
    .await;
    assert_eq!(condition_types(&failed), ["FailureTarget", "Failed"]);
    for kind in ["FailureTarget", "Failed"] {
        let c = condition(&failed, kind).unwrap();
        assert_eq!(
            (&c["status"], &c["reason"], &c["message"]),
            (
                &json!("True"),
                &json!("BackoffLimitExceeded"),
                &json!("Job has reached the specified backoff limit")
            )
        );
    }
    let status = &failed["status"];
    assert_eq!(
        (&status["failed"], &status["active"], &status["terminating"]),
        (&json!(2), &Value::Null, &json!(0))
    );
    assert!(status["completionTime"].is_null());
    let left = pods_of(&client, "fragile").await;
    assert_eq!(left.len(), 1, "the running Pod was deleted: {left:?}");
    assert_eq!(name(&left[0]), name(&pods[0]));
    assert!(!has_finalizer(&left[0]));
}

/// A failed Pod is replaced only after kube's backoff: 10 s after the failure (its
/// container's exit), and the failure is counted.
#[tokio::test]
async fn a_failed_pod_is_replaced_after_the_backoff_delay() {
    let server = server();
    let client = server.client();
    create_job(&client, "retry", job_spec(json!({"backoffLimit": 3}))).await;
    let first = eventually("a Pod", || async {
        pods_of(&client, "retry").await.into_iter().next()
    })
    .await;
    let exited = Utc::now().with_nanosecond(0).unwrap() - TimeDelta::seconds(7);
    let status = json!({"status": {"phase": "Failed", "containerStatuses": [{"name": "c",
        "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 1, "reason": "Error",
            "startedAt": rfc3339(exited - TimeDelta::seconds(1)), "finishedAt": rfc3339(exited)}}}]}});
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.patch_status(
        &name(&first),
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .unwrap();
    let counted = eventually("the failure counted", || async {
        let j = job(&client, "retry").await;
        (j["status"]["failed"] == 1).then_some(j)
    })
    .await;
    assert!(
        counted["status"]["active"].is_null(),
        "no replacement yet: {counted}"
    );
    let replacement = eventually("a replacement Pod", || async {
        let pods = pods_of(&client, "retry").await;
        pods.into_iter().find(|p| name(p) != name(&first))
    })
    .await;
    let waited = time(&replacement["metadata"]["creationTimestamp"]) - exited;
    assert!(
        waited >= TimeDelta::seconds(10) && waited < TimeDelta::seconds(14),
        "replaced {waited} after the failure"
    );
    eventually("the replacement counted as active", || async {
        let j = job(&client, "retry").await;
        (j["status"]["active"] == 1 && j["status"]["failed"] == 1).then_some(())
    })
    .await;
}

/// An Indexed Job runs one Pod per completion index (`<job>-<i>-<suffix>`, hostname
/// `<job>-<i>`, the index as annotation, label and `JOB_COMPLETION_INDEX`) and records the
/// succeeded indexes as kube writes them.
#[tokio::test]
async fn an_indexed_job_runs_each_index_once() {
    let server = server();
    let client = server.client();
    let spec = job_spec(json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3}));
    create_job(&client, "idx", spec).await;
    let pods = eventually("three Pods", || async {
        let pods = pods_of(&client, "idx").await;
        (pods.len() == 3).then_some(pods)
    })
    .await;
    let mut by_index = Vec::new();
    for pod in &pods {
        let index = pod["metadata"]["annotations"][INDEX]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(pod["metadata"]["labels"][INDEX], json!(index));
        assert!(
            name(pod).starts_with(&format!("idx-{index}-")),
            "{}",
            name(pod)
        );
        assert_eq!(pod["spec"]["hostname"], json!(format!("idx-{index}")));
        let env = &pod["spec"]["containers"][0]["env"][0];
        assert_eq!(env["name"], "JOB_COMPLETION_INDEX");
        assert_eq!(
            env["valueFrom"]["fieldRef"]["fieldPath"],
            format!("metadata.labels['{INDEX}']")
        );
        by_index.push((index, name(pod)));
    }
    by_index.sort();
    let indexes: Vec<&str> = by_index.iter().map(|(i, _)| i.as_str()).collect();
    assert_eq!(indexes, ["0", "1", "2"]);
    finish(&client, &by_index[0].1, "Succeeded").await;
    finish(&client, &by_index[2].1, "Succeeded").await;
    eventually("indexes 0 and 2 completed", || async {
        let s = job(&client, "idx").await["status"].clone();
        (s["completedIndexes"] == "0,2" && s["succeeded"] == 2 && s["active"] == 1).then_some(())
    })
    .await;
    finish(&client, &by_index[1].1, "Succeeded").await;
    let done = eventually("the Job complete", || async {
        let j = job(&client, "idx").await;
        condition(&j, "Complete").is_some().then_some(j)
    })
    .await;
    assert_eq!(done["status"]["completedIndexes"], "0-2");
    assert_eq!(done["status"]["succeeded"], 3);
    assert_eq!(pods_of(&client, "idx").await.len(), 3, "no index ran twice");
}

/// Suspending a Job deletes its running Pods (not counted as failures) and says so in a
/// `Suspended` condition; resuming it starts Pods again and restarts its clock.
#[tokio::test]
async fn suspending_a_job_deletes_its_pods_and_resuming_restarts_them() {
    let server = server();
    let client = server.client();
    let jobs: Api<Job> = Api::default_namespaced(client.clone());
    create_job(
        &client,
        "pause",
        job_spec(json!({"completions": 2, "parallelism": 2})),
    )
    .await;
    eventually("two Pods", || async {
        (pods_of(&client, "pause").await.len() == 2).then_some(())
    })
    .await;
    let started = time(&job(&client, "pause").await["status"]["startTime"]);
    let suspend = |on: bool| json!({"spec": {"suspend": on}});
    jobs.patch(
        "pause",
        &PatchParams::default(),
        &Patch::Merge(&suspend(true)),
    )
    .await
    .unwrap();
    let suspended = eventually("the Pods gone and the Job suspended", || async {
        let j = job(&client, "pause").await;
        let gone = pods_of(&client, "pause").await.is_empty();
        let settled = j["status"]["terminating"] == 0;
        (gone && settled && condition(&j, "Suspended").is_some()).then_some(j)
    })
    .await;
    let c = condition(&suspended, "Suspended").unwrap();
    assert_eq!(
        (&c["status"], &c["reason"], &c["message"]),
        (
            &json!("True"),
            &json!("JobSuspended"),
            &json!("Job suspended")
        )
    );
    let status = &suspended["status"];
    assert_eq!(
        (&status["active"], &status["failed"], &status["terminating"]),
        (&Value::Null, &Value::Null, &json!(0))
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    jobs.patch(
        "pause",
        &PatchParams::default(),
        &Patch::Merge(&suspend(false)),
    )
    .await
    .unwrap();
    let resumed = eventually("two Pods again", || async {
        let j = job(&client, "pause").await;
        (pods_of(&client, "pause").await.len() == 2 && j["status"]["active"] == 2).then_some(j)
    })
    .await;
    let c = condition(&resumed, "Suspended").unwrap();
    assert_eq!(
        (&c["status"], &c["reason"], &c["message"]),
        (&json!("False"), &json!("JobResumed"), &json!("Job resumed"))
    );
    assert!(time(&resumed["status"]["startTime"]) > started);
}

/// A Job running past `activeDeadlineSeconds` fails with `DeadlineExceeded`.
#[tokio::test]
async fn a_job_past_its_deadline_fails() {
    let server = server();
    let client = server.client();
    create_job(
        &client,
        "late",
        job_spec(json!({"activeDeadlineSeconds": 1})),
    )
    .await;
    let failed = eventually("the Job failed", || async {
        let j = job(&client, "late").await;
        condition(&j, "Failed").is_some().then_some(j)
    })
    .await;
    assert_eq!(condition_types(&failed), ["FailureTarget", "Failed"]);
    let c = condition(&failed, "Failed").unwrap();
    assert_eq!(
        (&c["reason"], &c["message"]),
        (
            &json!("DeadlineExceeded"),
            &json!("Job was active longer than specified deadline")
        )
    );
    assert_eq!(failed["status"]["failed"], 1);
    assert!(pods_of(&client, "late").await.is_empty());
}

/// A finished Job with `ttlSecondsAfterFinished` is deleted, its Pods with it.
#[tokio::test]
async fn a_finished_job_is_deleted_after_its_ttl() {
    let server = server();
    let client = server.client();
    create_job(
        &client,
        "brief",
        job_spec(json!({"ttlSecondsAfterFinished": 1})),
    )
    .await;
    let pod = eventually("a Pod", || async {
        pods_of(&client, "brief").await.into_iter().next()
    })
    .await;
    finish(&client, &name(&pod), "Succeeded").await;
    let jobs: Api<Job> = Api::default_namespaced(client.clone());
    eventually("the Job complete", || async {
        let j = job(&client, "brief").await;
        condition(&j, "Complete").is_some().then_some(())
    })
    .await;
    eventually("the Job and its Pod deleted", || async {
        let gone = matches!(jobs.get("brief").await, Err(kube::Error::Api(e)) if e.code == 404);
        (gone && pods_of(&client, "brief").await.is_empty()).then_some(())
    })
    .await;
}

async fn create_cron_job(client: &Client, name: &str, spec: Value) -> Value {
    let api: Api<CronJob> = Api::default_namespaced(client.clone());
    let mut full = json!({"jobTemplate": {"spec": job_spec(json!({}))}});
    for (k, v) in spec.as_object().unwrap() {
        full[k] = v.clone();
    }
    let cj = serde_json::from_value(json!({"metadata": {"name": name}, "spec": full})).unwrap();
    json!(api.create(&PostParams::default(), &cj).await.unwrap())
}

async fn cron_job(client: &Client, name: &str) -> Value {
    let api: Api<CronJob> = Api::default_namespaced(client.clone());
    json!(api.get(name).await.unwrap())
}

async fn patch_cron_job_status(client: &Client, name: &str, status: Value) {
    let api: Api<CronJob> = Api::default_namespaced(client.clone());
    let patch = json!({"status": status});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The CronJob's Jobs (by their controller reference), by name.
async fn jobs_of(client: &Client, cj: &str) -> Vec<Value> {
    let jobs: Api<Job> = Api::default_namespaced(client.clone());
    let mut list: Vec<Value> = (jobs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter())
    .map(|j| json!(j))
    .filter(|j| {
        (j["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten())
        .any(|r| r["kind"] == "CronJob" && r["name"] == cj && r["controller"] == true)
    })
    .filter(|j| j["metadata"]["deletionTimestamp"].is_null())
    .collect();
    list.sort_by_key(name);
    list
}

/// A Job of a CronJob's, made by hand (`suspend`ed, so it runs no Pod).
async fn own_job(client: &Client, cj: &Value, name: &str) -> Value {
    let owner = json!({"apiVersion": "batch/v1", "kind": "CronJob", "name": cj["metadata"]["name"],
        "uid": cj["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true});
    let jobs: Api<Job> = Api::default_namespaced(client.clone());
    let job = serde_json::from_value(
        json!({"metadata": {"name": name, "ownerReferences": [owner]},
        "spec": job_spec(json!({"suspend": true}))}),
    )
    .unwrap();
    json!(jobs.create(&PostParams::default(), &job).await.unwrap())
}

/// Marks a Job finished as its controller would: `Complete` (or `Failed`), started at
/// `started`.
async fn end_job(client: &Client, name: &str, started: DateTime<Utc>, complete: bool) -> Value {
    let jobs: Api<Job> = Api::default_namespaced(client.clone());
    let at = rfc3339(started + TimeDelta::seconds(30));
    let cond = |kind: &str, reason: &str| {
        json!({"type": kind, "status": "True", "reason": reason, "message": "by the test",
            "lastProbeTime": at, "lastTransitionTime": at})
    };
    let status = if complete {
        json!({"startTime": rfc3339(started), "completionTime": at, "succeeded": 1,
            "conditions": [cond("SuccessCriteriaMet", "CompletionsReached"),
                cond("Complete", "CompletionsReached")]})
    } else {
        json!({"startTime": rfc3339(started), "failed": 1,
            "conditions": [cond("FailureTarget", "BackoffLimitExceeded"),
                cond("Failed", "BackoffLimitExceeded")]})
    };
    let patch = json!({"status": status});
    json!(
        jobs.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap()
    )
}

fn reference(job: &Value) -> Value {
    let meta = &job["metadata"];
    json!({"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
        "namespace": meta["namespace"], "uid": meta["uid"]})
}

/// A schedule at the minute half an hour from now, every hour: its most recent time is about
/// half an hour ago and the next one half an hour ahead, so nothing comes due during a test.
fn hourly_far_from_now() -> (String, DateTime<Utc>) {
    let now = Utc::now();
    let minute = (now.minute() + 30) % 60;
    let mut last = now.with_minute(minute).unwrap().with_second(0).unwrap();
    last = last.with_nanosecond(0).unwrap();
    if last > now {
        last -= TimeDelta::hours(1);
    }
    (format!("{minute} * * * *"), last)
}

/// A CronJob whose last scheduled time lies minutes back has missed several times: as kube's
/// controller, it starts one Job, for the most recent, named `<cronjob>-<minutes since the
/// epoch>`, from its template, annotated with the time, and lists it as active.
#[tokio::test]
async fn a_cron_job_starts_the_most_recent_missed_schedule() {
    let server = server();
    let client = server.client();
    let spec = json!({"schedule": "*/1 * * * *", "jobTemplate": {
        "metadata": {"labels": {"app": "tick"}, "annotations": {"note": "from the template"}},
        "spec": job_spec(json!({}))}});
    let cj = create_cron_job(&client, "tick", spec).await;
    let before = Utc::now()
        .with_second(0)
        .unwrap()
        .with_nanosecond(0)
        .unwrap();
    let pushed_back = rfc3339(before - TimeDelta::minutes(5));
    patch_cron_job_status(&client, "tick", json!({"lastScheduleTime": pushed_back})).await;
    let jobs = eventually("a Job", || async {
        let jobs = jobs_of(&client, "tick").await;
        (!jobs.is_empty()).then_some(jobs)
    })
    .await;
    let job = jobs.last().unwrap();
    let minutes: i64 = name(job).strip_prefix("tick-").unwrap().parse().unwrap();
    let scheduled = DateTime::from_timestamp(minutes * 60, 0).unwrap();
    assert!(
        scheduled >= before && scheduled <= Utc::now(),
        "{scheduled}"
    );
    assert!(
        jobs.iter()
            .all(|j| name(j) >= format!("tick-{}", before.timestamp() / 60)),
        "only the most recent missed time starts: {jobs:?}"
    );
    let meta = &job["metadata"];
    assert_eq!(
        meta["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"],
        rfc3339(scheduled)
    );
    assert_eq!(meta["annotations"]["note"], "from the template");
    assert_eq!(meta["labels"]["app"], "tick");
    let owner = &meta["ownerReferences"][0];
    assert_eq!(
        (&owner["uid"], &owner["controller"]),
        (&cj["metadata"]["uid"], &json!(true))
    );
    let status = eventually("the CronJob's status", || async {
        let s = cron_job(&client, "tick").await["status"].clone();
        (s["lastScheduleTime"] != pushed_back.as_str()).then_some(s)
    })
    .await;
    let latest = jobs_of(&client, "tick").await.last().cloned().unwrap();
    assert_eq!(
        status["lastScheduleTime"],
        latest["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    );
    let mut listed = status["active"].as_array().unwrap().last().unwrap().clone();
    assert!(
        listed
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion")
            .is_some()
    );
    assert_eq!(listed, reference(&latest));
}

/// With `concurrencyPolicy: Forbid` a due time is skipped while a Job runs; it starts once
/// none does.
#[tokio::test]
async fn a_forbidding_cron_job_starts_nothing_while_a_job_runs() {
    let server = server();
    let client = server.client();
    let (schedule, due) = hourly_far_from_now();
    let cj = create_cron_job(
        &client,
        "solo",
        json!({"schedule": schedule, "concurrencyPolicy": "Forbid"}),
    )
    .await;
    let runner = own_job(&client, &cj, "solo-runner").await;
    let pushed_back = rfc3339(Utc::now() - TimeDelta::hours(3));
    let status = json!({"active": [reference(&runner)], "lastScheduleTime": pushed_back});
    patch_cron_job_status(&client, "solo", status).await;
    // A finished Job, which the same pass of the controller records as the last success.
    own_job(&client, &cj, "solo-done").await;
    let done = end_job(&client, "solo-done", Utc::now() - TimeDelta::hours(4), true).await;
    let status = eventually("the last success recorded", || async {
        let s = cron_job(&client, "solo").await["status"].clone();
        (s["lastSuccessfulTime"] == done["status"]["completionTime"]).then_some(s)
    })
    .await;
    assert_eq!(status["lastScheduleTime"], pushed_back.as_str());
    let names: Vec<String> = jobs_of(&client, "solo").await.iter().map(name).collect();
    assert_eq!(names, ["solo-done", "solo-runner"]);

    end_job(
        &client,
        "solo-runner",
        Utc::now() - TimeDelta::hours(1),
        true,
    )
    .await;
    let expected = format!("solo-{}", due.timestamp() / 60);
    eventually("the due Job started", || async {
        let names: Vec<String> = jobs_of(&client, "solo").await.iter().map(name).collect();
        names.contains(&expected).then_some(())
    })
    .await;
    let status = cron_job(&client, "solo").await["status"].clone();
    assert_eq!(status["lastScheduleTime"], rfc3339(due));
    assert_eq!(status["active"][0]["name"], expected.as_str());
    assert_eq!(status["active"].as_array().unwrap().len(), 1);
}

/// With `concurrencyPolicy: Replace` the running Job is deleted when the next one starts.
#[tokio::test]
async fn a_replacing_cron_job_deletes_the_running_job() {
    let server = server();
    let client = server.client();
    let (schedule, due) = hourly_far_from_now();
    let cj = create_cron_job(
        &client,
        "swap",
        json!({"schedule": schedule, "concurrencyPolicy": "Replace"}),
    )
    .await;
    let runner = own_job(&client, &cj, "swap-runner").await;
    let pushed_back = rfc3339(Utc::now() - TimeDelta::hours(3));
    let status = json!({"active": [reference(&runner)], "lastScheduleTime": pushed_back});
    patch_cron_job_status(&client, "swap", status).await;
    let expected = format!("swap-{}", due.timestamp() / 60);
    let jobs = eventually("the runner replaced", || async {
        let names: Vec<String> = jobs_of(&client, "swap").await.iter().map(name).collect();
        (names == [expected.as_str()]).then_some(names)
    })
    .await;
    assert_eq!(jobs, [expected.as_str()]);
    let status = cron_job(&client, "swap").await["status"].clone();
    let active = status["active"].as_array().unwrap();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0]["name"], expected.as_str());
}

/// Past `successfulJobsHistoryLimit` (3) and `failedJobsHistoryLimit` (1), the CronJob deletes
/// its oldest finished Jobs, by start time.
#[tokio::test]
async fn a_cron_job_keeps_its_history_limits() {
    let server = server();
    let client = server.client();
    let (schedule, _) = hourly_far_from_now();
    let cj = create_cron_job(
        &client,
        "keep",
        json!({"schedule": schedule, "suspend": true}),
    )
    .await;
    let long_ago = Utc::now() - TimeDelta::hours(10);
    // Finished newest first, so the oldest is the last one to finish.
    for (job, hours, complete) in [
        ("keep-s4", 4, true),
        ("keep-s3", 3, true),
        ("keep-s2", 2, true),
        ("keep-f2", 2, false),
        ("keep-s1", 1, true),
        ("keep-f1", 1, false),
    ] {
        own_job(&client, &cj, job).await;
        end_job(&client, job, long_ago + TimeDelta::hours(hours), complete).await;
    }
    let names = eventually("the oldest finished Jobs deleted", || async {
        let names: Vec<String> = jobs_of(&client, "keep").await.iter().map(name).collect();
        (names.len() == 4).then_some(names)
    })
    .await;
    assert_eq!(names, ["keep-f2", "keep-s2", "keep-s3", "keep-s4"]);
}

/// With the kubelet stand-in running the Pods: a Job's Pods run and succeed, and the Job
/// completes; a Pod exiting 1 fails its Job (`backoffLimit: 0`); a Pod restarted in place
/// (`OnFailure`) fails its Job once its restarts reach the limit, after the Pod has stopped.
#[tokio::test]
async fn jobs_run_on_the_kubelet_stand_in() {
    let kubelet = wasmctrl_apiserver::Kubelet {
        nodes: 1,
        start: Duration::from_millis(200),
        run: Duration::from_millis(300),
    };
    let server = ApiServer::builder()
        .gc(true)
        .workloads(true)
        .kubelet(Some(kubelet))
        .build()
        .unwrap();
    let client = server.client();
    create_job(
        &client,
        "ok",
        job_spec(json!({"completions": 2, "parallelism": 2})),
    )
    .await;
    let exit_1 = json!({"kubelet.wasmctrl.dev/exit-code": "1"});
    let mut failing = job_spec(json!({"backoffLimit": 0}));
    failing["template"]["metadata"] = json!({"annotations": exit_1});
    create_job(&client, "bad", failing).await;
    let mut looping = job_spec(json!({"backoffLimit": 1}));
    looping["template"]["metadata"] = json!({"annotations": exit_1});
    looping["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    create_job(&client, "loop", looping).await;

    let ok = eventually("the Job complete", || async {
        let j = job(&client, "ok").await;
        condition(&j, "Complete").is_some().then_some(j)
    })
    .await;
    assert_eq!(ok["status"]["succeeded"], 2);
    let bad = eventually("the Job failed", || async {
        let j = job(&client, "bad").await;
        condition(&j, "Failed").is_some().then_some(j)
    })
    .await;
    assert_eq!(
        condition(&bad, "Failed").unwrap()["reason"],
        "BackoffLimitExceeded"
    );
    assert_eq!(bad["status"]["failed"], 1);
    let looped = eventually("the restarted Job failed", || async {
        let j = job(&client, "loop").await;
        condition(&j, "Failed").is_some().then_some(j)
    })
    .await;
    assert_eq!(condition_types(&looped), ["FailureTarget", "Failed"]);
    assert_eq!(looped["status"]["terminating"], 0);
    assert!(
        pods_of(&client, "loop").await.is_empty(),
        "its Pod stopped first"
    );
}
