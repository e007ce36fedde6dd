//! The `batch` group's strategies.

mod cron_job;
mod job;

pub(crate) use cron_job::{CRON_JOB, CronJob};
pub(crate) use job::{JOB, Job};
