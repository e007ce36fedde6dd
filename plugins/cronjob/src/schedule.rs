//! When the CronJob runs: the most recent scheduled time it missed and the next one, as the
//! tutorial's `getNextSchedule` computes them.

use std::time::Duration;

use croner::Cron;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use crate::CronJobSpec;

/// More missed runs than this are an error, as in the tutorial (and kube's controller): the
/// clock is wrong or the deadline too long.
const MAX_MISSED: usize = 100;

/// A CronJob's runs around `now`.
#[derive(Debug, Clone, PartialEq)]
pub struct Runs {
    /// The latest scheduled time at or before `now` not yet run.
    pub missed: Option<Timestamp>,
    /// The first scheduled time after `now`.
    pub next: Timestamp,
}

impl Runs {
    /// The runs of `spec` at `now`, counting from `since` (its last scheduled run, or its
    /// creation).
    ///
    /// # Errors
    ///
    /// An unparsable schedule, or more than 100 missed runs.
    pub fn of(spec: &CronJobSpec, since: Timestamp, now: Timestamp) -> Result<Self, String> {
        let cron: Cron = (spec.schedule.parse())
            .map_err(|e| format!("unparseable schedule {:?}: {e}", spec.schedule))?;
        let mut earliest = since;
        if let Some(deadline) = spec.starting_deadline_seconds {
            // A deadline reaching before the representable past reaches back to the start.
            let since =
                (now.checked_sub(SignedDuration::from_secs(deadline))).unwrap_or(Timestamp::MIN);
            earliest = earliest.max(since);
        }
        let utc = |t: Timestamp| t.to_zoned(TimeZone::UTC);
        let mut missed = None;
        let mut count = 0;
        for run in cron.iter_after(utc(earliest)) {
            let run = run.timestamp();
            if run > now {
                return Ok(Runs { missed, next: run });
            }
            count += 1;
            if count > MAX_MISSED {
                return Err(format!(
                    "too many missed start times (> {MAX_MISSED}); set or decrease \
                     .spec.startingDeadlineSeconds or check clock skew"
                ));
            }
            missed = Some(run);
        }
        Err(format!("schedule {:?} never runs again", spec.schedule))
    }

    /// Whether the missed run is past `deadline` seconds, so must not start.
    pub fn too_late(&self, deadline: Option<i64>, now: Timestamp) -> bool {
        match (self.missed, deadline) {
            (Some(missed), Some(deadline)) => (missed
                .checked_add(SignedDuration::from_secs(deadline)))
            .is_ok_and(|latest| latest < now),
            _ => false,
        }
    }

    /// How long until the next run (at least a second, so a run at `now` is not missed by a
    /// rounding).
    pub fn until_next(&self, now: Timestamp) -> Duration {
        let wait = self.next.duration_since(now).unsigned_abs();
        wait.max(Duration::from_secs(1))
    }
}
