//! The `sql` capability against a real PostgreSQL: values are bound, identifiers quoted, one
//! statement per call text, transactions atomic, types converted and range-checked; grants are
//! checked against the manifest; an outage is a transient error and the pool recovers.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::postgres::Postgres;
use serde_json::{Value as Json, json};
use wasmctrl::plugin::{Intent, wit};
use wasmctrl::runtime::{Config, Runtime};
use wasmctrl::sql::{self, Databases, Statement, Value};
use wasmctrl::view::EmptyView;

struct Fixture {
    pg: Postgres,
    runtime: Runtime,
    databases: Databases,
    // Runs the queries; kept alive for the test.
    io: tokio::runtime::Runtime,
}

fn fixture() -> Fixture {
    fixture_on(tokio::runtime::Runtime::new().unwrap())
}

/// The fixture with its queries run on `io`.
fn fixture_on(io: tokio::runtime::Runtime) -> Fixture {
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE t (id text PRIMARY KEY, n smallint, f double precision, b boolean, j jsonb)",
    );
    let databases = {
        let _entered = io.enter();
        Databases::new(vec![
            sql::parse_flag(&format!("main={}", pg.connection())).unwrap(),
        ])
        .unwrap()
    };
    let runtime = Runtime::new(Config {
        databases: databases.clone(),
        ..Config::default()
    })
    .unwrap();
    Fixture {
        pg,
        runtime,
        databases,
        io,
    }
}

/// Runs the hostile plugin's `sql` mode once and returns the status it reported.
fn via_plugin(f: &Fixture, settings: Json) -> Json {
    let mut settings = settings;
    settings["mode"] = json!("sql");
    let plugin = f
        .runtime
        .load(
            "hostile.wasm",
            &common::plugin_bytes("hostile"),
            &settings.to_string(),
        )
        .unwrap();
    let object = json!({"apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"namespace": "default", "name": "t1", "uid": "u1"}});
    let request = wit::Request {
        namespace: "default".into(),
        name: "t1".into(),
        object: Some(object.to_string()),
        deleting: false,
        settings: String::new(),
        now: wit::Timestamp::parse("2026-11-23T00:00:00Z").expect("RFC 3339"),
        previous: Vec::new(),
    };
    let done = plugin.reconcile(request, Arc::new(EmptyView)).unwrap();
    match &done.intents[..] {
        [Intent::UpdateStatus { status }] => status.clone(),
        other => panic!("unexpected intents {other:?}"),
    }
}

#[test]
fn values_are_bound_identifiers_quoted_and_types_converted() {
    let f = fixture();
    let status = via_plugin(
        &f,
        json!({"declare": "main", "use": "main",
            "query": "INSERT INTO {0} (id, n, f, b, j) VALUES ($1, $2, $3, $4, $5) RETURNING id, n, f, b, j",
            "identifiers": ["t"],
            "params": ["x'); DROP TABLE t; --", 7, 1.5, true, "{\"k\": [1, 2]}"]}),
    );
    assert_eq!(status["affected"], 1, "{status}");
    assert_eq!(status["columns"], json!(["id", "n", "f", "b", "j"]));
    assert_eq!(
        status["rows"],
        json!([["x'); DROP TABLE t; --", 7, 1.5, true, "{\"k\":[1,2]}"]])
    );
    // Stored literally, and the table is still there.
    assert_eq!(
        f.pg.psql("SELECT id || '|' || n FROM t"),
        "x'); DROP TABLE t; --|7"
    );

    // A hostile identifier stays one (missing) table name.
    let status = via_plugin(
        &f,
        json!({"declare": "main", "use": "main", "query": "SELECT * FROM {0}",
            "identifiers": ["t\"; DROP TABLE t; --"]}),
    );
    assert_eq!(status["sqlstate"], "42P01", "{status}");
    assert_eq!(status["transient"], false);
    // Two commands in one statement are refused by the extended protocol.
    let status = via_plugin(
        &f,
        json!({"declare": "main", "use": "main", "query": "SELECT 1; DROP TABLE t"}),
    );
    assert_eq!(status["sqlstate"], "42601", "{status}");
    assert_eq!(f.pg.psql("SELECT count(*) FROM t"), "1");

    // Out of range for a smallint: an error, not a wrapped number.
    let status = via_plugin(
        &f,
        json!({"declare": "main", "use": "main",
            "query": "UPDATE t SET n = $1", "params": [100000]}),
    );
    assert!(
        status["error"].as_str().unwrap().contains("does not fit"),
        "{status}"
    );
    assert_eq!(status["transient"], false);
    assert_eq!(f.pg.psql("SELECT n FROM t"), "7");
}

/// The host runs a plugin's short calls in place, on a worker thread of the runtime whose tasks
/// also send the queries. With that runtime's only worker running the call, the query's task
/// must still run: the call hands the worker's tasks to another thread while it waits.
#[test]
fn a_query_from_a_call_on_the_only_runtime_worker_is_answered() {
    let one_worker = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let f = Arc::new(fixture_on(one_worker));
    let call = f.clone();
    let status =
        f.io.block_on(f.io.spawn(async move {
            via_plugin(
                &call,
                json!({"declare": "main", "use": "main", "query": "SELECT 41 + 1 AS n"}),
            )
        }))
        .unwrap();
    assert_eq!(status["rows"], json!([[42]]), "{status}");
}

#[test]
fn grants_are_checked_against_the_manifest_and_the_configuration() {
    let f = fixture();
    let status = via_plugin(&f, json!({"declare": "other", "use": "main"}));
    assert!(
        status["error"]
            .as_str()
            .unwrap()
            .contains("did not declare the capability sql:main"),
        "{status}"
    );
    let status = via_plugin(&f, json!({"declare": "absent", "use": "absent"}));
    assert!(
        status["error"]
            .as_str()
            .unwrap()
            .contains("\"absent\" is not configured"),
        "{status}"
    );
    assert_eq!(status["transient"], false);
}

#[test]
fn statements_of_one_call_commit_together_or_not_at_all() {
    let f = fixture();
    let insert = |id: &str| Statement {
        query: "INSERT INTO {0} (id) VALUES ($1)".into(),
        identifiers: vec!["t".into()],
        params: vec![Value::Text(id.into())],
    };
    let err = f
        .databases
        .execute("main", &[insert("a"), insert("a")], Duration::from_secs(5))
        .unwrap_err();
    assert_eq!(err.sqlstate.as_deref(), Some("23505"), "{err:?}");
    assert_eq!(f.pg.psql("SELECT count(*) FROM t"), "0");
    let rows = f
        .databases
        .execute("main", &[insert("a"), insert("b")], Duration::from_secs(5))
        .unwrap();
    assert_eq!(rows.iter().map(|r| r.affected).collect::<Vec<_>>(), [1, 1]);
    assert_eq!(
        f.pg.psql("SELECT string_agg(id, ',' ORDER BY id) FROM t"),
        "a,b"
    );
}

#[test]
fn an_outage_is_transient_and_the_pool_recovers() {
    let f = fixture();
    let count = Statement {
        query: "SELECT count(*) AS n FROM t".into(),
        identifiers: vec![],
        params: vec![],
    };
    let run = || {
        f.databases
            .execute("main", std::slice::from_ref(&count), Duration::from_secs(2))
    };
    assert_eq!(run().unwrap()[0].rows, vec![vec![Value::Integer(0)]]);
    f.pg.stop_server();
    let err = run().unwrap_err();
    assert!(err.transient, "{err:?}");
    f.pg.start_server();
    // The pooled connection died with the server; the next call gets a new one.
    let mut result = run();
    for _ in 0..20 {
        if result.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        result = run();
    }
    assert_eq!(result.unwrap()[0].rows, vec![vec![Value::Integer(0)]]);
}

/// Results are held in host memory, outside the guest's cap: a call that returns too much fails
/// (not transient: the same query would again) and its transaction is rolled back.
#[test]
fn results_past_the_row_or_byte_cap_fail_and_roll_back() {
    let f = fixture();
    let statement = |query: &str| Statement {
        query: query.into(),
        identifiers: vec![],
        params: vec![],
    };
    let run = |statements: &[Statement]| {
        f.databases
            .execute("main", statements, Duration::from_secs(10))
    };
    let rows = format!(
        "SELECT g FROM generate_series(1, {}) AS g",
        sql::MAX_ROWS + 1
    );
    let err = run(&[statement(&rows)]).unwrap_err();
    assert!(!err.transient, "{err:?}");
    assert!(err.message.contains("10000 rows"), "{}", err.message);
    let bytes = "SELECT repeat('x', 1048576) FROM generate_series(1, 5)";
    let err = run(&[statement(bytes)]).unwrap_err();
    assert!(err.message.contains("4194304 bytes"), "{}", err.message);
    // Exactly at the cap is fine.
    let at_cap = format!("SELECT g FROM generate_series(1, {}) AS g", sql::MAX_ROWS);
    assert_eq!(
        run(&[statement(&at_cap)]).unwrap()[0].rows.len(),
        sql::MAX_ROWS
    );
    // The insert before an oversized select is rolled back with it.
    let insert = statement("INSERT INTO t (id) VALUES ('kept?')");
    assert!(run(&[insert, statement(&rows)]).is_err());
    assert_eq!(f.pg.psql("SELECT count(*) FROM t").trim(), "0");
}
