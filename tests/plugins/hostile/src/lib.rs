//! A plugin that misbehaves on request, to prove the sandbox contains it. Its settings choose
//! the misbehaviour: `{"mode": "loop" | "alloc" | "panic" | "huge" | "undeclared" | "count" | "spin"
//! | "fail" | "terminal" | "ok"}`. `fail` is a retryable error for objects labelled `fail=yes`,
//! `terminal` a terminal error, `version` reports `{"version": ...}` from its settings, `own` applies an owned ConfigMap
//! `<name>-child`, `requeue` asks to run again after `{"afterMs": n}`. `spin` burns `{"iterations": n}` loop iterations (a slow but well-behaved reconcile)
//! and reports the object's generation in its status. `sql` declares `sql:<declare>` and runs
//! `{"query": ..., "identifiers": [...], "params": [...]}` on database `<use>`, reporting the rows
//! (or the error) in its status.

use std::sync::atomic::{AtomicU32, Ordering};

use wasmctrl_sdk::sql::{Statement, Value};
use wasmctrl_sdk::{
    Action, Context, Error, Gvk, Manifest, Outcome, Reconciler, Request, Settings, json,
};

/// Calls this instance has seen. A fresh instance per call means it is always 1.
static CALLS: AtomicU32 = AtomicU32::new(0);

/// The plugin.
pub struct Hostile;

fn mode(settings: &Settings) -> String {
    settings.value()["mode"]
        .as_str()
        .unwrap_or("ok")
        .to_string()
}

impl Reconciler for Hostile {
    fn manifest(settings: &Settings) -> Result<Manifest, String> {
        let mode = mode(settings);
        let manifest = Manifest::new(
            &format!("hostile-{mode}"),
            Gvk::new("example.com", "v1", "Thing"),
        );
        Ok(match mode.as_str() {
            "own" => manifest.owns(Gvk::new("", "v1", "ConfigMap")),
            "sql" => {
                let declare = settings.value()["declare"].as_str().unwrap_or("db");
                manifest.capability(&format!("sql:{declare}"))
            }
            _ => manifest,
        })
    }

    fn reconcile(req: &Request, ctx: &Context<'_>) -> Result<Outcome, Error> {
        let calls = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
        match mode(&req.settings()?).as_str() {
            "loop" => loop {
                std::hint::black_box(calls);
            },
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "panic" => panic!("hostile plugin panicked on purpose"),
            "sql" => {
                let settings = req.settings()?;
                let s = settings.value();
                let mut statement = Statement::new(s["query"].as_str().unwrap_or("SELECT 1"));
                for id in s["identifiers"].as_array().into_iter().flatten() {
                    statement = statement.identifier(id.as_str().unwrap_or_default());
                }
                for p in s["params"].as_array().into_iter().flatten() {
                    statement = statement.bind(match p {
                        serde_json::Value::Bool(b) => Value::Boolean(*b),
                        serde_json::Value::Number(n) => match n.as_i64() {
                            Some(i) => Value::Integer(i),
                            None => Value::Float(n.as_f64().unwrap_or_default()),
                        },
                        serde_json::Value::String(t) => Value::Text(t.clone()),
                        _ => Value::Null,
                    });
                }
                let database = s["use"].as_str().unwrap_or("db");
                let status = match ctx.sql(database).execute(statement) {
                    Ok(rows) => json!({"columns": rows.columns, "affected": rows.affected,
                        "rows": rows.rows.iter().map(|r| r.iter().map(|v| match v {
                            Value::Null => json!(null),
                            Value::Boolean(b) => json!(b),
                            Value::Integer(i) => json!(i),
                            Value::Float(f) => json!(f),
                            Value::Text(t) => json!(t),
                        }).collect::<Vec<_>>()).collect::<Vec<_>>()}),
                    Err(e) => {
                        json!({"error": e.message, "sqlstate": e.sqlstate, "transient": e.transient})
                    }
                };
                Ok(Outcome::with(vec![Action::update_status(&status)?]))
            }
            "huge" => {
                let big = "x".repeat(8 << 20);
                Ok(Outcome::with(vec![Action::update_status(
                    &json!({ "blob": big }),
                )?]))
            }
            "undeclared" => {
                let secret = json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "stolen", "namespace": req.namespace}});
                Ok(Outcome::with(vec![Action::apply(&secret)?]))
            }
            "spin" => {
                let n = req.settings()?.value()["iterations"]
                    .as_u64()
                    .unwrap_or(50_000_000);
                let mut x = 0u64;
                for i in 0..n {
                    x = std::hint::black_box(x.wrapping_add(i));
                }
                let generation = req
                    .object::<wasmctrl_sdk::Value>()?
                    .map(|o| o["metadata"]["generation"].clone())
                    .unwrap_or_default();
                let status = json!({ "observedGeneration": generation, "spin": x % 2 });
                Ok(Outcome::with(vec![Action::update_status(&status)?]))
            }
            "fail" => {
                let object = req.object::<wasmctrl_sdk::Value>()?.unwrap_or_default();
                if object["metadata"]["labels"]["fail"] == "yes" {
                    return Err(Error::retryable("asked to fail"));
                }
                Ok(Outcome::with(vec![Action::update_status(
                    &json!({ "phase": "Ready" }),
                )?]))
            }
            "terminal" => Err(Error::terminal("this can never work")),
            "version" => {
                let version = req.settings()?.value()["version"].clone();
                Ok(Outcome::with(vec![Action::update_status(
                    &json!({ "version": version }),
                )?]))
            }
            "own" => {
                let child = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("{}-child", req.name), "namespace": req.namespace},
                    "data": {"owner": req.name}});
                Ok(Outcome::with(vec![Action::apply(&child)?]))
            }
            "requeue" => {
                let after = req.settings()?.value()["afterMs"].as_u64().unwrap_or(1000);
                Ok(Outcome::done().requeue_after_ms(after))
            }
            "count" => Ok(Outcome::with(vec![Action::update_status(
                &json!({ "calls": calls }),
            )?])),
            _ => Ok(Outcome::with(vec![Action::update_status(
                &json!({ "phase": "Ready" }),
            )?])),
        }
    }
}

wasmctrl_sdk::export!(Hostile);
