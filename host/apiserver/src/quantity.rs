//! Kubernetes resource quantities (`resource.Quantity`: `500m`, `1Gi`, `2e3`), parsed into
//! exact nano-units so that they compare as kube compares them (a request above its limit).
//!
//! Hand-written: `k8s-openapi` carries quantities as strings, and the crates that parse them
//! convert to floating point, which cannot tell `1.0000000001` from `1`.

/// A quantity in nano-units (`1` is `1_000_000_000`), rounded up to a nano-unit as kube rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity(i128);

impl Quantity {
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
}

#[cfg(test)]
mod tests {
    use super::Quantity;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|| panic!("{s} should parse"))
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
