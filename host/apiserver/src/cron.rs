//! CronJob schedules as kube reads them: `robfig/cron/v3`'s standard parser (five fields,
//! names of months and weekdays, `*`, `?`, ranges, steps, lists, `@hourly`-style descriptors,
//! `@every <duration>`, an optional `TZ=`/`CRON_TZ=` prefix), with its error messages, which
//! kube returns as the cause of a refused `spec.schedule`; and the times a schedule fires
//! ([`Schedule::next`], robfig's `Next`), which the CronJob controller counts from.
//!
//! Hand-written: the crates that parse cron expressions (`cron`, `croner`) take other
//! dialects (a seconds field, `L`, `#`) and word their errors otherwise.

use chrono::{DateTime, Datelike, LocalResult, NaiveDate, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

/// One field's bounds and names.
struct Bounds {
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DAYS: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const WEEKDAYS: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// A parsed schedule: the set of allowed values of each field, as bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Minutes 0–59.
    pub minutes: u64,
    /// Hours 0–23.
    pub hours: u64,
    /// Days of the month 1–31.
    pub days: u64,
    /// Months 1–12.
    pub months: u64,
    /// Days of the week 0–6, Sunday first.
    pub weekdays: u64,
    /// The time zone of a `TZ=` prefix.
    pub zone: Option<String>,
    /// The interval of `@every <duration>`, which runs at fixed intervals instead.
    pub every: Option<std::time::Duration>,
    /// Whether the day-of-month field was `*` or `?` (robfig's star bit): a day then has to
    /// match both day fields, otherwise either.
    pub days_star: bool,
    /// Whether the day-of-week field was `*` or `?`.
    pub weekdays_star: bool,
}

/// Parses `spec` as kube's CronJob controller does; `Err` carries robfig's message.
pub fn parse(spec: &str) -> Result<Schedule, String> {
    if spec.is_empty() {
        return Err("empty spec string".into());
    }
    let mut spec = spec;
    let mut zone = None;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let eq = spec.find('=').unwrap_or(0);
        let end = spec.find(' ').unwrap_or(spec.len());
        let name = &spec[eq + 1..end];
        if location(name).is_none() {
            return Err(format!(
                "provided bad location {name}: unknown time zone {name}"
            ));
        }
        zone = Some(name.to_string());
        spec = spec[end..].trim();
    }
    if spec.starts_with('@') {
        return descriptor(spec, zone);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    // In robfig's order, which decides the error of a spec with several bad fields.
    let (minutes, _) = field(fields[0], &MINUTES)?;
    let (hours, _) = field(fields[1], &HOURS)?;
    let (days, days_star) = field(fields[2], &DAYS)?;
    let (months, _) = field(fields[3], &MONTHS)?;
    let (weekdays, weekdays_star) = field(fields[4], &WEEKDAYS)?;
    Ok(Schedule {
        minutes,
        hours,
        days,
        months,
        weekdays,
        zone,
        every: None,
        days_star,
        weekdays_star,
    })
}

/// The zone a `TZ=` prefix (or a CronJob's `timeZone`) names, as Go's `time.LoadLocation`
/// finds it (`Local` is the controller's own zone, UTC in kube-controller-manager's image).
pub(crate) fn location(name: &str) -> Option<Tz> {
    match name {
        "" | "UTC" | "Local" => Some(Tz::UTC),
        _ => name.parse().ok(),
    }
}

impl Schedule {
    /// The first time after `after` the schedule fires (robfig's `Schedule.Next`), read in its
    /// zone (UTC without one); `None` when no time in the next five years matches (a schedule
    /// such as `0 0 30 2 *`).
    pub fn next(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if let Some(every) = self.every {
            // robfig rounds the interval down to whole seconds (one at least) and counts from
            // the whole second.
            let step = TimeDelta::seconds(every.as_secs().max(1) as i64);
            return Some(after.with_nanosecond(0)? + step);
        }
        let zone = self.zone.as_deref().and_then(location).unwrap_or(Tz::UTC);
        let start = after.with_timezone(&zone).naive_local();
        // The standard parser fires at second 0: the first candidate is the next whole minute.
        let mut t = start.with_second(0)?.with_nanosecond(0)? + TimeDelta::minutes(1);
        while t.year() <= start.year() + 5 {
            if !has(self.months, t.month()) {
                let (y, m) = if t.month() == 12 {
                    (t.year() + 1, 1)
                } else {
                    (t.year(), t.month() + 1)
                };
                t = NaiveDate::from_ymd_opt(y, m, 1)?.and_hms_opt(0, 0, 0)?;
            } else if !self.day_matches(t.date()) {
                t = t.date().succ_opt()?.and_hms_opt(0, 0, 0)?;
            } else if !has(self.hours, t.hour()) {
                t = t.with_minute(0)? + TimeDelta::hours(1);
            } else if !has(self.minutes, t.minute()) {
                t += TimeDelta::minutes(1);
            } else {
                // A wall time the zone skips (clocks going forward) never comes; one it repeats
                // comes at its first instant after `after`.
                let instants = match zone.from_local_datetime(&t) {
                    LocalResult::Single(a) => vec![a],
                    LocalResult::Ambiguous(a, b) => vec![a, b],
                    LocalResult::None => vec![],
                };
                let mut found = instants.into_iter().map(|a| a.with_timezone(&Utc));
                if let Some(at) = found.find(|at| *at > after) {
                    return Some(at);
                }
                t += TimeDelta::minutes(1);
            }
        }
        None
    }

    /// robfig's `dayMatches`: both day fields must match when either is `*`, else one.
    fn day_matches(&self, d: NaiveDate) -> bool {
        let dom = has(self.days, d.day());
        let dow = has(self.weekdays, d.weekday().num_days_from_sunday());
        if self.days_star || self.weekdays_star {
            dom && dow
        } else {
            dom || dow
        }
    }
}

fn has(bits: u64, v: u32) -> bool {
    bits >> v & 1 == 1
}

/// All values from `lo` to `hi` every `step`, as bits.
fn bits(lo: u32, hi: u32, step: u32) -> u64 {
    (lo..=hi)
        .step_by(step as usize)
        .fold(0, |b, v| b | (1 << v))
}

/// `@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly` (and their aliases).
fn descriptor(spec: &str, zone: Option<String>) -> Result<Schedule, String> {
    let all = |b: &Bounds| bits(b.min, b.max, 1);
    let mut s = Schedule {
        minutes: 1,
        hours: 1,
        days: 1 << 1,
        months: 1 << 1,
        weekdays: all(&WEEKDAYS),
        zone,
        every: None,
        days_star: false,
        weekdays_star: true,
    };
    match spec {
        "@yearly" | "@annually" => {}
        "@monthly" => s.months = all(&MONTHS),
        "@weekly" => {
            s.days = all(&DAYS);
            s.days_star = true;
            s.months = all(&MONTHS);
            s.weekdays = 1;
            s.weekdays_star = false;
        }
        "@daily" | "@midnight" => {
            s.days = all(&DAYS);
            s.days_star = true;
            s.months = all(&MONTHS);
        }
        "@hourly" => {
            s.hours = all(&HOURS);
            s.days = all(&DAYS);
            s.days_star = true;
            s.months = all(&MONTHS);
        }
        every if every.starts_with("@every ") => {
            let duration = &every["@every ".len()..];
            let interval = wasmctrl_core::duration::parse_go(duration).ok_or_else(|| {
                format!("failed to parse duration {every}: time: invalid duration \"{duration}\"")
            })?;
            s.every = Some(interval);
        }
        other => return Err(format!("unrecognized descriptor: {other}")),
    }
    Ok(s)
}

/// A comma-separated list of ranges (`getField`), and whether one was a star.
fn field(text: &str, b: &Bounds) -> Result<(u64, bool), String> {
    text.split(',').try_fold((0, false), |(acc, star), part| {
        let (bits, s) = range(part, b)?;
        Ok((acc | bits, star || s))
    })
}

/// One range: `*`, `?`, `N`, `N-M`, each optionally `/step` (`getRange`), and whether it is a
/// star (`*` or `?` not stepped over).
fn range(expr: &str, b: &Bounds) -> Result<(u64, bool), String> {
    let mut range_and_step = expr.split('/');
    let range = range_and_step.next().unwrap_or_default();
    let step = range_and_step.next();
    if range_and_step.next().is_some() {
        return Err(format!("too many slashes: {expr}"));
    }
    let low_high: Vec<&str> = range.split('-').collect();
    let star = matches!(low_high[0], "*" | "?");
    let (start, mut end) = if star {
        (b.min, b.max)
    } else {
        let start = int_or_name(low_high[0], b)?;
        match low_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_high[1], b)?),
            _ => return Err(format!("too many hyphens: {expr}")),
        }
    };
    let step = match step {
        None => 1,
        Some(s) => {
            let step = non_negative(s)?;
            // `N/step` means `N-max/step`.
            if low_high.len() == 1 {
                end = b.max;
            }
            step
        }
    };
    if start < b.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            b.min
        ));
    }
    if end > b.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            b.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok((bits(start, end, step), star && step <= 1))
}

fn int_or_name(expr: &str, b: &Bounds) -> Result<u32, String> {
    let lower = expr.to_lowercase();
    match b.names.iter().find(|(n, _)| *n == lower) {
        Some((_, v)) => Ok(*v),
        None => non_negative(expr),
    }
}

/// `mustParseInt`, with Go's `strconv.Atoi` wording.
fn non_negative(expr: &str) -> Result<u32, String> {
    let syntax = || {
        format!("failed to parse int from {expr}: strconv.Atoi: parsing \"{expr}\": invalid syntax")
    };
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    let n: i64 = expr.parse().map_err(|_| {
        format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing \"{expr}\": value out of range"
        )
    })?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {expr}"));
    }
    u32::try_from(n).map_err(|_| format!("end of range ({n}) above maximum: {expr}"))
}

#[cfg(test)]
mod tests {
    use super::parse;
    use chrono::{DateTime, Utc};

    fn at(t: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(t).unwrap().to_utc()
    }

    /// `spec`'s next time after `after`, as RFC 3339.
    fn next(spec: &str, after: &str) -> Option<String> {
        let s = parse(spec).unwrap();
        s.next(at(after)).map(|t| t.to_rfc3339())
    }

    #[test]
    fn the_next_time_is_robfig_cron_s() {
        let cases = [
            (
                "*/15 * * * *",
                "2024-05-10T10:07:30Z",
                "2024-05-10T10:15:00+00:00",
            ),
            // A time the schedule fires at is not its own next time.
            (
                "*/1 * * * *",
                "2024-05-10T10:07:00Z",
                "2024-05-10T10:08:00+00:00",
            ),
            (
                "0 0 * * *",
                "2024-12-31T23:59:59Z",
                "2025-01-01T00:00:00+00:00",
            ),
            (
                "30 4 29 2 *",
                "2024-03-01T00:00:00Z",
                "2028-02-29T04:30:00+00:00",
            ),
            // Both day fields given: either matches (the 1st, or a Monday: 2024-05-06).
            (
                "0 0 1 * mon",
                "2024-05-02T00:00:00Z",
                "2024-05-06T00:00:00+00:00",
            ),
            // One of them a star: both must (a Monday, any day of the month).
            (
                "0 0 * * mon",
                "2024-05-02T00:00:00Z",
                "2024-05-06T00:00:00+00:00",
            ),
            (
                "0 0 */2 * mon",
                "2024-05-02T00:00:00Z",
                "2024-05-03T00:00:00+00:00",
            ),
            (
                "@weekly",
                "2024-05-02T00:00:00Z",
                "2024-05-05T00:00:00+00:00",
            ),
            (
                "@monthly",
                "2024-05-02T00:00:00Z",
                "2024-06-01T00:00:00+00:00",
            ),
            (
                "@every 90s",
                "2024-05-02T00:00:00.500Z",
                "2024-05-02T00:01:30+00:00",
            ),
            // In the schedule's zone: 09:00 in Paris is 07:00 UTC in summer.
            (
                "TZ=Europe/Paris 0 9 * * *",
                "2024-07-01T08:00:00Z",
                "2024-07-02T07:00:00+00:00",
            ),
            // 02:30 does not happen in New York on 2024-03-10 (clocks go from 2:00 to 3:00).
            (
                "CRON_TZ=America/New_York 30 2 * * *",
                "2024-03-10T00:00:00Z",
                "2024-03-11T06:30:00+00:00",
            ),
        ];
        for (spec, after, want) in cases {
            assert_eq!(
                next(spec, after).as_deref(),
                Some(want),
                "{spec} after {after}"
            );
        }
        assert_eq!(next("0 0 30 2 *", "2024-01-01T00:00:00Z"), None);
        assert_eq!(
            parse("TZ=Mars/Olympus 0 0 * * *"),
            Err("provided bad location Mars/Olympus: unknown time zone Mars/Olympus".into())
        );
    }

    #[test]
    fn schedules_parse_as_robfig_cron_parses_them() {
        let s = parse("*/15 9-17 * jan-mar mon,fri").unwrap();
        assert_eq!(s.minutes, 1 | 1 << 15 | 1 << 30 | 1 << 45);
        assert_eq!(s.hours.count_ones(), 9);
        assert_eq!(s.months, 0b1110);
        assert_eq!(s.weekdays, 0b100010);
        assert_eq!(parse("@hourly").unwrap().minutes, 1);
        let every = parse("@every 1h30m").unwrap().every;
        assert_eq!(every, Some(std::time::Duration::from_secs(5400)));
        assert!(
            parse("@every soon")
                .unwrap_err()
                .ends_with("invalid duration \"soon\"")
        );
        assert_eq!(
            parse("TZ=Europe/Paris 0 0 * * *").unwrap().zone.as_deref(),
            Some("Europe/Paris")
        );
        for (spec, error) in [
            (
                "every minute",
                "expected exactly 5 fields, found 2: [every minute]",
            ),
            ("61 * * * *", "end of range (61) above maximum (59): 61"),
            (
                "x * * * *",
                "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("@sometimes", "unrecognized descriptor: @sometimes"),
        ] {
            assert_eq!(parse(spec), Err(error.to_string()), "{spec}");
        }
    }
}
