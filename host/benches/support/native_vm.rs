//! The VirtualMachine controller one would otherwise write: a plain kube-runtime `Controller`
//! over a `watcher` + `reflector` with the `generation` predicate, doing per VM what the seed
//! plugin does, with the plugin's own `desired_status`: a JSON Patch `add /status` on the status
//! subresource and, when the phase changes, one events.k8s.io/v1 Event. The benchmarks compare
//! the host with it (`convergence`, in this process; `sharding`, as processes of their own).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;
use virtualmachine::{VirtualMachine, desired_status, reports};

/// How the native controller records an Event.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Events {
    /// Created directly: one POST per Event.
    Direct,
    /// Through kube-runtime's `Recorder` (series, and a cache swept on every Event).
    Recorder,
}

/// The native controller's context.
pub struct Native {
    client: kube::Client,
    events: EventSink,
}

/// Where the native controller's Events go.
pub enum EventSink {
    Direct(Reporter),
    Recorder(Recorder),
}

impl EventSink {
    /// Records `event` about `vm`, best effort (as the host records events).
    async fn publish(&self, client: &kube::Client, event: &Event, vm: &VirtualMachine) {
        let regarding = vm.object_ref(&());
        match self {
            EventSink::Recorder(recorder) => {
                let _ = recorder.publish(event, &regarding).await;
            }
            EventSink::Direct(reporter) => {
                use k8s_openapi::api::events::v1::Event as KubeEvent;
                let namespace = vm.namespace().unwrap_or_default();
                let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                    jiff::Timestamp::now(),
                );
                let object = KubeEvent {
                    metadata: kube::api::ObjectMeta {
                        // Named as client-go's recorder and the host name theirs. (A
                        // `generateName` of `"{vm}."` is refused by kube, which validates
                        // the prefix as a DNS subdomain: it cannot end in a dot.)
                        name: Some(format!("{}.{:x}", vm.name_any(), now.0.as_nanosecond())),
                        namespace: Some(namespace.clone()),
                        ..Default::default()
                    },
                    event_time: Some(now),
                    action: Some(event.action.clone()),
                    note: event.note.clone(),
                    reason: Some(event.reason.clone()),
                    regarding: Some(regarding),
                    reporting_controller: Some(reporter.controller.clone()),
                    reporting_instance: reporter.instance.clone(),
                    type_: Some("Normal".into()),
                    ..Default::default()
                };
                let api: Api<KubeEvent> = Api::namespaced(client.clone(), &namespace);
                // Best effort, as the host records events; a refused one fails the round
                // (`round` checks that no request failed).
                let _ = api.create(&Default::default(), &object).await;
            }
        }
    }
}

async fn native_reconcile(
    vm: Arc<VirtualMachine>,
    ctx: Arc<Native>,
) -> Result<Action, kube::Error> {
    let desired = desired_status(&vm);
    let current = vm.status.clone().unwrap_or_default();
    if reports(&current, &desired) {
        return Ok(Action::await_change());
    }
    let mut status = desired;
    status.last_update_time = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let api: Api<VirtualMachine> =
        Api::namespaced(ctx.client.clone(), &vm.namespace().unwrap_or_default());
    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/status", "value": status}])).unwrap();
    api.patch_status(
        &vm.name_any(),
        &PatchParams::default(),
        &Patch::<()>::Json(ops),
    )
    .await?;
    if current.phase != status.phase {
        let event = Event {
            type_: EventType::Normal,
            reason: status.phase.clone(),
            note: Some(format!("{} is {}", vm.name_any(), status.phase)),
            action: "Reconcile".into(),
            secondary: None,
        };
        ctx.events.publish(&ctx.client, &event, &vm).await;
    }
    Ok(Action::await_change())
}

fn native_error(_: Arc<VirtualMachine>, _: &kube::Error, _: Arc<Native>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

/// The native controller with `workers` concurrent reconciles, running until the returned
/// task is aborted, and its cache.
pub fn start_native(
    client: kube::Client,
    events: Events,
    workers: u16,
) -> (
    tokio::task::JoinHandle<()>,
    reflector::Store<VirtualMachine>,
) {
    let api: Api<VirtualMachine> = Api::all(client.clone());
    let (reader, writer) = reflector::store();
    let trigger = watcher::watcher(api, watcher::Config::default().any_semantic())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(predicates::generation, Default::default());
    let reporter = Reporter {
        controller: "native/virtualmachine".into(),
        instance: Some("bench".into()),
    };
    let events = match events {
        Events::Direct => EventSink::Direct(reporter),
        Events::Recorder => EventSink::Recorder(Recorder::new(client.clone(), reporter)),
    };
    let ctx = Arc::new(Native { events, client });
    let run = Controller::for_stream(trigger, reader.clone())
        .with_config(controller::Config::default().concurrency(workers))
        .run(native_reconcile, native_error, ctx)
        .for_each(|_| async {});
    (tokio::spawn(run), reader)
}
