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
/// use wasmctrl_core::duration::parse_go;
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

/// Writes `d` as Go's `time.Duration.String` does (`1h0m0s`, `1m30s`, `1.5s`, `250ms`, `0s`),
/// the JSON of a Kubernetes `metav1.Duration`.
///
/// ```
/// use std::time::Duration;
/// use wasmctrl_core::duration::format_go;
/// assert_eq!(format_go(Duration::from_secs(3600)), "1h0m0s");
/// assert_eq!(format_go(Duration::from_millis(90_500)), "1m30.5s");
/// assert_eq!(format_go(Duration::from_micros(1500)), "1.5ms");
/// assert_eq!(format_go(Duration::ZERO), "0s");
/// ```
pub fn format_go(d: Duration) -> String {
    const SECOND: u128 = 1_000_000_000;
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < SECOND {
        let (unit, scale) = match nanos {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(nanos, scale));
    }
    let secs = nanos / SECOND;
    let (h, m) = (secs / 3600, secs % 3600 / 60);
    let mut out = String::new();
    if h > 0 {
        out += &format!("{h}h");
    }
    if h > 0 || m > 0 {
        out += &format!("{m}m");
    }
    out + &decimal(nanos % (60 * SECOND), SECOND) + "s"
}

/// `v / scale` in decimal, without trailing zeros (`scale` a power of ten).
fn decimal(v: u128, scale: u128) -> String {
    let (int, frac) = (v / scale, v % scale);
    if frac == 0 {
        return int.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{int}.{}", digits.trim_end_matches('0'))
}
