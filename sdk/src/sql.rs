//! SQL through the host's `sql` capability: statements with bound values and host-quoted
//! identifiers, run on a database the operator granted and the manifest declares
//! (`Manifest::capability("sql:<name>")`), through the [`Database`](crate::context::Database)
//! that `ctx.sql("<name>")` returns.
//!
//! ```ignore
//! let db = ctx.sql("students");
//! db.execute(
//!     Statement::new("INSERT INTO {0} (id, age) VALUES ($1, $2)")
//!         .identifier(&spec.table)
//!         .bind(key.as_str())
//!         .bind(spec.age),
//! )?;
//! ```

use std::fmt;

use crate::Error;

/// A parameter or column value. The host converts it to and from the column's SQL type:
/// `Integer` to smallint/integer/bigint (range-checked), `Float` to real/double, `Text` to any
/// text type and also to json/jsonb (the text must be JSON) and numeric columns.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A boolean.
    Boolean(bool),
    /// An integer.
    Integer(i64),
    /// A floating-point number.
    Float(f64),
    /// Text.
    Text(String),
}

/// One statement: values written `$1`, `$2`, ... and bound, never spliced; identifiers written
/// `{0}`, `{1}`, ... and quoted by the host.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// A single SQL statement.
    pub query: String,
    /// Table and column names for `{0}`, `{1}`, ...
    pub identifiers: Vec<String>,
    /// Values for `$1`, `$2`, ...
    pub params: Vec<Value>,
}

/// What one statement returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    /// Column names of the result (empty for statements that return no rows).
    pub columns: Vec<String>,
    /// The rows, each with one value per column.
    pub rows: Vec<Vec<Value>>,
    /// Rows inserted, updated, deleted or returned.
    pub affected: u64,
}

/// Why a SQL call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    /// What went wrong.
    pub message: String,
    /// The SQLSTATE code when the database reported one (`23505` for a unique violation).
    pub sqlstate: Option<String>,
    /// Whether retrying later could succeed (unreachable, timed out, serialization failure).
    pub transient: bool,
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl std::error::Error for SqlError {}

impl Statement {
    /// One SQL statement: values as `$1`, `$2`, ...; table and column names as `{0}`, `{1}`, ...
    /// (`{{` and `}}` for literal braces).
    pub fn new(query: &str) -> Self {
        Self {
            query: query.into(),
            identifiers: Vec::new(),
            params: Vec::new(),
        }
    }

    /// The next identifier (`{0}`, then `{1}`, ...). The host checks and quotes it, so any text
    /// stays exactly one name.
    pub fn identifier(mut self, name: &str) -> Self {
        self.identifiers.push(name.into());
        self
    }

    /// The next parameter (`$1`, then `$2`, ...).
    pub fn bind(mut self, value: impl Into<Value>) -> Self {
        self.params.push(value.into());
        self
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Boolean(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Integer(v)
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Integer(v.into())
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Integer(v.into())
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.into())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

impl Value {
    /// The text, if this is text.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Integer(i) => Some(*i),
            _ => None,
        }
    }
}

impl Rows {
    /// The value of `column` in row `row`, if both exist.
    pub fn get(&self, row: usize, column: &str) -> Option<&Value> {
        let index = self.columns.iter().position(|c| c == column)?;
        self.rows.get(row)?.get(index)
    }
}

impl SqlError {
    /// The message with its SQLSTATE, for logs and reconcile errors.
    pub fn describe(&self) -> String {
        match &self.sqlstate {
            Some(code) => format!("{} (SQLSTATE {code})", self.message),
            None => self.message.clone(),
        }
    }
}

/// A failed SQL call as a reconcile error: retried with backoff when the database said it was
/// transient (unreachable, timed out, deadlock), terminal otherwise (bad SQL, a violated
/// constraint), since the same input would fail the same way.
impl From<SqlError> for Error {
    fn from(e: SqlError) -> Self {
        let message = format!("sql: {}", e.describe());
        if e.transient {
            Error::retryable(message)
        } else {
            Error::terminal(message)
        }
    }
}
