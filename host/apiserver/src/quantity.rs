//! Kubernetes resource quantities (`resource.Quantity`: `500m`, `1Gi`, `2e3`), parsed into
//! exact nano-units so that they compare as kube compares them (a request above its limit).
//!
//! Hand-written: `k8s-openapi` carries quantities as strings, and the crates that parse them
//! convert to floating point, which cannot tell `1.0000000001` from `1`.

/// A quantity in nano-units (`1` is `1_000_000_000`), rounded up to a nano-unit as kube rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity(i128);

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity(0);

    /// Parses `text` by kube's grammar (`^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`);
    /// `None` when it is not a quantity or does not fit.
    pub fn parse(text: &str) -> Option<Self> {
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let number_len = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let (number, suffix) = rest.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return None;
        }
        let (ten, two): (i32, u32) = match suffix {
            "" => (0, 0),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            "Ki" => (0, 10),
            "Mi" => (0, 20),
            "Gi" => (0, 30),
            "Ti" => (0, 40),
            "Pi" => (0, 50),
            "Ei" => (0, 60),
            e => {
                let exp = e.strip_prefix(['e', 'E'])?;
                let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                (exp.parse().ok()?, 0)
            }
        };
        let digits = format!("{whole}{fraction}");
        let mut value: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        value = value.checked_mul(1i128.checked_shl(two)?)?;
        // value × 10^(9 + ten - fraction digits) nano-units.
        let exp = 9 + ten - i32::try_from(fraction.len()).ok()?;
        if exp >= 0 {
            value = value.checked_mul(10i128.checked_pow(exp.unsigned_abs())?)?;
        } else {
            let div = 10i128.checked_pow(exp.unsigned_abs())?;
            value = value / div + i128::from(value % div != 0);
        }
        Some(Quantity(if negative { -value } else { value }))
    }

    /// Whether it is below zero.
    pub fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// Its value as a float (for ratios, not comparisons).
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Whether it is zero.
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::Sub for Quantity {
    type Output = Self;

    fn sub(self, other: Self) -> Self {
        Quantity(self.0.saturating_sub(other.0))
    }
}

impl std::ops::Add for Quantity {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Quantity(self.0.saturating_add(other.0))
    }
}

/// How a quantity was written, which is how kube writes it back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `1Gi`
    BinarySi,
    /// `1e3`
    DecimalExponent,
    /// `1k`, `500m`, `12`
    DecimalSi,
}

/// The form kube stores and returns a quantity in (`Quantity.String()`), in the format it was
/// written in: the smallest whole mantissa with an SI suffix (`1000` → `1k`, `0.5` → `500m`),
/// a power of 1024 (`2048Ki` → `2Mi`; below 1Ki or not whole, as SI) or an exponent (`1e3`);
/// `None` when `text` is not a quantity.
pub fn canonical(text: &str) -> Option<String> {
    let (q, format) = parse_with_format(text)?;
    Some(write(q, format))
}

/// [`canonical`] of a value of a `ResourceList` (requests, limits, capacities, quotas), which
/// kube's `SetDefaults_ResourceList` first rounds up to a thousandth (`1.0000001` → `1001m`).
pub fn canonical_in_resource_list(text: &str) -> Option<String> {
    const MILLI: i128 = 1_000_000;
    let (Quantity(nanos), format) = parse_with_format(text)?;
    let rounded = nanos.signum() * ((nanos.abs() + MILLI - 1) / MILLI * MILLI);
    Some(write(Quantity(rounded), format))
}

fn parse_with_format(text: &str) -> Option<(Quantity, Format)> {
    let q = Quantity::parse(text)?;
    let suffix = text
        .trim_start_matches(['+', '-'])
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    let format = if suffix.ends_with('i') {
        Format::BinarySi
    } else if suffix.len() > 1 && suffix.starts_with(['e', 'E']) {
        Format::DecimalExponent
    } else {
        Format::DecimalSi
    };
    Some((q, format))
}

fn write(Quantity(nanos): Quantity, mut format: Format) -> String {
    const ONE: i128 = 1_000_000_000;
    if nanos == 0 {
        return "0".to_string();
    }
    if format == Format::BinarySi && (nanos.abs() < 1024 * ONE || nanos % ONE != 0) {
        format = Format::DecimalSi;
    }
    if format == Format::BinarySi {
        let (mut units, mut power) = (nanos / ONE, 0);
        while power < 6 && units % 1024 == 0 {
            units /= 1024;
            power += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
        return format!("{units}{suffix}");
    }
    let (mut mantissa, mut exponent) = (nanos, -9);
    while exponent < 18 && mantissa % 1000 == 0 {
        mantissa /= 1000;
        exponent += 3;
    }
    let suffix = match (format, exponent) {
        (_, 0) => String::new(),
        (Format::DecimalExponent, e) => format!("e{e}"),
        (_, e) => ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"][((e + 9) / 3) as usize].into(),
    };
    format!("{mantissa}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::Quantity;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|| panic!("{s} should parse"))
    }

    /// As kube 1.32 returns them in a ResourceQuota's `hard` (read off a real one).
    #[test]
    fn quantities_are_written_back_as_kube_writes_them() {
        for (text, kube) in [
            ("1", "1"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("0.5", "500m"),
            ("1000m", "1"),
            ("2048Ki", "2Mi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("512", "512"),
            ("0.5Gi", "512Mi"),
            ("100Ki", "100Ki"),
            ("1e3", "1e3"),
            ("10000e0", "10e3"),
            ("1E", "1E"),
            ("0Gi", "0"),
            ("-1000", "-1k"),
            ("2.5", "2500m"),
            ("1.0000000001", "1001m"),
        ] {
            let got = super::canonical_in_resource_list(text);
            assert_eq!(got.as_deref(), Some(kube), "{text}");
        }
        assert_eq!(
            super::canonical("1.0000000001").as_deref(),
            Some("1000000001n")
        );
        assert_eq!(super::canonical("1.2.3"), None);
    }

    #[test]
    fn quantities_compare_as_kube_compares_them() {
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("0.5"), q("500m"));
        assert_eq!(q("1Ki"), q("1024"));
        assert_eq!(q("1k"), q("1e3"));
        assert_eq!(q("1Gi"), q("1073741824"));
        assert!(q("2") > q("1"));
        assert!(q("1.0000000001") > q("1"), "rounded up to a nano-unit");
        assert!(q("-1").is_negative());
        for bad in ["", "abc", "1..0", "1x", "1e", "Gi", "1.2.3"] {
            assert_eq!(Quantity::parse(bad), None, "{bad}");
        }
    }
}
