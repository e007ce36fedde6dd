//! The plugin contract as the host sees it: what a plugin declares ([`Manifest`]) and what it
//! may ask for ([`Intent`]), checked before anything reaches the API server.

pub mod bindings;
mod intent;
mod manifest;

pub use bindings::wit;
pub use intent::{ActionError, Child, Intent, Target, best_effort, check_actions};
pub use manifest::{Manifest, ManifestError, Read};

impl wit::Timestamp {
    /// The current time.
    pub fn now() -> Self {
        Self::from(chrono::Utc::now())
    }

    /// An RFC 3339 time (`2026-11-22T10:00:00Z`).
    pub fn parse(rfc3339: &str) -> Result<Self, chrono::ParseError> {
        chrono::DateTime::parse_from_rfc3339(rfc3339).map(|t| Self::from(t.to_utc()))
    }

    /// The time as RFC 3339 in UTC, to the second.
    pub fn to_rfc3339(&self) -> String {
        chrono::DateTime::from_timestamp(self.seconds, self.nanoseconds)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }
}

impl From<chrono::DateTime<chrono::Utc>> for wit::Timestamp {
    fn from(t: chrono::DateTime<chrono::Utc>) -> Self {
        Self {
            seconds: t.timestamp(),
            nanoseconds: t.timestamp_subsec_nanos(),
        }
    }
}
