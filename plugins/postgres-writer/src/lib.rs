//! The PostgresWriter operator (`demo.yash.com/v1`) as a wasmctrl plugin: each PostgresWriter
//! object is one row, keyed `<namespace>/<name>`, in the table its spec names.
//!
//! - **Create / change:** once its finalizer is on, the object's row is upserted (insert, or
//!   update on a changed spec) in one statement; if the spec moved the row to another table, the
//!   old row is deleted in the same transaction. Status says which table holds the row.
//! - **Delete:** the finalizer holds the object until its row is deleted, then is removed. A
//!   host that dies in between deletes the row again on restart (deleting nothing is fine) and
//!   then releases the object.
//! - **SQL safety:** values are bound parameters and the table name is an identifier the host
//!   checks and quotes; the original operator concatenated both into the SQL text.
//! - **Outages** are retryable errors (backoff until the database is back); a missing table is
//!   retryable too, since a DBA can create it without touching the object.
//!   An invalid spec is reported in status and not retried until it changes.
//!
//! Settings: `database` (default `students`), the name of the database the operator granted with
//! `--sql <database>=<connection>`; the manifest declares the capability `sql:<database>`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasmctrl_sdk::context::Database;
use wasmctrl_sdk::manifest::Predicate;
use wasmctrl_sdk::sql::{SqlError, Statement};
use wasmctrl_sdk::tracing;
use wasmctrl_sdk::{
    Action, Context, CustomResource, Error, Manifest, Outcome, Reconcile, Reconciler,
};

/// The finalizer that keeps an object until its row is gone.
pub const FINALIZER: &str = "demo.yash.com/row-cleanup";

/// PostgreSQL's SQLSTATE for "relation does not exist".
const UNDEFINED_TABLE: &str = "42P01";

/// Operator settings.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The granted database rows go to.
    pub database: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            database: "students".into(),
        }
    }
}

/// The row: the table that holds it and its values.
//
// The derive declares the kind, `PostgresWriter`, and its CRD (`examples/postgres-writer/crd.yaml`).
// Every field is required by the CRD's schema, yet parses when missing: `Spec::invalid` reports it
// in status on a server that does not enforce the schema, instead of failing the reconcile. (Empty
// strings are not serialized, which also keeps schemars from declaring a `default: ''` that the
// `minLength` would then refuse.)
#[derive(CustomResource, Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "demo.yash.com",
    version = "v1",
    kind = "PostgresWriter",
    namespaced,
    status = "Status",
    shortname = "pgw",
    doc = "A PostgresWriter: one database row per object",
    printcolumn = r#"{"name":"Table","type":"string","jsonPath":".spec.table"}"#,
    printcolumn = r#"{"name":"Name","type":"string","jsonPath":".spec.name"}"#,
    printcolumn = r#"{"name":"Age","type":"integer","jsonPath":".spec.age"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    crates(
        kube_core = "::wasmctrl_sdk::kube_core",
        k8s_openapi = "::wasmctrl_sdk::k8s_openapi"
    )
)]
#[schemars(extend("required" = ["table", "name", "age", "country"]))]
pub struct Spec {
    /// Table holding the row.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 63))]
    pub table: String,
    /// The student's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1))]
    pub name: String,
    /// The student's age (at least 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64", range(min = 0, max = 2147483647))]
    pub age: Option<i64>,
    /// The student's country.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1))]
    pub country: String,
}

/// Where the row is, or why there is none.
#[derive(Debug, Default, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Synced, or Invalid when the spec cannot be written.
    #[serde(default)]
    pub phase: String,
    /// The table holding the row (empty while none does).
    #[serde(default)]
    pub table: String,
    /// The row's primary key, namespace/name.
    #[serde(default)]
    pub id: String,
    /// Why the phase is Invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The generation the status describes.
    #[serde(default)]
    pub observed_generation: i64,
}

impl Spec {
    /// What is wrong with the spec, if anything (the CRD schema says the same; this guards
    /// servers that do not enforce it).
    fn invalid(&self) -> Option<String> {
        let missing: Vec<&str> = [
            ("table", self.table.is_empty()),
            ("name", self.name.is_empty()),
            ("age", self.age.is_none()),
            ("country", self.country.is_empty()),
        ]
        .into_iter()
        .filter_map(|(field, missing)| missing.then_some(field))
        .collect();
        if !missing.is_empty() {
            return Some(format!("spec.{} required", missing.join(", spec.")));
        }
        match self.age {
            Some(age) if !(0..=i64::from(i32::MAX)).contains(&age) => {
                Some(format!("spec.age must be between 0 and {}", i32::MAX))
            }
            _ => None,
        }
    }
}

fn upsert(table: &str, id: &str, spec: &Spec) -> Statement {
    Statement::new(
        "INSERT INTO {0} (id, name, age, country) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, age = EXCLUDED.age, \
         country = EXCLUDED.country",
    )
    .identifier(table)
    .bind(id)
    .bind(spec.name.as_str())
    .bind(spec.age)
    .bind(spec.country.as_str())
}

fn delete(table: &str, id: &str) -> Statement {
    Statement::new("DELETE FROM {0} WHERE id = $1")
        .identifier(table)
        .bind(id)
}

/// A failed SQL call as a reconcile error. A missing table is worth retrying (a DBA can create
/// it without touching the object); otherwise the database said whether it was transient.
fn sql_failed(e: SqlError, table: &str) -> Error {
    if e.sqlstate.as_deref() == Some(UNDEFINED_TABLE) {
        return Error::retryable(format!("table {table:?} does not exist in the database"));
    }
    e.into()
}

/// The plugin.
pub struct PostgresWriterController;

impl Reconciler for PostgresWriterController {
    type Object = PostgresWriter;
    type Settings = Config;

    fn manifest(config: &Config) -> Result<Manifest, String> {
        Ok(Manifest::for_::<PostgresWriter>("postgres-writer")
            .version(env!("CARGO_PKG_VERSION"))
            // Holds each object until its row is deleted.
            .finalizer(FINALIZER)
            // Spec changes, and the finalizer/deletion changes the delete path waits for; our
            // own status writes trigger nothing.
            .predicate(Predicate::GenerationChanged)
            .predicate(Predicate::FinalizersChanged)
            .capability(&format!("sql:{}", config.database)))
    }

    fn reconcile(
        event: Reconcile<PostgresWriter>,
        ctx: &Context<'_, Config>,
    ) -> Result<Outcome, Error> {
        let key = ctx.key();
        let db = ctx.sql(&ctx.settings().database);
        match event {
            Reconcile::Apply(writer) => {
                let status = writer.status.clone().unwrap_or_default();
                sync(&writer, &status, &key, &db)
            }
            Reconcile::Cleanup(writer) => {
                // The row lives where status says it was written; before any write, nowhere.
                let table = writer.status.map(|s| s.table).unwrap_or_default();
                if !table.is_empty() {
                    match db.execute(delete(&table, &key)) {
                        Ok(rows) => tracing::info!(%key, rows = rows.affected, "deleted row"),
                        // Nothing to delete from a table that is gone.
                        Err(e) if e.sqlstate.as_deref() == Some(UNDEFINED_TABLE) => {}
                        Err(e) => return Err(sql_failed(e, &table)),
                    }
                }
                // The SDK removes the finalizer after this.
                Ok(Outcome::done())
            }
            // The cleanup deleted the row before the object could go.
            Reconcile::Gone { .. } => {
                tracing::debug!(%key, "postgreswriter is gone");
                Ok(Outcome::done())
            }
        }
    }
}

/// Writes the object's row (moving it when the table changed) and reports where.
fn sync(
    writer: &PostgresWriter,
    status: &Status,
    key: &str,
    db: &Database<'_>,
) -> Result<Outcome, Error> {
    if let Some(problem) = writer.spec.invalid() {
        let invalid = Status {
            phase: "Invalid".into(),
            message: Some(problem.clone()),
            observed_generation: writer.metadata.generation.unwrap_or_default(),
            ..status.clone()
        };
        let mut actions = vec![Action::warning("InvalidSpec", &problem)];
        if invalid != *status {
            actions.push(Action::update_status(&invalid)?);
        }
        return Ok(Outcome::with(actions));
    }
    let spec = &writer.spec;
    let mut statements = Vec::new();
    if !status.table.is_empty() && status.table != spec.table {
        statements.push(delete(&status.table, key));
    }
    statements.push(upsert(&spec.table, key, spec));
    db.transaction(&statements)
        .map_err(|e| sql_failed(e, &spec.table))?;
    let synced = Status {
        phase: "Synced".into(),
        table: spec.table.clone(),
        id: key.to_string(),
        message: None,
        observed_generation: writer.metadata.generation.unwrap_or_default(),
    };
    let mut actions = Vec::new();
    if synced != *status {
        tracing::info!(%key, table = %spec.table, "row written");
        actions.push(Action::update_status(&synced)?);
        actions.push(Action::event(
            "Synced",
            &format!("row {key} written to table {}", spec.table),
        ));
    }
    Ok(Outcome::with(actions))
}

wasmctrl_sdk::export!(PostgresWriterController);

#[cfg(test)]
mod tests;
