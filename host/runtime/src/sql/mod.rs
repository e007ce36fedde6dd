//! The `sql` capability: databases the operator granted, reached by plugins through the
//! `wasmctrl:plugin/sql` import with bound parameters only.
//!
//! - **Pooled:** one deadpool-postgres pool per database, connecting lazily, so a database that
//!   is down at start does not stop the host; calls fail (transient) until it is back.
//! - **Prepared, never spliced:** every statement goes through the extended protocol
//!   (`prepare_cached` + bind), which also refuses several commands in one statement; identifiers
//!   are checked and quoted by [`render`].
//! - **Bounded:** a call gets what is left of the reconcile's deadline. Guest code cannot be
//!   interrupted while the host waits on the database, so the wait itself must be bounded.
//! - **Blocking on purpose:** reconciles run on blocking threads; the query runs on the tokio
//!   runtime the databases were created on and the calling thread waits for its answer.
//! - **Capped:** a call's results are held in host memory, outside the guest's memory cap, so
//!   they are read as a stream and the call fails (the transaction rolled back) past
//!   [`MAX_ROWS`] rows or [`MAX_BYTES`] bytes, before more is held.

mod config;
mod statement;
mod value;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, PoolError, RecyclingMethod};
use futures::{StreamExt as _, pin_mut};
use tokio::runtime::Handle;

use crate::fence::Fence;
use wasmctrl_core::sync::lock;

pub use crate::plugin::bindings::current::wasmctrl::plugin::sql::{
    Rows, SqlError, Statement, Value,
};
pub use config::{
    ConfigError, DEFAULT_MAX_CONNECTIONS, Database, parse_file, parse_flag, read_file,
};
pub use statement::{RenderError, quote_identifier, render};

/// Most rows one call may return, over all its statements.
pub const MAX_ROWS: usize = 10_000;

/// Most bytes of values one call may return, over all its statements (text counts its length,
/// any other value 8).
pub const MAX_BYTES: usize = 4 << 20;

/// The granted databases. Cheap to clone; empty by default.
#[derive(Clone, Default)]
pub struct Databases {
    inner: Arc<Inner>,
    /// Calls are made only while it holds, and end (rolled back) when it closes.
    fence: Fence,
}

#[derive(Default)]
struct Inner {
    pools: BTreeMap<String, (Database, Pool)>,
    /// Calls by database and outcome, for `wasmctrl_sql_calls_total`.
    calls: std::sync::Mutex<BTreeMap<(String, &'static str), u64>>,
    /// The runtime queries run on; `None` only when there are no databases.
    handle: Option<Handle>,
}

impl std::fmt::Debug for Databases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.inner.pools.values().map(|(db, _)| db))
            .finish()
    }
}

impl Databases {
    /// Pools for `databases`. Must be called within a tokio runtime, which will run the queries.
    /// Connects lazily: nothing is dialled until a plugin asks.
    pub fn new(databases: Vec<Database>) -> Result<Self, ConfigError> {
        if databases.is_empty() {
            return Ok(Self::default());
        }
        let handle = Handle::try_current().map_err(|_| ConfigError {
            name: databases[0].name.clone(),
            reason: "the sql capability needs a tokio runtime".into(),
        })?;
        let mut pools = BTreeMap::new();
        for db in databases {
            let manager = Manager::from_config(
                db.connection.clone(),
                tokio_postgres::NoTls,
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            let pool = Pool::builder(manager)
                .max_size(db.max_connections)
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .build()
                .map_err(|e| ConfigError {
                    name: db.name.clone(),
                    reason: e.to_string(),
                })?;
            if pools.contains_key(&db.name) {
                return Err(ConfigError {
                    name: db.name,
                    reason: "configured twice".into(),
                });
            }
            pools.insert(db.name.clone(), (db, pool));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                pools,
                calls: Default::default(),
                handle: Some(handle),
            }),
            fence: Fence::open(),
        })
    }

    /// Runs calls only while `fence` holds (leader election): a replica that does not lead
    /// changes no database, and a call still running when leadership ends is rolled back.
    pub fn fenced(mut self, fence: Fence) -> Self {
        self.fence = fence;
        self
    }

    /// The configured databases, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Database> {
        self.inner.pools.values().map(|(db, _)| db)
    }

    /// Whether a database of this name is configured.
    pub fn contains(&self, name: &str) -> bool {
        self.inner.pools.contains_key(name)
    }

    /// Calls so far by database and outcome (`ok`, `error`, `transient_error`), for metrics.
    pub fn calls(&self) -> Vec<(String, &'static str, u64)> {
        let calls = lock(&self.inner.calls);
        calls
            .iter()
            .map(|((db, outcome), n)| (db.clone(), *outcome, *n))
            .collect()
    }

    /// Runs `statements` on database `name` in one transaction, waiting at most `timeout`.
    /// Blocking: call it from a blocking thread, never from async code.
    pub fn execute(
        &self,
        name: &str,
        statements: &[Statement],
        timeout: Duration,
    ) -> Result<Vec<Rows>, SqlError> {
        let result = self.execute_uncounted(name, statements, timeout);
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) if e.transient => "transient_error",
            Err(_) => "error",
        };
        let mut calls = lock(&self.inner.calls);
        *calls.entry((name.to_string(), outcome)).or_default() += 1;
        result
    }

    fn execute_uncounted(
        &self,
        name: &str,
        statements: &[Statement],
        timeout: Duration,
    ) -> Result<Vec<Rows>, SqlError> {
        let (Some((_, pool)), Some(handle)) = (self.inner.pools.get(name), &self.inner.handle)
        else {
            return Err(error(
                format!(
                    "database {name:?} is not configured on this host (--sql {name}=<connection>)"
                ),
                false,
            ));
        };
        let rendered = statements
            .iter()
            .map(|s| {
                render(&s.query, &s.identifiers)
                    .map(|sql| (sql, s.params.clone()))
                    .map_err(|e| error(e.to_string(), false))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if rendered.is_empty() {
            return Ok(Vec::new());
        }
        let timeout = match self.fence.remaining() {
            Some(left) if left.is_zero() => {
                return Err(error(
                    "not sent: this replica is not the leader".into(),
                    true,
                ));
            }
            Some(left) => timeout.min(left),
            None => timeout,
        };
        let pool = pool.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        handle.spawn(async move {
            let result = match tokio::time::timeout(timeout, run(&pool, rendered)).await {
                Ok(result) => result,
                Err(_) => Err(error(format!("no answer within {timeout:?}"), true)),
            };
            // The caller may have given up already; nothing to do then.
            let _ = tx.send(result);
        });
        // The task enforces the timeout; the margin only covers a runtime too busy to run it.
        match crate::blocking::wait(|| rx.recv_timeout(timeout + Duration::from_secs(1))) {
            Ok(result) => result,
            Err(RecvTimeoutError::Timeout) => {
                Err(error(format!("no answer within {timeout:?}"), true))
            }
            // The runtime dropped the task: the host is shutting down.
            Err(RecvTimeoutError::Disconnected) => Err(error(
                "the query was cancelled: the host is stopping".into(),
                true,
            )),
        }
    }
}

fn error(message: String, transient: bool) -> SqlError {
    SqlError {
        message,
        sqlstate: None,
        transient,
    }
}

async fn run(pool: &Pool, statements: Vec<(String, Vec<Value>)>) -> Result<Vec<Rows>, SqlError> {
    let mut client = pool.get().await.map_err(pool_error)?;
    if statements.len() == 1 {
        // One statement is atomic on its own; BEGIN/COMMIT would only add round trips.
        return run_all(&client, &statements).await;
    }
    let tx = client.transaction().await.map_err(db_error)?;
    let out = run_all(&tx, &statements).await?;
    tx.commit().await.map_err(db_error)?;
    Ok(out)
}

async fn run_all(
    client: &impl GenericClient,
    statements: &[(String, Vec<Value>)],
) -> Result<Vec<Rows>, SqlError> {
    let mut out = Vec::with_capacity(statements.len());
    let (mut total_rows, mut total_bytes) = (0usize, 0usize);
    for (sql, params) in statements {
        let prepared = client.prepare_cached(sql).await.map_err(db_error)?;
        if prepared.params().len() != params.len() {
            return Err(error(
                format!(
                    "the statement takes {} parameters but {} were bound",
                    prepared.params().len(),
                    params.len()
                ),
                false,
            ));
        }
        let columns: Vec<String> = prepared
            .columns()
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        let stream = client
            .query_raw(&prepared, params.iter().map(value::Param))
            .await
            .map_err(db_error)?;
        pin_mut!(stream);
        let mut rows = Vec::new();
        while let Some(row) = stream.next().await {
            let row = row.map_err(db_error)?;
            let values = (0..row.len())
                .map(|i| value::column(&row, i))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| error(e, false))?;
            total_rows += 1;
            total_bytes += values.iter().map(size_of_value).sum::<usize>();
            if total_rows > MAX_ROWS || total_bytes > MAX_BYTES {
                return Err(error(
                    format!(
                        "the result is larger than a call may return ({MAX_ROWS} rows, \
                         {MAX_BYTES} bytes); select fewer rows (LIMIT) or columns"
                    ),
                    false,
                ));
            }
            rows.push(values);
        }
        let affected = stream.rows_affected().unwrap_or(rows.len() as u64);
        out.push(Rows {
            columns,
            rows,
            affected,
        });
    }
    Ok(out)
}

/// What a value costs in host memory, roughly.
fn size_of_value(v: &Value) -> usize {
    match v {
        Value::Text(t) => t.len(),
        _ => 8,
    }
}

/// SQLSTATE classes worth retrying: connection exceptions (08), insufficient resources (53),
/// operator intervention such as a server restart (57P), serialization failure and deadlock.
fn transient_sqlstate(code: &str) -> bool {
    code.starts_with("08")
        || code.starts_with("53")
        || code.starts_with("57P")
        || code == "40001"
        || code == "40P01"
        || code == "55P03"
}

fn db_error(e: tokio_postgres::Error) -> SqlError {
    if let Some(db) = e.as_db_error() {
        let mut message = db.message().to_string();
        if let Some(detail) = db.detail() {
            message = format!("{message} ({detail})");
        }
        let code = db.code().code().to_string();
        return SqlError {
            message,
            transient: transient_sqlstate(&code),
            sqlstate: Some(code),
        };
    }
    // Without a database error: lost connections and I/O are transient; what we failed to encode
    // or decode is not.
    let mut transient = e.is_closed();
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        transient |= cause.is::<std::io::Error>();
        message = format!("{message}: {cause}");
        source = cause.source();
    }
    error(message, transient)
}

fn pool_error(e: PoolError) -> SqlError {
    match e {
        PoolError::Backend(e) => {
            let mut err = db_error(e);
            err.message = format!("connecting: {}", err.message);
            err
        }
        PoolError::Timeout(_) => error("timed out waiting for a connection".into(), true),
        other => error(other.to_string(), true),
    }
}
