//! The tutorial's behaviour, natively, through the SDK's harness.

use serde_json::{Value, json};
use wasmctrl_sdk::testing::Harness;

use super::*;

const UID: &str = "7c1e0a52-3b7f-4f0e-9a41-0d5c2e8b9f10";
const NOW: &str = "2026-11-28T10:00:00Z";

fn memcached(spec: Value, finalizers: &[&str]) -> Value {
    json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "memcached-sample", "namespace": "default", "uid": UID,
            "generation": 1, "finalizers": finalizers},
        "spec": spec,
    })
}

fn harness() -> Harness {
    Harness::new().now(NOW)
}

fn reconcile(h: &Harness, object: &Value) -> Outcome {
    h.reconcile::<MemcachedController>(object).unwrap()
}

/// The cached Deployment with `available` of its Pods available.
fn cached_deployment(object: &Value, available: i32) -> Value {
    let parsed: Memcached = serde_json::from_value(object.clone()).unwrap();
    let mut deployment = serde_json::to_value(deployment(&parsed)).unwrap();
    deployment["metadata"]["ownerReferences"] = json!([{"apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached", "name": "memcached-sample", "uid": UID, "controller": true}]);
    deployment["status"] = json!({"availableReplicas": available});
    deployment
}

#[test]
fn the_first_pass_adds_the_finalizer_applies_the_deployment_and_reports_progress() {
    let object = memcached(json!({"size": 3}), &[]);
    let outcome = reconcile(&harness(), &object);
    assert_eq!(outcome.actions[0], Action::add_finalizer(FINALIZER));
    let [deployment] = &outcome.applied::<Deployment>()[..] else {
        panic!("one Deployment: {outcome:?}");
    };
    let spec = deployment.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(3));
    let container = &spec.template.spec.as_ref().unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some(IMAGE));
    assert_eq!(container.ports.as_ref().unwrap()[0].container_port, 11211);
    let status: MemcachedStatus = outcome.status().expect("a status");
    let available = available(&status).unwrap();
    assert!(available.is_unknown(), "{available:?}");
    assert_eq!(available.reason, "Progressing");
    assert_eq!(
        available.message,
        "0 of 3 replicas of Deployment memcached-sample available"
    );
}

#[test]
fn available_once_the_deployment_runs_size_pods_and_not_written_again() {
    let object = memcached(json!({"size": 2}), &[FINALIZER]);
    let h = harness().object(cached_deployment(&object, 2));
    let outcome = reconcile(&h, &object);
    assert!(!outcome.actions.contains(&Action::add_finalizer(FINALIZER)));
    let status: MemcachedStatus = outcome.status().expect("a status");
    assert!(available(&status).unwrap().is_true());

    // Reconciled again with that status: only the Deployment is applied (the host skips it).
    let mut settled = object.clone();
    settled["status"] = serde_json::to_value(&status).unwrap();
    let again = reconcile(&h, &settled);
    assert_eq!(again.actions.len(), 1, "{:?}", again.actions);
    assert_eq!(again.applied::<Deployment>().len(), 1);
}

#[test]
fn size_defaults_to_one() {
    let outcome = reconcile(&harness(), &memcached(json!({}), &[FINALIZER]));
    let deployments = outcome.applied::<Deployment>();
    assert_eq!(
        deployments[0].spec.as_ref().unwrap().replicas,
        Some(DEFAULT_SIZE)
    );
}

#[test]
fn deletion_reports_degraded_warns_once_and_lets_the_object_go_last() {
    let mut object = memcached(json!({"size": 1}), &[FINALIZER]);
    object["metadata"]["deletionTimestamp"] = json!(NOW);
    let outcome = reconcile(&harness(), &object);
    let status: MemcachedStatus = outcome.status().expect("a status");
    let degraded = find_condition(&status.conditions, "Degraded").unwrap();
    assert!(degraded.is_true());
    assert_eq!(degraded.reason, "Finalizing");
    let warnings: Vec<_> = outcome.events().collect();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].reason, "Deleting");
    assert_eq!(
        warnings[0].note,
        "Custom Resource memcached-sample is being deleted from the namespace default"
    );
    assert_eq!(
        outcome.actions.last(),
        Some(&Action::remove_finalizer(FINALIZER))
    );
}

#[test]
fn a_deleted_object_someone_else_holds_is_left_alone() {
    let mut object = memcached(json!({}), &["other.example.com/hold"]);
    object["metadata"]["deletionTimestamp"] = json!(NOW);
    assert_eq!(reconcile(&harness(), &object), Outcome::done());
}

#[test]
fn crd_is_generated_from_the_types() {
    use wasmctrl_sdk::kube_core::CustomResourceExt as _;
    wasmctrl_sdk::testing::check_crd_versions(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/memcached/crd.yaml"
        ),
        vec![Memcached::crd(), v1beta1::Memcached::crd()],
        "v1alpha1",
    );
}

#[test]
fn v1beta1_converts_to_and_from_the_stored_v1alpha1() {
    let mut stored = memcached(json!({"size": 2}), &[FINALIZER]);
    stored["metadata"]["labels"] = json!({"team": "cache"});
    stored["status"] = json!({"conditions": []});
    let h = harness();
    let beta = h
        .convert::<MemcachedController>(std::slice::from_ref(&stored), "cache.example.com/v1beta1")
        .unwrap();
    assert_eq!(beta[0]["apiVersion"], "cache.example.com/v1beta1");
    assert_eq!(beta[0]["spec"], json!({"replicas": 2}));
    assert_eq!(beta[0]["metadata"], stored["metadata"], "metadata kept");
    let back = h
        .convert::<MemcachedController>(&beta, "cache.example.com/v1alpha1")
        .unwrap();
    assert_eq!(back[0], stored, "a round trip changes nothing");
    let refused = h.convert::<MemcachedController>(&beta, "cache.example.com/v2");
    assert!(refused.is_err(), "{refused:?}");
}
