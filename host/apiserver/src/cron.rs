//! CronJob schedules as kube reads them: `robfig/cron/v3`'s standard parser (five fields,
//! names of months and weekdays, `*`, `?`, ranges, steps, lists, `@hourly`-style descriptors,
//! `@every <duration>`, an optional `TZ=`/`CRON_TZ=` prefix), with its error messages, which
//! kube returns as the cause of a refused `spec.schedule`.
//!
//! Hand-written: the crates that parse cron expressions (`cron`, `croner`) take other
//! dialects (a seconds field, `L`, `#`) and word their errors otherwise.

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
        zone = Some(spec[eq + 1..end].to_string());
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
    Ok(Schedule {
        minutes: field(fields[0], &MINUTES)?,
        hours: field(fields[1], &HOURS)?,
        days: field(fields[2], &DAYS)?,
        months: field(fields[3], &MONTHS)?,
        weekdays: field(fields[4], &WEEKDAYS)?,
        zone,
        every: None,
    })
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
    };
    match spec {
        "@yearly" | "@annually" => {}
        "@monthly" => s.months = all(&MONTHS),
        "@weekly" => {
            s.days = all(&DAYS);
            s.months = all(&MONTHS);
            s.weekdays = 1;
        }
        "@daily" | "@midnight" => {
            s.days = all(&DAYS);
            s.months = all(&MONTHS);
        }
        "@hourly" => {
            s.hours = all(&HOURS);
            s.days = all(&DAYS);
            s.months = all(&MONTHS);
        }
        every if every.starts_with("@every ") => {
            let duration = &every["@every ".len()..];
            let interval = wasmctrl_scope::duration::parse_go(duration).ok_or_else(|| {
                format!("failed to parse duration {every}: time: invalid duration \"{duration}\"")
            })?;
            s.every = Some(interval);
        }
        other => return Err(format!("unrecognized descriptor: {other}")),
    }
    Ok(s)
}

/// A comma-separated list of ranges (`getField`).
fn field(text: &str, b: &Bounds) -> Result<u64, String> {
    text.split(',')
        .try_fold(0, |acc, part| Ok(acc | range(part, b)?))
}

/// One range: `*`, `?`, `N`, `N-M`, each optionally `/step` (`getRange`).
fn range(expr: &str, b: &Bounds) -> Result<u64, String> {
    let mut range_and_step = expr.split('/');
    let range = range_and_step.next().unwrap_or_default();
    let step = range_and_step.next();
    if range_and_step.next().is_some() {
        return Err(format!("too many slashes: {expr}"));
    }
    let low_high: Vec<&str> = range.split('-').collect();
    let (start, mut end) = if matches!(low_high[0], "*" | "?") {
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
    Ok(bits(start, end, step))
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
