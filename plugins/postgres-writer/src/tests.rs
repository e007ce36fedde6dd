//! Native tests through the SDK harness, with an in-memory stand-in for the database that
//! understands the plugin's two statements.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::json;
use wasmctrl_sdk::sql::{Rows, SqlError, Statement, Value};
use wasmctrl_sdk::testing::Harness;
use wasmctrl_sdk::{Action, Outcome};

use super::*;

/// (table, id) -> (name, age, country)
type Tables = Rc<RefCell<BTreeMap<(String, String), (String, i64, String)>>>;

#[derive(Clone, Copy, PartialEq)]
enum Db {
    Up,
    Down,
    NoTable,
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn harness(tables: &Tables, db: Db) -> Harness {
    let tables = tables.clone();
    Harness::new()
        .now("2026-11-23T10:00:00Z")
        .sql(move |database, statements: &[Statement]| {
            assert_eq!(database, "students");
            let fail = |message: &str, sqlstate: Option<&str>, transient| SqlError {
                message: message.into(),
                sqlstate: sqlstate.map(String::from),
                transient,
            };
            match db {
                Db::Down => return Err(fail("connection refused", None, true)),
                Db::NoTable => return Err(fail("no such table", Some("42P01"), false)),
                Db::Up => {}
            }
            let mut out = Vec::new();
            for s in statements {
                let table = s.identifiers[0].clone();
                let id = text(&s.params[0]);
                let affected = if s.query.starts_with("INSERT") {
                    let row = (
                        text(&s.params[1]),
                        s.params[2].as_i64().unwrap_or(-1),
                        text(&s.params[3]),
                    );
                    tables.borrow_mut().insert((table, id), row);
                    1
                } else if s.query.starts_with("DELETE") {
                    u64::from(tables.borrow_mut().remove(&(table, id)).is_some())
                } else {
                    panic!("unexpected statement {}", s.query)
                };
                out.push(Rows {
                    columns: vec![],
                    rows: vec![],
                    affected,
                });
            }
            Ok(out)
        })
}

fn writer(finalized: bool, status: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "demo.yash.com/v1", "kind": "PostgresWriter",
        "metadata": {"name": "alice", "namespace": "school", "generation": 2,
            "finalizers": if finalized { json!([FINALIZER]) } else { json!([]) }},
        "spec": {"table": "students", "name": "Alice", "age": 23, "country": "Norway"},
        "status": status,
    })
}

fn actions(outcome: Outcome) -> Vec<Action> {
    outcome.actions
}

#[test]
fn the_finalizer_comes_first_and_nothing_is_written_before_it() {
    let tables = Tables::default();
    let h = harness(&tables, Db::Up);
    let out = h
        .reconcile::<PostgresWriterController>(&writer(false, json!(null)))
        .unwrap();
    assert_eq!(actions(out), vec![Action::add_finalizer(FINALIZER)]);
    assert!(h.statements().is_empty());
}

#[test]
fn a_finalized_object_is_upserted_keyed_by_namespace_and_name() {
    let tables = Tables::default();
    let h = harness(&tables, Db::Up);
    let out = h
        .reconcile::<PostgresWriterController>(&writer(true, json!(null)))
        .unwrap();
    assert_eq!(
        tables
            .borrow()
            .get(&("students".into(), "school/alice".into())),
        Some(&("Alice".into(), 23, "Norway".into()))
    );
    let Action::UpdateStatus(status) = &out.actions[0] else {
        panic!("{:?}", out.actions)
    };
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(status).unwrap(),
        json!({"phase": "Synced", "table": "students", "id": "school/alice",
            "observedGeneration": 2})
    );
    assert!(matches!(out.actions[1], Action::EmitEvent(_)));
    // The table is an identifier for the host to quote, never part of the text.
    let (_, statement) = &h.statements()[0];
    assert_eq!(statement.identifiers, vec!["students".to_string()]);
    assert!(!statement.query.contains("students"));

    // Synced already: the row is written again (drift repair) but the status is left alone.
    let synced = json!({"phase": "Synced", "table": "students", "id": "school/alice",
        "observedGeneration": 2});
    let out = h
        .reconcile::<PostgresWriterController>(&writer(true, synced))
        .unwrap();
    assert!(out.actions.is_empty());
    assert_eq!(h.statements().len(), 2);
}

#[test]
fn a_new_table_moves_the_row_in_one_transaction() {
    let tables = Tables::default();
    tables.borrow_mut().insert(
        ("pupils".into(), "school/alice".into()),
        ("Alice".into(), 22, "Norway".into()),
    );
    let h = harness(&tables, Db::Up);
    let moved = json!({"phase": "Synced", "table": "pupils", "id": "school/alice",
        "observedGeneration": 1});
    h.reconcile::<PostgresWriterController>(&writer(true, moved))
        .unwrap();
    let t = tables.borrow();
    assert_eq!(t.len(), 1);
    assert!(t.contains_key(&("students".into(), "school/alice".into())));
}

#[test]
fn deletion_removes_the_row_then_the_finalizer() {
    let tables = Tables::default();
    tables.borrow_mut().insert(
        ("students".into(), "school/alice".into()),
        ("Alice".into(), 23, "Norway".into()),
    );
    let h = harness(&tables, Db::Up);
    let mut obj = writer(true, json!({"phase": "Synced", "table": "students"}));
    obj["metadata"]["deletionTimestamp"] = json!("2026-11-23T10:00:00Z");
    let out = h.reconcile::<PostgresWriterController>(&obj).unwrap();
    assert_eq!(actions(out), vec![Action::remove_finalizer(FINALIZER)]);
    assert!(tables.borrow().is_empty());
    // Again (a host that died before the finalizer went): nothing to delete, still released.
    let out = h.reconcile::<PostgresWriterController>(&obj).unwrap();
    assert_eq!(actions(out), vec![Action::remove_finalizer(FINALIZER)]);
}

#[test]
fn an_outage_is_retryable_and_releases_nothing() {
    let tables = Tables::default();
    let h = harness(&tables, Db::Down);
    let err = h
        .reconcile::<PostgresWriterController>(&writer(true, json!(null)))
        .unwrap_err();
    assert!(err.retryable, "{err:?}");
    let mut obj = writer(true, json!({"phase": "Synced", "table": "students"}));
    obj["metadata"]["deletionTimestamp"] = json!("2026-11-23T10:00:00Z");
    let err = h.reconcile::<PostgresWriterController>(&obj).unwrap_err();
    assert!(err.retryable, "{err:?}");
}

#[test]
fn a_missing_table_is_retried_and_does_not_block_deletion() {
    let tables = Tables::default();
    let h = harness(&tables, Db::NoTable);
    let err = h
        .reconcile::<PostgresWriterController>(&writer(true, json!(null)))
        .unwrap_err();
    assert!(
        err.retryable && err.message.contains("does not exist"),
        "{err:?}"
    );
    let mut obj = writer(true, json!({"phase": "Synced", "table": "students"}));
    obj["metadata"]["deletionTimestamp"] = json!("2026-11-23T10:00:00Z");
    let out = h.reconcile::<PostgresWriterController>(&obj).unwrap();
    assert_eq!(actions(out), vec![Action::remove_finalizer(FINALIZER)]);
}

#[test]
fn an_invalid_spec_is_reported_without_sql() {
    let tables = Tables::default();
    let h = harness(&tables, Db::Up);
    let mut obj = writer(true, json!(null));
    obj["spec"]["age"] = json!(-1);
    let out = h.reconcile::<PostgresWriterController>(&obj).unwrap();
    assert!(h.statements().is_empty());
    match &out.actions[..] {
        [Action::EmitEvent(e), Action::UpdateStatus(status)] => {
            assert_eq!(e.reason, "InvalidSpec");
            assert!(status.contains("spec.age must be between 0"), "{status}");
        }
        other => panic!("{other:?}"),
    }
    obj["spec"] = json!({"table": "students"});
    let out = h.reconcile::<PostgresWriterController>(&obj).unwrap();
    let [_, Action::UpdateStatus(status)] = &out.actions[..] else {
        panic!("{:?}", out.actions)
    };
    assert!(
        status.contains("spec.name, spec.age, spec.country required"),
        "{status}"
    );
}

#[test]
fn the_database_comes_from_settings_and_is_declared() {
    let h = Harness::new().settings(json!({"database": "registry"}));
    let m = h.manifest::<PostgresWriterController>().unwrap();
    assert_eq!(m.capabilities, vec!["sql:registry".to_string()]);
    let m = Harness::new()
        .manifest::<PostgresWriterController>()
        .unwrap();
    assert_eq!(m.capabilities, vec!["sql:students".to_string()]);
    let err = Harness::new()
        .settings(json!({"databse": "x"}))
        .manifest::<PostgresWriterController>()
        .unwrap_err();
    assert!(err.contains("databse"), "{err}");
}

#[test]
fn a_gone_object_needs_nothing() {
    let tables = Tables::default();
    let h = harness(&tables, Db::Up);
    let out = h
        .reconcile_deleted::<PostgresWriterController>("school", "alice")
        .unwrap();
    assert!(out.actions.is_empty());
    assert!(h.statements().is_empty());
}

#[test]
fn crd_is_generated_from_the_types() {
    wasmctrl_sdk::testing::check_crd::<PostgresWriter>(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/postgres-writer/crd.yaml"
    ));
}
