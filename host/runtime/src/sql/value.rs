//! Converting the contract's few value kinds to and from PostgreSQL's many column types. The
//! prepared statement tells the host each parameter's and column's type, so a plugin binds an
//! `integer` to a `smallint` column without knowing it is one; conversions that would lose
//! information (an out-of-range integer) are errors, never silent.

use std::error::Error as StdError;

use bytes::BytesMut;
use tokio_postgres::Row;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use super::Value;

type BoxError = Box<dyn StdError + Sync + Send>;

fn mismatch(what: &str, ty: &Type) -> BoxError {
    format!(
        "cannot bind {what} to a parameter of type {ty}; cast the parameter in the query (`$1::text::{ty}`)"
    )
    .into()
}

fn is_text(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
    )
}

/// A parameter, converted for the type the server expects when it is sent.
#[derive(Debug)]
pub(super) struct Param<'a>(pub(super) &'a Value);

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Boolean(b) if *ty == Type::BOOL => b.to_sql(ty, out),
            Value::Boolean(_) => Err(mismatch("a boolean", ty)),
            Value::Integer(i) => match *ty {
                Type::INT2 => i16::try_from(*i)
                    .map_err(|_| format!("{i} does not fit a smallint"))?
                    .to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)
                    .map_err(|_| format!("{i} does not fit an integer"))?
                    .to_sql(ty, out),
                Type::INT8 => i.to_sql(ty, out),
                // Integers beyond 2^53 would round; refuse rather than store another number.
                Type::FLOAT8 if i.unsigned_abs() <= 1 << 53 => (*i as f64).to_sql(ty, out),
                Type::FLOAT4 if i.unsigned_abs() <= 1 << 24 => (*i as f32).to_sql(ty, out),
                _ if is_text(ty) => i.to_string().to_sql(ty, out),
                _ => Err(mismatch("an integer", ty)),
            },
            Value::Float(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                _ => Err(mismatch("a float", ty)),
            },
            Value::Text(s) => match *ty {
                Type::JSON | Type::JSONB => serde_json::from_str::<serde_json::Value>(s)
                    .map_err(|e| format!("text bound to a {ty} parameter is not JSON: {e}"))?
                    .to_sql(ty, out),
                _ if is_text(ty) => s.as_str().to_sql(ty, out),
                _ => Err(mismatch("text", ty)),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        // Every type is accepted here and checked in `to_sql`, which knows the value.
        true
    }

    to_sql_checked!();
}

/// Reads column `index` of `row` as a contract value.
pub(super) fn column(row: &Row, index: usize) -> Result<Value, String> {
    let column = &row.columns()[index];
    let ty = column.type_();
    let read = |e: tokio_postgres::Error| format!("column {:?}: {e}", column.name());
    let value = match *ty {
        Type::BOOL => row
            .try_get::<_, Option<bool>>(index)
            .map_err(read)?
            .map(Value::Boolean),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(index)
            .map_err(read)?
            .map(|v| Value::Integer(v.into())),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(index)
            .map_err(read)?
            .map(|v| Value::Integer(v.into())),
        Type::INT8 => row
            .try_get::<_, Option<i64>>(index)
            .map_err(read)?
            .map(Value::Integer),
        Type::FLOAT4 => row
            .try_get::<_, Option<f32>>(index)
            .map_err(read)?
            .map(|v| Value::Float(v.into())),
        Type::FLOAT8 => row
            .try_get::<_, Option<f64>>(index)
            .map_err(read)?
            .map(Value::Float),
        Type::JSON | Type::JSONB => row
            .try_get::<_, Option<serde_json::Value>>(index)
            .map_err(read)?
            .map(|v| Value::Text(v.to_string())),
        _ if is_text(ty) => row
            .try_get::<_, Option<String>>(index)
            .map_err(read)?
            .map(Value::Text),
        _ => {
            return Err(format!(
                "column {:?} has type {ty}, which the sql capability does not convert; \
                 select it as text (`{}::text`)",
                column.name(),
                column.name()
            ));
        }
    };
    Ok(value.unwrap_or(Value::Null))
}
