//! A plugin that misbehaves on request, to prove the sandbox contains it. Its settings choose
//! its manifest name (`{"name": ...}`, default `hostile-<mode>`) and the misbehaviour:
//! `{"mode": "loop" | "alloc" | "panic" | "huge" | "undeclared" | "count" | "cleanup" | "spin"
//! | "fail" | "terminal" | "ok"}`. `fail` is a retryable error for objects labelled `fail=yes`,
//! `terminal` a terminal error, `version` reports `{"version": ...}` from its settings (after `{"iterations": n}` of spinning), `own` applies an owned ConfigMap
//! `<name>-child`, `requeue` asks to run again after `{"afterMs": n}`, `warn`
//! writes `{"warned": true}` to the status and the same Warning `NotReady` on every reconcile,
//! then asks to run again after `{"afterMs": n}` (default 10). `spin` burns `{"iterations": n}` loop iterations (a slow but well-behaved reconcile)
//! and reports the object's generation in its status (of a gone object, nothing). `sql` declares `sql:<declare>` and runs
//! `{"query": ..., "identifiers": [...], "params": [...]}` on database `<use>`, reporting the rows
//! (or the error) in its status. `scope` is declared for namespace `team-a` (owning ConfigMaps,
//! reading Secrets labelled `visible=yes`, writing Deployments) and tries what the object's
//! `try` label says: `get-other`, `list-other`, `list-hidden`, `patch-other`, `apply-other`,
//! `delete-other` reach outside that scope (with `{"allNamespaces": true}` it declares every
//! namespace, and only a host confining it keeps it in `team-a`) (`get-hidden` reports whether it sees a Secret
//! outside its selector); anything else does the same legitimately in its own
//! namespace. `precondition` JSON-patches objects labelled `stuck=yes` with a `test` that always
//! fails, and reports others Ready. `children` returns the complete set of its ConfigMaps, one
//! per name in the object's `spec.children`, then reports the generation it did so for.
//! `outcomes` deletes its ConfigMap `<name>-stale` (which never exists) and applies its
//! ConfigMap `<name>-child`, both best effort, then reports in its status what each action of
//! its previous reconcile did, a `ChildReady` condition saying why the child's write failed,
//! and the children it controls as the host's owner index lists them.

use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::json;
use wasmctrl_sdk::k8s_openapi::api::apps::v1::Deployment;
use wasmctrl_sdk::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use wasmctrl_sdk::kube_core::DynamicObject;
use wasmctrl_sdk::sql::{Statement, Value};
use wasmctrl_sdk::{
    Action, ActionStatus, Context, Error, Gvk, Manifest, ObjectRef, Outcome, Reconcile, Reconciler,
};

/// Calls this instance has seen. A fresh instance per call means it is always 1.
static CALLS: AtomicU32 = AtomicU32::new(0);

/// The plugin.
pub struct Hostile;

/// Free-form: each mode reads the fields it needs.
type Settings = serde_json::Value;

/// The key, and the object unless it is gone, as the modes read them: any kind, as JSON.
struct Key {
    namespace: String,
    name: String,
    object: Option<DynamicObject>,
}

impl Key {
    fn of(event: Reconcile<DynamicObject>) -> Self {
        match event {
            Reconcile::Apply(object) | Reconcile::Cleanup(object) => Self {
                namespace: object.metadata.namespace.clone().unwrap_or_default(),
                name: object.metadata.name.clone().unwrap_or_default(),
                object: Some(object),
            },
            Reconcile::Gone { namespace, name } => Self {
                namespace,
                name,
                object: None,
            },
        }
    }

    /// The object as JSON.
    fn value(&self) -> Option<serde_json::Value> {
        (self.object.as_ref()).map(|o| serde_json::to_value(o).unwrap_or_default())
    }
}

fn mode(settings: &Settings) -> String {
    settings["mode"].as_str().unwrap_or("ok").to_string()
}

impl Reconciler for Hostile {
    type Object = DynamicObject;
    type Settings = Settings;

    fn manifest(settings: &Settings) -> Result<Manifest, String> {
        let mode = mode(settings);
        // `name` lets it pose as another plugin (a new version of it that asks for more).
        let name = match settings["name"].as_str() {
            Some(name) => name.to_string(),
            None => format!("hostile-{mode}"),
        };
        let manifest = Manifest::new(&name, Gvk::new("example.com", "v1", "Thing"));
        Ok(match mode.as_str() {
            "own" | "children" | "outcomes" => manifest.owns::<ConfigMap>(),
            "sql" => {
                let declare = settings["declare"].as_str().unwrap_or("db");
                manifest.capability(&format!("sql:{declare}"))
            }
            // `{"allNamespaces": true}` declares every namespace, for a host that confines it.
            "scope" => {
                let manifest = if settings["allNamespaces"] == true {
                    manifest
                } else {
                    manifest.namespaces(&["team-a"])
                };
                manifest
                    .owns::<ConfigMap>()
                    .reads::<Secret>(
                        wasmctrl_sdk::manifest::Selector {
                            namespaces: Vec::new(),
                            labels: "visible=yes".into(),
                        },
                        None,
                    )
                    .writes::<Deployment>()
            }
            _ => manifest,
        })
    }

    fn reconcile(
        event: Reconcile<DynamicObject>,
        ctx: &Context<'_, Settings>,
    ) -> Result<Outcome, Error> {
        let req = &Key::of(event);
        let calls = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
        let settings = ctx.settings();
        match mode(settings).as_str() {
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
                let s = settings;
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
                let n = settings["iterations"].as_u64().unwrap_or(50_000_000);
                let mut x = 0u64;
                for i in 0..n {
                    x = std::hint::black_box(x.wrapping_add(i));
                }
                let Some(object) = req.value() else {
                    // Gone: nothing left to write a status to.
                    std::hint::black_box(x);
                    return Ok(Outcome::done());
                };
                let generation = object["metadata"]["generation"].clone();
                let status = json!({ "observedGeneration": generation, "spin": x % 2 });
                Ok(Outcome::with(vec![Action::update_status(&status)?]))
            }
            "fail" => {
                let object = req.value().unwrap_or_default();
                if object["metadata"]["labels"]["fail"] == "yes" {
                    return Err(Error::retryable("asked to fail"));
                }
                Ok(Outcome::with(vec![Action::update_status(
                    &json!({ "phase": "Ready" }),
                )?]))
            }
            "terminal" => Err(Error::terminal("this can never work")),
            "version" => {
                let version = settings["version"].clone();
                // Optionally slow: `{"iterations": n}` first, like `spin`.
                let n = settings["iterations"].as_u64().unwrap_or(0);
                let mut x = 0u64;
                for i in 0..n {
                    x = std::hint::black_box(x.wrapping_add(i));
                }
                std::hint::black_box(x);
                Ok(Outcome::with(vec![Action::update_status(
                    &json!({ "version": version }),
                )?]))
            }
            "own" => {
                if req.object.is_none() {
                    // Gone: its child goes with it (garbage collection by owner reference).
                    return Ok(Outcome::done());
                }
                let child = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("{}-child", req.name), "namespace": req.namespace},
                    "data": {"owner": req.name}});
                Ok(Outcome::with(vec![Action::apply(&child)?]))
            }
            "children" => {
                let Some(object) = req.value() else {
                    return Ok(Outcome::done());
                };
                let names = object["spec"]["children"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let children: Vec<_> = names
                    .iter()
                    .map(|name| {
                        json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": name, "namespace": req.namespace},
                            "data": {"owner": req.name}})
                    })
                    .collect();
                let generation = &object["metadata"]["generation"];
                Ok(Outcome::with(vec![
                    Action::children(&config_map(), &children)?,
                    Action::update_status(&json!({"observedGeneration": generation}))?,
                ]))
            }
            "warn" => {
                let after = settings["afterMs"].as_u64().unwrap_or(10);
                Ok(Outcome::with(vec![
                    Action::update_status(&json!({"warned": true}))?,
                    Action::warning("NotReady", "waiting for a dependency; retrying"),
                ])
                .requeue_after(std::time::Duration::from_millis(after)))
            }
            "requeue" => {
                let after = settings["afterMs"].as_u64().unwrap_or(1000);
                Ok(Outcome::done().requeue_after(std::time::Duration::from_millis(after)))
            }
            "scope" => scope(req, ctx),
            "outcomes" => outcomes(req, ctx),
            "precondition" => {
                let object = req.value().unwrap_or_default();
                if object["metadata"]["labels"]["stuck"] != "yes" {
                    return Ok(Outcome::with(vec![Action::update_status(
                        &json!({ "phase": "Ready" }),
                    )?]));
                }
                let me = ObjectRef::new(
                    &Gvk::new("example.com", "v1", "Thing"),
                    &req.namespace,
                    &req.name,
                );
                let ops = json!([
                    {"op": "test", "path": "/metadata/labels/stuck", "value": "never"},
                    {"op": "add", "path": "/metadata/labels/unstuck", "value": "yes"},
                ]);
                Ok(Outcome::with(vec![Action::json_patch(me, &ops)?]))
            }
            "count" => Ok(Outcome::with(vec![Action::update_status(
                &json!({ "calls": calls }),
            )?])),
            "cleanup" => cleanup(req),
            _ => Ok(Outcome::with(vec![Action::update_status(
                &json!({ "phase": "Ready" }),
            )?])),
        }
    }
}

/// The `cleanup` mode: what operator-sdk's Memcached tutorial does with its finalizer. A live
/// object gets the finalizer, then a Ready status; a deleted one is cleaned up in one
/// reconcile that writes the status, records a Warning and removes the finalizer.
fn cleanup(req: &Key) -> Result<Outcome, Error> {
    const FINALIZER: &str = "example.com/cleanup";
    let Some(object) = req.value() else {
        return Ok(Outcome::done());
    };
    let held = (object["metadata"]["finalizers"].as_array())
        .is_some_and(|f| f.iter().any(|name| name == FINALIZER));
    let actions = match (object["metadata"]["deletionTimestamp"].is_null(), held) {
        (true, false) => vec![Action::add_finalizer(FINALIZER)],
        (true, true) => vec![Action::update_status(&json!({"phase": "Ready"}))?],
        (false, true) => vec![
            Action::update_status(&json!({"phase": "Degraded", "reason": "Finalizing"}))?,
            Action::warning("Finalizing", "cleaning up before the object goes"),
            Action::remove_finalizer(FINALIZER),
        ],
        (false, false) => vec![],
    };
    Ok(Outcome::with(actions))
}

/// The `outcomes` mode.
fn outcomes(req: &Key, ctx: &Context<'_, Settings>) -> Result<Outcome, Error> {
    let Some(object) = &req.object else {
        return Ok(Outcome::done());
    };
    let children = ctx.children::<ConfigMap>(object)?;
    let children: Vec<_> = (children.into_iter())
        .filter_map(|c| c.metadata.name)
        .collect();
    let child = format!("{}-child", req.name);
    let previous: Vec<String> = (ctx.previous().iter())
        .map(|result| match &result.status {
            ActionStatus::Applied => "applied".to_string(),
            ActionStatus::Unchanged => "unchanged".to_string(),
            ActionStatus::Skipped => "skipped".to_string(),
            ActionStatus::Failed(f) => format!("failed {} {}", f.code, f.reason),
        })
        .collect();
    let condition = match ctx.failures().find(|(_, f)| f.target.name == child) {
        Some((_, f)) => json!({"type": "ChildReady", "status": "False", "reason": "CreateFailed",
            "message": format!("{} {}: {}", f.code, f.reason, f.message)}),
        None => json!({"type": "ChildReady", "status": "True", "reason": "Created"}),
    };
    let stale = ObjectRef::new(
        &config_map(),
        &req.namespace,
        &format!("{}-stale", req.name),
    );
    let child = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": child, "namespace": req.namespace}, "data": {"owner": req.name}});
    Ok(Outcome::done()
        .push_best_effort(Action::delete(stale))
        .push_best_effort(Action::apply(&child)?)
        .push(Action::update_status(
            &json!({"previous": previous, "conditions": [condition], "children": children}),
        )?))
}

fn config_map() -> Gvk {
    Gvk::new("", "v1", "ConfigMap")
}

fn secret() -> Gvk {
    Gvk::new("", "v1", "Secret")
}

fn deployment() -> Gvk {
    Gvk::new("apps", "v1", "Deployment")
}

/// The `scope` mode: one attempt per reconcile, chosen by the object's `try` label, aimed at
/// namespace `team-b` (or, legitimately, at the object's own namespace).
fn scope(req: &Key, ctx: &Context<'_, Settings>) -> Result<Outcome, Error> {
    let object = req.value().unwrap_or_default();
    let attempt = object["metadata"]["labels"]["try"]
        .as_str()
        .unwrap_or("legit")
        .to_string();
    let own = req.namespace.as_str();
    let restart =
        json!({"spec": {"template": {"metadata": {"annotations": {"restartedBy": req.name}}}}});
    let child = |namespace: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{}-child", req.name), "namespace": namespace},
            "data": {"owner": req.name}})
    };
    // A refused read comes back as an error; carry on as a careless plugin would. The host
    // fails the reconcile all the same.
    let actions = match attempt.as_str() {
        "get-other" => {
            let _ = ctx.get_dynamic::<serde_json::Value>(&secret(), "team-b", "data");
            vec![]
        }
        "list-other" => {
            let _ = ctx.list_dynamic::<serde_json::Value>(&secret(), "team-b", "");
            vec![]
        }
        "get-hidden" => {
            // Invisible: the object is outside the declared selector, so not even cached.
            let found = ctx.get_dynamic::<serde_json::Value>(&secret(), own, "hidden")?;
            vec![Action::update_status(
                &json!({"phase": "Hidden", "found": found.is_some()}),
            )?]
        }
        "list-hidden" => {
            let _ = ctx.list_dynamic::<serde_json::Value>(&secret(), own, "visible=no");
            vec![]
        }
        "patch-other" => vec![
            Action::update_status(&json!({"phase": "Escaping"}))?,
            Action::merge_patch(ObjectRef::new(&deployment(), "team-b", "tools"), &restart)?,
        ],
        "apply-other" => vec![Action::apply(&child("team-b"))?],
        "delete-other" => vec![Action::delete(ObjectRef::new(
            &deployment(),
            "team-b",
            "tools",
        ))],
        _ => {
            let visible = ctx
                .get_dynamic::<serde_json::Value>(&secret(), own, "data")?
                .is_some();
            let listed = ctx
                .list_dynamic::<serde_json::Value>(&secret(), "", "")?
                .len();
            vec![
                Action::apply(&child(own))?,
                Action::merge_patch(ObjectRef::new(&deployment(), own, "tools"), &restart)?,
                Action::event("InScope", "did what it declared"),
                Action::update_status(
                    &json!({"phase": "Done", "visible": visible, "listed": listed}),
                )?,
            ]
        }
    };
    Ok(Outcome::with(actions))
}

wasmctrl_sdk::export!(Hostile);

#[cfg(test)]
mod tests {
    //! The SDK's harness refuses what the host refuses, with the same rules.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use wasmctrl_sdk::testing::Harness;

    fn thing(namespace: &str, attempt: &str) -> serde_json::Value {
        json!({"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": "t", "namespace": namespace, "labels": {"try": attempt}}})
    }

    fn harness() -> Harness {
        let secret = |namespace: &str, name: &str, visible: &str| {
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": namespace, "labels": {"visible": visible}}})
        };
        Harness::new()
            .settings(json!({"mode": "scope"}))
            .object(secret("team-a", "data", "yes"))
            .object(secret("team-a", "hidden", "no"))
            .object(secret("team-b", "data", "yes"))
    }

    #[test]
    fn reaching_outside_the_scope_fails_as_on_the_host() {
        for (attempt, needle) in [
            ("get-other", "get v1/Secret team-b/data refused"),
            ("list-other", "list v1/Secret in namespace team-b refused"),
            (
                "list-hidden",
                "list v1/Secret in namespace team-a refused: the selector visible=no",
            ),
            (
                "patch-other",
                "patch apps/v1/Deployment team-b/tools refused",
            ),
            ("apply-other", "apply v1/ConfigMap team-b/t-child refused"),
            (
                "delete-other",
                "delete apps/v1/Deployment team-b/tools refused",
            ),
        ] {
            let err = harness()
                .reconcile::<Hostile>(&thing("team-a", attempt))
                .unwrap_err();
            assert!(!err.retryable, "{attempt}: a declaration error is terminal");
            assert!(err.message.contains(needle), "{attempt}: {}", err.message);
        }
    }

    #[test]
    fn an_object_the_api_server_would_refuse_fails_as_on_the_host() {
        let thing = json!({"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": "Big.Thing", "namespace": "default"}});
        let err = Harness::new()
            .settings(json!({"mode": "own"}))
            .reconcile::<Hostile>(&thing)
            .unwrap_err();
        assert!(!err.retryable);
        assert!(
            err.message.contains(
                "the API server would refuse ConfigMap Big.Thing-child: metadata.name: Invalid value: \"Big.Thing-child\""
            ),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_failed_child_write_becomes_a_condition_on_the_next_reconcile() {
        use wasmctrl_sdk::request::Request;
        use wasmctrl_sdk::{ActionFailure, ActionResult};
        let thing = json!({"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": "t", "namespace": "default"}});
        let failed = ActionFailure {
            target: ObjectRef::new(&config_map(), "default", "t-child"),
            code: 422,
            reason: "Invalid".into(),
            message: "no".into(),
        };
        let previous = vec![
            ActionResult {
                index: 0,
                status: ActionStatus::Unchanged,
            },
            ActionResult {
                index: 1,
                status: ActionStatus::Failed(failed),
            },
        ];
        let outcome = Harness::new()
            .settings(json!({"mode": "outcomes"}))
            .run::<Hostile>(Request::for_object(&thing).after(previous))
            .unwrap();
        assert_eq!(outcome.best_effort, vec![0, 1]);
        let Action::UpdateStatus(status) = &outcome.actions[2] else {
            panic!("{:?}", outcome.actions)
        };
        let status: serde_json::Value = serde_json::from_str(status).unwrap();
        assert_eq!(
            status["previous"],
            json!(["unchanged", "failed 422 Invalid"])
        );
        assert_eq!(
            status["conditions"][0],
            json!({"type": "ChildReady", "status": "False", "reason": "CreateFailed",
                "message": "422 Invalid: no"})
        );
    }

    #[test]
    fn the_same_plugin_works_inside_its_scope() {
        let outcome = harness()
            .reconcile::<Hostile>(&thing("team-a", "legit"))
            .unwrap();
        assert_eq!(outcome.actions.len(), 4);
        let Action::UpdateStatus(status) = &outcome.actions[3] else {
            panic!("{:?}", outcome.actions)
        };
        let status: serde_json::Value = serde_json::from_str(status).unwrap();
        // Only the visible Secret of its own namespace is listed.
        assert_eq!(
            status,
            json!({"phase": "Done", "visible": true, "listed": 1})
        );
        // A key outside its namespaces is never its to reconcile.
        assert!(
            harness()
                .reconcile::<Hostile>(&thing("team-b", "legit"))
                .is_err()
        );
    }
}
