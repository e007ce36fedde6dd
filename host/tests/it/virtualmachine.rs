//! The virtualmachine plugin end to end in-process: embedded API server, shared informers, the
//! workqueue, the sandbox and the applier. Its own test binary because it captures the process's
//! warnings and errors.

// Helpers outside #[test] fns panic on failure too: they are part of the tests.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmctrl::apiserver::ApiServer;

async fn install_vm_crd(client: &kube::Client) {
    common::install_crd(
        client,
        common::yaml_objects("examples/virtualmachine/crd.yaml").remove(0),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtualmachine_status_follows_spec_and_delete_is_quiet() {
    let complaints = common::Captured::global(tracing::Level::WARN);

    let server = ApiServer::new().unwrap();
    let client = server.client();
    install_vm_crd(&client).await;
    let vms = common::vms::api(&client, "default");
    let vm = common::yaml_objects("examples/virtualmachine/test-vm.yaml").remove(0);
    vms.create(&PostParams::default(), &serde_json::from_value(vm).unwrap())
        .await
        .unwrap();

    // The host holds only the RBAC generated from what the plugin declares.
    let host = common::host_of(&server, "virtualmachine", &json!({})).await;

    let status = common::eventually(20, "status.phase Active", || async {
        common::status_of(&vms, "test-vm")
            .await
            .filter(|s| s["phase"] == "Active")
    })
    .await;
    assert_eq!(status["server"]["cpu"], 2);
    assert_eq!(status["observedGeneration"], 1);

    let patch = json!({"spec": {"resource": {"cpu": 4}}});
    vms.patch("test-vm", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let status = common::eventually(20, "status.server.cpu 4", || async {
        common::status_of(&vms, "test-vm")
            .await
            .filter(|s| s["server"]["cpu"] == 4)
    })
    .await;
    assert_eq!(status["observedGeneration"], 2);

    let before = host.counts("virtualmachine").unwrap().total();
    vms.delete("test-vm", &DeleteParams::default())
        .await
        .unwrap();
    common::eventually(20, "the VM to be gone", || async {
        vms.get_opt("test-vm")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    // The host reconciles the gone key before it is shut down, so a complaint would be logged.
    common::eventually(20, "the reconcile of the deleted VM", || async {
        (host.counts("virtualmachine").unwrap().total() > before).then_some(())
    })
    .await;
    host.shutdown(Duration::from_secs(5)).await;

    let logged = complaints.text();
    assert!(
        logged.is_empty(),
        "the host logged warnings or errors:\n{logged}"
    );
}
