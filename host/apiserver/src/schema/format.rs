//! String `format`s as go-openapi's `strfmt` registry checks them for kube-apiserver: a
//! string that is not of its format is a type error (`spec.id in body must be of type uuid:
//! "x"`). Hand-written: each check is a line or two over the standard library, `chrono` and
//! `url`, where a crate of format validators would bring other dialects of each.
//!
//! Not checked (any string passes): `password`, and the rarely used `isbn`, `isbn10`,
//! `isbn13` and `creditcard`.

/// Whether `text` is of `format` (names compared without dashes, as go-openapi normalises
/// them: `date-time` is `datetime`).
pub fn valid(format: &str, text: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    match format.replace('-', "").as_str() {
        "uuid" => uuid(text).is_some(),
        "uuid3" => uuid(text) == Some(3),
        "uuid4" => uuid(text) == Some(4),
        "uuid5" => uuid(text) == Some(5),
        "email" => email(text),
        "hostname" => hostname(text),
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.contains(':') && text.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => cidr(text),
        "mac" => mac(text),
        "uri" => uri(text),
        "date" => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(),
        "datetime" => date_time(text),
        "duration" => duration(text),
        "byte" => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .is_ok()
        }
        "bsonobjectid" => hex(text, 24),
        "hexcolor" => {
            let t = text.strip_prefix('#').unwrap_or(text);
            hex(t, 3) || hex(t, 6)
        }
        "rgbcolor" => rgb(text),
        "ssn" => {
            let digits: String = text.chars().filter(|c| !matches!(c, '-' | ' ')).collect();
            digits.len() == 9 && digits.bytes().all(|b| b.is_ascii_digit()) && text.len() <= 11
        }
        _ => true,
    }
}

/// The version of a UUID (`8-4-4-4-12` hex digits, dashes optional, any case).
fn uuid(text: &str) -> Option<u32> {
    let groups: Vec<&str> = text.split('-').collect();
    let digits: String = groups.concat();
    let shape_ok = match groups.as_slice() {
        [_] => true,
        [a, b, c, d, e] => [a.len(), b.len(), c.len(), d.len(), e.len()] == [8, 4, 4, 4, 12],
        _ => false,
    };
    (shape_ok && digits.len() == 32 && digits.bytes().all(|b| b.is_ascii_hexdigit())).then(|| {
        digits
            .chars()
            .nth(12)
            .and_then(|c| c.to_digit(16))
            .unwrap_or(0)
    })
}

/// Go's `mail.ParseAddress` for a bare address: a local part, `@`, a domain.
fn email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return false;
    };
    let ok = |s: &str| {
        !s.is_empty()
            && !s
                .chars()
                .any(|c| c.is_whitespace() || "<>()[],;:\"@".contains(c))
    };
    ok(local) && ok(domain) && !domain.starts_with('.') && !domain.ends_with('.')
}

/// go-openapi's hostname: labels of letters, digits and inner hyphens (63 at most); with more
/// than one, the last a name of 2 to 63 letters.
fn hostname(text: &str) -> bool {
    let labels: Vec<&str> = text.split('.').collect();
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_alphanumeric() || c == '-')
    };
    match labels.as_slice() {
        [one] => label(one),
        [.., last] => {
            labels[..labels.len() - 1].iter().all(|l| label(l))
                && (2..=63).contains(&last.chars().count())
                && last.chars().all(char::is_alphabetic)
        }
        [] => false,
    }
}

/// Go's `net.ParseCIDR`.
fn cidr(text: &str) -> bool {
    let Some((ip, len)) = text.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<std::net::IpAddr>() else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    !len.is_empty()
        && len.bytes().all(|b| b.is_ascii_digit())
        && len.parse::<u32>().is_ok_and(|l| l <= max)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets, as `aa:bb:..`, `aa-bb-..` or `aabb.ccdd...`.
fn mac(text: &str) -> bool {
    let octets = |sep: char| {
        let parts: Vec<&str> = text.split(sep).collect();
        [6, 8, 20].contains(&parts.len())
            && parts
                .iter()
                .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let dotted = {
        let parts: Vec<&str> = text.split('.').collect();
        [3, 4, 10].contains(&parts.len())
            && parts
                .iter()
                .all(|p| p.len() == 4 && p.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    octets(':') || octets('-') || dotted
}

/// Go's `url.ParseRequestURI`: an absolute URI, or an absolute path.
fn uri(text: &str) -> bool {
    if text.starts_with('/') {
        return !text.contains(char::is_whitespace);
    }
    url::Url::parse(text).is_ok()
}

/// go-openapi's `ParseDateTime`: RFC 3339, with or without fractions, zone or seconds.
fn date_time(text: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(text).is_ok()
        || [
            "%Y-%m-%dT%H:%M:%S%.f",
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%dT%H:%M:%S%.f%z",
        ]
        .iter()
        .any(|f| {
            chrono::NaiveDateTime::parse_from_str(text, f).is_ok()
                || chrono::DateTime::parse_from_str(text, f).is_ok()
        })
}

/// go-openapi's durations: Go's, and days and weeks (`3d`, `1w`), units spelled out too.
fn duration(text: &str) -> bool {
    if wasmctrl_core::duration::parse_go(text).is_some() {
        return true;
    }
    let t = text.trim();
    let number = t.bytes().take_while(u8::is_ascii_digit).count();
    number > 0
        && matches!(
            t[number..].trim(),
            "d" | "day"
                | "days"
                | "w"
                | "wk"
                | "week"
                | "weeks"
                | "h"
                | "hr"
                | "hour"
                | "hours"
                | "m"
                | "min"
                | "minute"
                | "minutes"
                | "s"
                | "sec"
                | "second"
                | "seconds"
                | "ms"
                | "us"
                | "ns"
        )
}

/// `rgb(r, g, b)` with each part 0–255.
fn rgb(text: &str) -> bool {
    let Some(inner) = text.strip_prefix("rgb(").and_then(|t| t.strip_suffix(')')) else {
        return false;
    };
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| p.len() <= 3 && p.parse::<u8>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::valid;

    #[test]
    fn formats_accept_and_refuse_as_kube_does() {
        // The refusals read off kube-apiserver 1.32 (and the values it accepted).
        for (format, good, bad) in [
            ("uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "x"),
            ("email", "a@b.c", "y"),
            ("hostname", "example.com", "a.b"),
            ("hostname", "web-1", "-a-"),
            ("ipv4", "1.2.3.4", "1.2.3"),
            ("ipv6", "2001:db8::1", "1.2.3.4"),
            ("cidr", "10.0.0.0/8", "1.2.3.4"),
            ("date-time", "2026-01-01T00:00:00Z", "yesterday"),
            ("date", "2026-01-01", "2026-13-01"),
            ("mac", "00:1a:2b:3c:4d:5e", "00:1a"),
            ("byte", "eA==", "!!"),
            ("duration", "1h30m", "soon"),
            ("uri", "https://example.com/x", "not a uri"),
        ] {
            assert!(valid(format, good), "{format} {good}");
            assert!(!valid(format, bad), "{format} {bad}");
        }
    }
}
