//! Rendering a plugin's statement text: `{0}`, `{1}`, ... become quoted identifiers. SQL can bind
//! values (`$1`) but not table or column names, which is how the original PostgresWriter
//! operator ended up concatenating user input into SQL; here names are checked and quoted by the
//! host, never spliced raw.

/// PostgreSQL truncates longer identifiers (NAMEDATALEN - 1), which would silently address a
/// different table; refuse them instead.
const MAX_IDENTIFIER_BYTES: usize = 63;

/// Why a statement could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A brace that is neither `{n}`, `{{` nor `}}`.
    #[error("unbalanced brace at byte {0} of the query; write {{{{ or }}}} for a literal brace")]
    Brace(usize),
    /// `{n}` with no n-th identifier.
    #[error("the query uses identifier {{{index}}} but only {count} were given")]
    Missing {
        /// The placeholder's index.
        index: usize,
        /// Identifiers given.
        count: usize,
    },
    /// An identifier PostgreSQL cannot hold as given.
    #[error("identifier {name:?} is not allowed: {reason}")]
    Identifier {
        /// The identifier.
        name: String,
        /// Why.
        reason: &'static str,
    },
}

/// Checks an identifier and returns it double-quoted, inner quotes doubled (PostgreSQL's rule
/// for delimited identifiers), so any text stays exactly one name.
pub fn quote_identifier(name: &str) -> Result<String, RenderError> {
    let fail = |reason| RenderError::Identifier {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(fail("it is empty"));
    }
    if name.len() > MAX_IDENTIFIER_BYTES {
        return Err(fail("it is longer than 63 bytes"));
    }
    if name.contains('\0') {
        return Err(fail("it contains a NUL character"));
    }
    Ok(format!("\"{}\"", name.replace('"', "\"\"")))
}

/// Replaces each `{n}` in `query` by the n-th identifier, quoted; `{{` and `}}` are literal braces.
pub fn render(query: &str, identifiers: &[String]) -> Result<String, RenderError> {
    let quoted = identifiers
        .iter()
        .map(|i| quote_identifier(i))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = String::with_capacity(query.len() + 16 * identifiers.len());
    let bytes = query.as_bytes();
    let mut i = 0;
    let mut literal_from = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' if bytes.get(i + 1) == Some(&b'{') => {
                out.push_str(&query[literal_from..=i]);
                i += 2;
                literal_from = i;
            }
            b'}' if bytes.get(i + 1) == Some(&b'}') => {
                out.push_str(&query[literal_from..=i]);
                i += 2;
                literal_from = i;
            }
            b'{' => {
                let digits = bytes[i + 1..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                let close = i + 1 + digits;
                if digits == 0 || bytes.get(close) != Some(&b'}') {
                    return Err(RenderError::Brace(i));
                }
                let index: usize = query[i + 1..close]
                    .parse()
                    .map_err(|_| RenderError::Brace(i))?;
                let name = quoted.get(index).ok_or(RenderError::Missing {
                    index,
                    count: quoted.len(),
                })?;
                out.push_str(&query[literal_from..i]);
                out.push_str(name);
                i = close + 1;
                literal_from = i;
            }
            b'}' => return Err(RenderError::Brace(i)),
            _ => i += 1,
        }
    }
    out.push_str(&query[literal_from..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn placeholders_become_quoted_identifiers() {
        let sql = render(
            "INSERT INTO {0} ({1}) VALUES ($1) RETURNING {1}",
            &ids(&["students", "id"]),
        )
        .unwrap();
        assert_eq!(
            sql,
            r#"INSERT INTO "students" ("id") VALUES ($1) RETURNING "id""#
        );
    }

    #[test]
    fn hostile_names_stay_one_identifier() {
        let sql = render("DELETE FROM {0}", &ids(&[r#"x"; DROP TABLE students; --"#])).unwrap();
        assert_eq!(sql, r#"DELETE FROM "x""; DROP TABLE students; --""#);
    }

    #[test]
    fn doubled_braces_are_literal() {
        let sql = render("SELECT '{{1,2}}'::int[], {0}", &ids(&["a"])).unwrap();
        assert_eq!(sql, r#"SELECT '{1,2}'::int[], "a""#);
    }

    #[test]
    fn mistakes_are_reported() {
        assert_eq!(render("SELECT {", &[]), Err(RenderError::Brace(7)));
        assert_eq!(render("SELECT {x}", &[]), Err(RenderError::Brace(7)));
        assert_eq!(render("SELECT }", &[]), Err(RenderError::Brace(7)));
        assert_eq!(
            render("SELECT {2}", &ids(&["a"])),
            Err(RenderError::Missing { index: 2, count: 1 })
        );
        for bad in ["", "a\0b", &"x".repeat(64)] {
            assert!(matches!(
                render("SELECT 1", &ids(&[bad])),
                Err(RenderError::Identifier { .. })
            ));
        }
        assert!(quote_identifier(&"x".repeat(63)).is_ok());
    }

    #[test]
    fn multibyte_text_is_kept() {
        let sql = render("SELECT 'é' FROM {0}", &ids(&["tablé"])).unwrap();
        assert_eq!(sql, "SELECT 'é' FROM \"tablé\"");
    }
}
