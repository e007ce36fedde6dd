//! Go's durations (`90s`, `1h30m`, `1.5h`, `250ms`), as Kubernetes and its tools write them:
//! Go's `time.ParseDuration`, for the CRD fields and CronJob schedules (`@every 1h`) that hold
//! them. Hand-written: the crates that parse durations (humantime and kin) read another syntax
//! (`1h 30m`; `1.5h` refused).

use std::time::Duration;

/// Parses `text` as Go's `time.ParseDuration` does (no sign but `+`; `0` alone needs no unit);
/// `None` when it is not a duration.
///
/// ```
/// use std::time::Duration;
/// use wasmctrl_scope::duration::parse_go;
/// assert_eq!(parse_go("1h30m"), Some(Duration::from_secs(5400)));
/// assert_eq!(parse_go("1.5s"), Some(Duration::from_millis(1500)));
/// assert_eq!(parse_go("1h 30m"), None);
/// ```
pub fn parse_go(text: &str) -> Option<Duration> {
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut seconds = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        seconds += value * unit;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(seconds).ok()
}
