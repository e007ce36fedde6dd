//! kubebuilder's CronJob tutorial (`batch.tutorial.kubebuilder.io/v1`) as a wasmctrl plugin.
//!
//! For each `CronJob` it runs the Job its `jobTemplate` describes at the times its `schedule`
//! gives, as the tutorial's controller does: it lists the Jobs it owns and reports the active
//! ones and the last schedule time in the status ([`jobs`]), deletes finished Jobs beyond the
//! history limits (oldest first), and unless suspended starts the most recent run it missed
//! ([`schedule`]) within `startingDeadlineSeconds`, honouring `concurrencyPolicy`, then asks to
//! be called again at the next scheduled time. Jobs are named `<cronjob>-<unix time of the
//! run>`, so a run is never started twice.

pub mod jobs;
pub mod schedule;

use jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasmctrl_sdk::k8s_openapi::api::batch::v1::{Job, JobTemplateSpec};
use wasmctrl_sdk::k8s_openapi::api::core::v1::ObjectReference;
use wasmctrl_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use wasmctrl_sdk::tracing;
use wasmctrl_sdk::{
    Action, Context, CustomResource, Error, Manifest, NoSettings, ObjectRef, Outcome, Reconcile,
    Reconciler, ResourceExt,
};

use crate::jobs::Children;
use crate::schedule::Runs;

/// The annotation each Job carries with the scheduled time it runs for (RFC 3339).
pub const SCHEDULED_AT: &str = "batch.tutorial.kubebuilder.io/scheduled-at";

/// What a CronJob asks for.
#[derive(CustomResource, Debug, Default, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "batch.tutorial.kubebuilder.io",
    version = "v1",
    kind = "CronJob",
    namespaced,
    status = "CronJobStatus",
    doc = "CronJob is the Schema for the cronjobs API",
    printcolumn = r#"{"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"}"#,
    printcolumn = r#"{"name": "Last Schedule", "type": "date", "jsonPath": ".status.lastScheduleTime"}"#,
    crates(
        kube_core = "::wasmctrl_sdk::kube_core",
        k8s_openapi = "::wasmctrl_sdk::k8s_openapi"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CronJobSpec {
    /// The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.
    #[schemars(length(min = 0))]
    pub schedule: String,
    /// Optional deadline in seconds for starting the job if it misses scheduled time for any
    /// reason. Missed jobs executions will be counted as failed ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<i64>,
    /// Specifies how to treat concurrent executions of a Job: Allow (the default), Forbid or
    /// Replace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    /// Tells the controller to suspend subsequent executions; it does not apply to already
    /// started executions. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Specifies the job that will be created when executing a CronJob.
    pub job_template: JobTemplateSpec,
    /// The number of successful finished jobs to retain; absent keeps them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub successful_jobs_history_limit: Option<i32>,
    /// The number of failed finished jobs to retain; absent keeps them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failed_jobs_history_limit: Option<i32>,
}

/// How to treat a run that comes while an earlier one is still active.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Run it alongside.
    #[default]
    Allow,
    /// Skip it.
    Forbid,
    /// Delete the active Jobs and run it.
    Replace,
}

/// What the controller reports.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// Pointers to currently running jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<ObjectReference>,
    /// The last time the job was successfully scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
}

/// The plugin.
pub struct CronJobController;

impl Reconciler for CronJobController {
    type Object = CronJob;
    type Settings = NoSettings;

    fn manifest(_settings: &NoSettings) -> Result<Manifest, String> {
        Ok(Manifest::for_::<CronJob>("cronjob")
            .version(env!("CARGO_PKG_VERSION"))
            .owns::<Job>())
    }

    fn reconcile(event: Reconcile<CronJob>, ctx: &Context<'_>) -> Result<Outcome, Error> {
        match event {
            Reconcile::Apply(cronjob) => reconcile(&cronjob, ctx),
            // Garbage collection removes its Jobs.
            Reconcile::Cleanup(_) | Reconcile::Gone { .. } => Ok(Outcome::done()),
        }
    }
}

wasmctrl_sdk::export!(CronJobController);

/// The tutorial's reconcile, step by step.
fn reconcile(cronjob: &CronJob, ctx: &Context<'_>) -> Result<Outcome, Error> {
    let now = ctx.now();
    let children = Children::sort(ctx.children::<Job>(cronjob)?);
    let mut actions = Vec::new();

    // The status from what the Jobs say. The last schedule time never goes back: the Job of
    // the latest run may have been deleted by a history limit.
    let reported = (cronjob.status.as_ref()).and_then(|s| s.last_schedule_time.as_ref());
    let last = children.most_recent.max(reported.map(|t| t.0));
    let status = CronJobStatus {
        active: children.active.iter().map(jobs::reference).collect(),
        last_schedule_time: last.map(Time),
    };
    if cronjob.status.as_ref() != Some(&status) {
        actions.push(Action::update_status(&status)?);
    }

    // Old finished Jobs beyond the history limits, oldest first.
    let spec = &cronjob.spec;
    for job in (jobs::beyond(&children.failed, spec.failed_jobs_history_limit).iter()).chain(
        jobs::beyond(&children.successful, spec.successful_jobs_history_limit),
    ) {
        actions.push(delete(job));
    }

    if spec.suspend == Some(true) {
        tracing::debug!("suspended; not starting runs");
        return Ok(Outcome::with(actions));
    }
    let created = cronjob.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let since = last.or(created).unwrap_or(now);
    let runs = Runs::of(spec, since, now)
        .map_err(|e| Error::terminal(format!("CronJob {}: {e}", ctx.key())))?;
    let outcome = |actions| Outcome::with(actions).requeue_after(runs.until_next(now));
    let Some(missed) = runs.missed else {
        return Ok(outcome(actions));
    };
    if runs.too_late(spec.starting_deadline_seconds, now) {
        tracing::info!(run = %missed, "missed the starting deadline; skipping this run");
        return Ok(outcome(actions));
    }
    match spec.concurrency_policy.unwrap_or_default() {
        ConcurrencyPolicy::Forbid if !children.active.is_empty() => {
            tracing::info!(run = %missed, active = children.active.len(), "an earlier run is active; skipping this one (Forbid)");
            return Ok(outcome(actions));
        }
        ConcurrencyPolicy::Replace => {
            for job in &children.active {
                actions.push(delete(job));
            }
        }
        _ => {}
    }
    let job = jobs::for_run(cronjob, missed);
    tracing::info!(job = job.metadata.name.as_deref().unwrap_or_default(), run = %missed, "starting the run");
    actions.push(Action::apply(&job)?);
    Ok(outcome(actions))
}

/// Deleting `job` (its Pods go with it, in the background).
fn delete(job: &Job) -> Action {
    Action::delete(ObjectRef::of::<Job>(
        &job.namespace().unwrap_or_default(),
        &job.name_any(),
    ))
}

/// The time in a Job's `scheduled-at` annotation.
fn scheduled_at(job: &Job) -> Option<Timestamp> {
    job.annotations().get(SCHEDULED_AT)?.parse().ok()
}

#[cfg(test)]
mod tests;
