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
        Self::from(jiff::Timestamp::now())
    }

    /// An RFC 3339 time (`2026-11-22T10:00:00Z`).
    pub fn parse(rfc3339: &str) -> Result<Self, jiff::Error> {
        rfc3339.parse::<jiff::Timestamp>().map(Self::from)
    }

    /// The time as RFC 3339 in UTC, to the second (the Unix epoch if out of range).
    pub fn to_rfc3339(&self) -> String {
        let at = jiff::Timestamp::from_second(self.seconds).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }
}

impl From<jiff::Timestamp> for wit::Timestamp {
    /// Whole seconds since the epoch, rounded down, and the nanoseconds past them (never
    /// negative, as the contract's `timestamp` says).
    fn from(t: jiff::Timestamp) -> Self {
        let (mut seconds, mut nanoseconds) = (t.as_second(), t.subsec_nanosecond());
        if nanoseconds < 0 {
            seconds -= 1;
            nanoseconds += 1_000_000_000;
        }
        Self {
            seconds,
            nanoseconds: nanoseconds.unsigned_abs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::wit::Timestamp;

    #[test]
    fn a_timestamp_reads_and_prints_rfc_3339_and_keeps_its_nanoseconds_positive() {
        let t = Timestamp::parse("2026-11-22T10:00:00.25Z").unwrap();
        assert_eq!((t.seconds, t.nanoseconds), (1_795_341_600, 250_000_000));
        assert_eq!(t.to_rfc3339(), "2026-11-22T10:00:00Z");
        let before_the_epoch = Timestamp::parse("1969-12-31T23:59:59.5Z").unwrap();
        assert_eq!(
            (before_the_epoch.seconds, before_the_epoch.nanoseconds),
            (-1, 500_000_000)
        );
        assert_eq!(before_the_epoch.to_rfc3339(), "1969-12-31T23:59:59Z");
        assert!(Timestamp::parse("yesterday").is_err());
    }
}
