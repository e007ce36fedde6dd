//! The postgres-writer plugin end to end through the real binaries: `wasmctrl apiserver` and
//! `wasmctrl run --sql` as separate processes, kubectl as the user, a private PostgreSQL as the
//! database. Rows follow objects through create, change and delete; hostile text is stored
//! literally; an outage and a host killed mid-deletion both converge.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::postgres::Postgres;
use common::process::{Cluster, plugin_dir, wait_for, wasmctrl_test_report};

const ROW: &str = "SELECT name || '|' || age || '|' || country FROM students WHERE id = ";

fn row(pg: &Postgres, id: &str) -> String {
    pg.psql(&format!("{ROW}'{id}'"))
}

fn apply(cluster: &Cluster, name: &str, spec: &str) {
    let yaml = format!(
        "apiVersion: demo.yash.com/v1\nkind: PostgresWriter\nmetadata:\n  name: {name}\n  namespace: default\nspec: {spec}\n"
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), yaml).unwrap();
    cluster.kubectl_ok(&["apply", "-f", file.path().to_str().unwrap()]);
}

#[test]
fn rows_follow_objects_through_outages_and_host_restarts() {
    let pg = Postgres::start();
    pg.psql(
        &std::fs::read_to_string(common::repo_root().join("examples/postgres-writer/schema.sql"))
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    let plugins = plugin_dir(dir.path(), &[("postgres-writer", None)]);
    let grant = format!("students={}", pg.connection());
    let host = cluster.run_host_rbac(&plugins, &["--sql", &grant], &[]);

    cluster.kubectl_ok(&["apply", "-f", "examples/postgres-writer/crd.yaml"]);
    wait_for(30, "the CRD to be served", || {
        cluster.kubectl(&["get", "pgw"]).0
    });
    cluster.kubectl_ok(&["apply", "-f", "examples/postgres-writer/sample.yaml"]);
    wait_for(30, "the sample's row", || {
        row(&pg, "default/sample-student") == "Alice|23|Norway"
    });
    wait_for(30, "status Synced", || {
        cluster
            .get_json(&["pgw", "sample-student"])
            .is_some_and(|o| o["status"]["phase"] == "Synced" && o["status"]["table"] == "students")
    });

    cluster.kubectl_ok(&[
        "patch",
        "pgw",
        "sample-student",
        "--type=merge",
        "-p",
        r#"{"spec":{"age":24}}"#,
    ]);
    wait_for(30, "the row to follow the spec", || {
        row(&pg, "default/sample-student") == "Alice|24|Norway"
    });

    // What the original operator concatenated into SQL is stored as text.
    apply(
        &cluster,
        "bobby",
        r#"{table: students, name: "x'); DROP TABLE students; --", age: 9, country: "O'Hara"}"#,
    );
    wait_for(30, "the hostile row", || {
        row(&pg, "default/bobby") == "x'); DROP TABLE students; --|9|O'Hara"
    });
    assert_eq!(pg.psql("SELECT count(*) FROM students"), "2");

    cluster.kubectl_ok(&[
        "delete",
        "pgw",
        "sample-student",
        "--wait=true",
        "--timeout=30s",
    ]);
    assert_eq!(row(&pg, "default/sample-student"), "");
    assert!(cluster.get_json(&["pgw", "sample-student"]).is_none());

    // Database down while an object is created: reconciles fail and back off, then converge.
    pg.stop_server();
    apply(
        &cluster,
        "late",
        "{table: students, name: Carol, age: 41, country: Chile}",
    );
    wait_for(30, "the finalizer on the new object", || {
        cluster
            .get_json(&["pgw", "late"])
            .is_some_and(|o| o["metadata"]["finalizers"][0] == "demo.yash.com/row-cleanup")
    });
    // The host has tried the row while the database was down (and failed) before it is back.
    wait_for(30, "a reconcile of default/late to fail", || {
        host.log()
            .lines()
            .any(|l| l.contains("object.key=default/late") && l.contains("reconcile failed"))
    });
    pg.start_server();
    wait_for(60, "the row once the database is back", || {
        row(&pg, "default/late") == "Carol|41|Chile"
    });
    // The outage and the recovery, as the metrics count them.
    let metrics = host.scrape();
    let count = |outcome: &str| -> f64 {
        let sample =
            format!("wasmctrl_sql_calls_total{{database=\"students\",outcome=\"{outcome}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&sample))
            .map_or(0.0, |v| v.parse().unwrap())
    };
    assert!(count("ok") >= 2.0, "{metrics}");
    assert!(count("transient_error") >= 1.0, "{metrics}");

    // The host dies; the object is deleted while it is down; a new host finishes the job.
    host.kill();
    cluster.kubectl_ok(&["delete", "pgw", "late", "--wait=false"]);
    let held = cluster.get_json(&["pgw", "late"]).unwrap();
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    assert_eq!(row(&pg, "default/late"), "Carol|41|Chile");
    let host = cluster.run_host_rbac(&plugins, &["--sql", &grant], &[]);
    wait_for(60, "the row to be deleted and the object released", || {
        row(&pg, "default/late").is_empty() && cluster.get_json(&["pgw", "late"]).is_none()
    });
    assert_eq!(
        row(&pg, "default/bobby"),
        "x'); DROP TABLE students; --|9|O'Hara"
    );

    host.assert_quiet("restarted host's");
    let status = host.terminate();
    assert!(status.success(), "exit {status}");
}

#[test]
fn wasmctrl_test_prints_the_finalizer_for_the_sample() {
    let plugin = common::plugin_path("postgres-writer");
    let report = wasmctrl_test_report(&[
        plugin.to_str().unwrap(),
        "--object",
        "examples/postgres-writer/sample.yaml",
    ]);
    assert_eq!(report["key"], "default/sample-student");
    assert_eq!(
        report["actions"],
        serde_json::json!([{"action": "addFinalizer", "finalizer": "demo.yash.com/row-cleanup"}])
    );
}

#[test]
fn wasmctrl_test_runs_sql_against_a_granted_database() {
    let pg = Postgres::start();
    pg.psql(
        &std::fs::read_to_string(common::repo_root().join("examples/postgres-writer/schema.sql"))
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let finalized = dir.path().join("finalized.yaml");
    let sample =
        std::fs::read_to_string(common::repo_root().join("examples/postgres-writer/sample.yaml"))
            .unwrap();
    std::fs::write(
        &finalized,
        sample.replace(
            "  namespace: default\n",
            "  namespace: default\n  finalizers: [demo.yash.com/row-cleanup]\n",
        ),
    )
    .unwrap();
    let plugin = common::plugin_path("postgres-writer");
    let report = wasmctrl_test_report(&[
        plugin.to_str().unwrap(),
        "--object",
        finalized.to_str().unwrap(),
        "--sql",
        &format!("students={}", pg.connection()),
    ]);
    assert_eq!(report["actions"][0]["action"], "updateStatus", "{report}");
    assert_eq!(report["actions"][0]["status"]["phase"], "Synced");
    assert_eq!(row(&pg, "default/sample-student"), "Alice|23|Norway");
}
