//! What the host writes in a plugin resource's status: the five conditions, and what serves.
//!
//! - `Pulled`: the module's digest was resolved and its artifact is at hand (pulled and
//!   checked against its digest, or kept in the cache);
//! - `Verified`: the digest is signed by a key the resource gives (`spec.verify.keys`), or no
//!   signature is asked for;
//! - `PermissionsGranted`: the version is approved and the host's identity may make every
//!   request it implies (the preflight);
//! - `Loaded`: the version loaded and now serves;
//! - `Ready`: a version serves and its caches are synced. A newer version that fails leaves the
//!   previous one serving, so `Ready` stays true while another condition says what failed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::plugins::resources::WasmPluginStatus;

/// The condition types, in the order they are written.
pub const TYPES: [&str; 5] = [
    "Pulled",
    "Verified",
    "PermissionsGranted",
    "Loaded",
    "Ready",
];

/// One condition as decided, before its timestamps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// True or false.
    pub ok: bool,
    /// CamelCase reason.
    pub reason: String,
    /// For people.
    pub message: String,
}

impl Verdict {
    /// A true condition.
    pub fn yes(reason: &str, message: impl Into<String>) -> Self {
        Self {
            ok: true,
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// A false condition.
    pub fn no(reason: &str, message: impl Into<String>) -> Self {
        Self {
            ok: false,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// The status to write: a verdict per condition type (absent: `Unknown`, not reached yet) and
/// what serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// By index into [`TYPES`].
    pub verdicts: [Option<Verdict>; 5],
    /// The manifest digest serving.
    pub digest: Option<String>,
    /// The serving plugin's version.
    pub version: Option<String>,
    /// The serving plugin's permissions.
    pub permissions: Vec<String>,
}

impl Report {
    /// Sets condition `type_` (one of [`TYPES`]).
    pub fn set(&mut self, type_: &str, verdict: Verdict) {
        if let Some(i) = TYPES.iter().position(|t| *t == type_) {
            self.verdicts[i] = Some(verdict);
        }
    }

    /// Condition `type_` as decided, if it was.
    pub fn get(&self, type_: &str) -> Option<&Verdict> {
        let i = TYPES.iter().position(|t| *t == type_)?;
        self.verdicts[i].as_ref()
    }

    /// The first false condition, which is what `Ready` reports when nothing serves.
    pub fn first_failure(&self) -> Option<(&'static str, &Verdict)> {
        (TYPES.iter().zip(&self.verdicts))
            .find_map(|(t, v)| v.as_ref().filter(|v| !v.ok).map(|v| (*t, v)))
    }

    /// The status, keeping each condition's `lastTransitionTime` from `previous` while its
    /// status is unchanged, as `meta.SetStatusCondition` does.
    pub fn status(
        &self,
        previous: Option<&WasmPluginStatus>,
        generation: Option<i64>,
        now: Time,
    ) -> WasmPluginStatus {
        let old = |type_: &str| {
            previous.and_then(|p| p.conditions.iter().find(|c| c.type_ == type_).cloned())
        };
        let conditions = (TYPES.iter().zip(&self.verdicts))
            .map(|(type_, verdict)| {
                let (status, reason, message) = match verdict {
                    Some(v) => (
                        if v.ok { "True" } else { "False" },
                        v.reason.clone(),
                        v.message.clone(),
                    ),
                    None => ("Unknown", "Pending".into(), "not reached yet".into()),
                };
                let since = old(type_)
                    .filter(|c| c.status == status)
                    .map_or_else(|| now.clone(), |c| c.last_transition_time);
                Condition {
                    type_: type_.to_string(),
                    status: status.into(),
                    reason,
                    // The API server refuses messages over 32 KiB.
                    message: cut(&message, 32 * 1024 - 16),
                    last_transition_time: since,
                    observed_generation: generation,
                }
            })
            .collect();
        WasmPluginStatus {
            conditions,
            digest: self.digest.clone(),
            version: self.version.clone(),
            permissions: self.permissions.clone(),
            observed_generation: generation,
        }
    }
}

/// `text` cut to at most `max` bytes on a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn transition_times_move_only_when_a_status_changes() {
        let mut report = Report::default();
        report.set("Pulled", Verdict::yes("Pulled", "ok"));
        report.set("Loaded", Verdict::no("LoadFailed", "broken"));
        let first = report.status(None, Some(1), at(10));
        assert_eq!(first.conditions.len(), 5);
        assert_eq!(first.conditions[2].status, "Unknown");
        assert_eq!(report.first_failure().unwrap().0, "Loaded");
        report.set("Loaded", Verdict::yes("Loaded", "fine"));
        let second = report.status(Some(&first), Some(2), at(20));
        assert_eq!(
            second.conditions[0].last_transition_time,
            at(10),
            "Pulled stayed True"
        );
        assert_eq!(
            second.conditions[3].last_transition_time,
            at(20),
            "Loaded turned True"
        );
        assert_eq!(second.observed_generation, Some(2));
        assert_eq!(cut("héllo", 2), "h...");
    }
}
