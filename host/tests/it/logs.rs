//! `--log-format json`: every line the real host writes is one JSON object, and the lines of a
//! reconcile carry its span's fields, so a log pipeline can follow one reconcile.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeSet;

use common::process::{Cluster, plugin_dir, wait_for};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_parse_line_by_line_and_carry_the_reconcile_span() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path());
    let client = cluster.client().await;
    common::things::install(&client).await;
    let config = "[settings]\nlog = true\n";
    let plugins = plugin_dir(dir.path(), &[("trivial", Some(config))]);
    // Plugin logs at debug, the rest (the compiler's included) at info, as docs/operating.md says, and
    // the controller's per-reconcile records the test waits for.
    let filter = "info,plugin=debug,wasmctrl::reconcile::controller=debug";
    let host = cluster.run_host(
        &plugins,
        &["--log-format", "json", "--log-level", filter],
        &[],
    );
    let api = common::things::api(&client);
    for name in ["a", "b", "c"] {
        common::things::create(&api, name, serde_json::json!({})).await;
    }
    let parsed = |log: &str| -> Vec<Value> {
        log.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    };
    wait_for(30, "three reconciles logged", || {
        let lines = parsed(&host.log());
        let keys: BTreeSet<String> = lines
            .iter()
            .filter(|l| l["fields"]["message"] == "reconciled")
            .map(|l| {
                l["span"]["object.key"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        keys.len() == 3
    });
    let lines = parsed(&host.log());
    assert!(
        lines
            .iter()
            .all(|l| l["level"].is_string() && l["timestamp"].is_string())
    );
    let reconciles: Vec<&Value> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "reconciled")
        .collect();
    let mut ids = BTreeSet::new();
    for line in &reconciles {
        let span = &line["span"];
        assert_eq!(span["name"], "reconcile", "{line}");
        assert_eq!(span["plugin.name"], "trivial", "{line}");
        assert_eq!(span["plugin.version"], "0.0.0", "{line}");
        assert!(
            span["object.key"].as_str().unwrap().starts_with("default/"),
            "{line}"
        );
        assert_eq!(span["outcome"], "Success", "{line}");
        assert!(line["fields"]["duration_ms"].is_u64(), "{line}");
        assert!(
            ids.insert(span["reconcile.id"].as_u64().unwrap()),
            "ids are unique: {line}"
        );
    }
    // What the plugin logged through `tracing`, with its typed fields, inside the span.
    let read: Vec<&Value> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "read")
        .collect();
    let keys: BTreeSet<&str> = (read.iter())
        .filter_map(|l| l["span"]["object.key"].as_str())
        .collect();
    assert_eq!(keys.len(), 3, "each key's reconcile logged: {read:?}");
    for line in read {
        assert_eq!(line["level"], "DEBUG", "{line}");
        assert_eq!(
            line["fields"]["fields"], "generation=1 replicas=1",
            "{line}"
        );
        assert_eq!(line["span"]["plugin.name"], "trivial", "{line}");
        // Named by the span, not repeated by the line.
        assert!(line["fields"].get("plugin.name").is_none(), "{line}");
        assert!(line["fields"].get("object.key").is_none(), "{line}");
    }
    // A line the plugin logs without fields has no (empty) `fields` of its own.
    let bare: Vec<&Value> = (lines.iter())
        .filter(|l| l["fields"]["message"] == "looking")
        .collect();
    assert!(!bare.is_empty(), "the plugin's line without fields logged");
    for line in bare {
        assert_eq!(line["target"], "plugin", "{line}");
        assert!(line["fields"].get("fields").is_none(), "{line}");
    }
    assert!(
        !lines.iter().any(|l| l["target"]
            .as_str()
            .unwrap_or_default()
            .starts_with("cranelift")),
        "the compiler stays at info"
    );
    let status = host.terminate();
    assert!(status.success(), "exit {status}");
}
