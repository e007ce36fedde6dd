//! The CronJob's Jobs: which are active, which finished, which to delete, and the Job of a run.

use std::collections::BTreeMap;

use jiff::Timestamp;
use wasmctrl_sdk::ResourceExt;
use wasmctrl_sdk::k8s_openapi::api::batch::v1::Job;
use wasmctrl_sdk::k8s_openapi::api::core::v1::ObjectReference;
use wasmctrl_sdk::kube::child_meta;

use crate::{CronJob, SCHEDULED_AT, scheduled_at};

/// The Jobs a CronJob owns, by state, each list oldest first.
#[derive(Debug, Default)]
pub struct Children {
    /// Not finished.
    pub active: Vec<Job>,
    /// Finished with condition `Complete`.
    pub successful: Vec<Job>,
    /// Finished with condition `Failed`.
    pub failed: Vec<Job>,
    /// The latest scheduled time among them.
    pub most_recent: Option<Timestamp>,
}

impl Children {
    /// Sorts `jobs` by state, oldest first (by start time, then name).
    pub fn sort(mut jobs: Vec<Job>) -> Self {
        jobs.sort_by_key(|job| (started(job), job.name_any()));
        let mut children = Children::default();
        for job in jobs {
            if let Some(at) = scheduled_at(&job) {
                children.most_recent = children.most_recent.max(Some(at));
            }
            match finished(&job) {
                None => children.active.push(job),
                Some("Complete") => children.successful.push(job),
                Some(_) => children.failed.push(job),
            }
        }
        children
    }
}

/// `Complete` or `Failed` once the Job has that condition `True`.
pub fn finished(job: &Job) -> Option<&'static str> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    ["Complete", "Failed"].into_iter().find(|wanted| {
        conditions
            .iter()
            .any(|c| c.type_ == *wanted && c.status == "True")
    })
}

fn started(job: &Job) -> Option<Timestamp> {
    Some(job.status.as_ref()?.start_time.as_ref()?.0)
}

/// The oldest of `finished` beyond `limit` (none without one).
pub fn beyond(finished: &[Job], limit: Option<i32>) -> &[Job] {
    let keep = limit.map_or(finished.len(), |l| usize::try_from(l).unwrap_or(0));
    &finished[..finished.len().saturating_sub(keep)]
}

/// A reference to `job`, for `status.active`.
pub fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        namespace: job.namespace(),
        name: Some(job.name_any()),
        uid: job.uid(),
        resource_version: job.resource_version(),
        ..ObjectReference::default()
    }
}

/// The Job for the run scheduled at `at`: the template's, named `<cronjob>-<unix seconds>`, with
/// the time in its `scheduled-at` annotation.
pub fn for_run(cronjob: &CronJob, at: Timestamp) -> Job {
    let template = &cronjob.spec.job_template;
    let name = format!("{}-{}", cronjob.name_any(), at.as_second());
    let mut metadata = child_meta(cronjob, &name);
    let from = template.metadata.as_ref();
    let mut annotations: BTreeMap<String, String> =
        from.and_then(|m| m.annotations.clone()).unwrap_or_default();
    annotations.insert(SCHEDULED_AT.into(), at.to_string());
    metadata.annotations = Some(annotations);
    metadata.labels = from.and_then(|m| m.labels.clone());
    Job {
        metadata,
        spec: template.spec.clone(),
        ..Job::default()
    }
}
