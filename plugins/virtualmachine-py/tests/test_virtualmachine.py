"""The Rust seed's tests (plugins/virtualmachine), run on the Python port through the native
harness, plus what the port itself must keep: the same log lines, and the pyproject's version."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

import virtualmachine
from virtualmachine import VirtualMachineController
from wasmctrl import Denied, Error, EventType, Gvk, Operation, Outcome, Predicate
from wasmctrl.action import Event, UpdateStatus
from wasmctrl.log import Level
from wasmctrl.testing import Harness, WebhookError


def vm(spec: Any, status: Any = None) -> dict[str, Any]:
    return {
        "apiVersion": "cloudnative.tw/v1alpha1",
        "kind": "VirtualMachine",
        "metadata": {"name": "test-vm", "namespace": "default", "generation": 1},
        "spec": spec,
        "status": status,
    }


def spec(cpu: Any = 2, memory: str = "4Gi", root_disk: str = "40Gi", **more: Any) -> dict[str, Any]:
    return {"resource": {"cpu": cpu, "memory": memory, "rootDisk": root_disk}, **more}


def status_of(outcome: Outcome) -> dict[str, Any]:
    first = outcome.actions[0] if outcome.actions else None
    assert isinstance(first, UpdateStatus), f"expected a status update first, got {outcome.actions}"
    return first.status


def harness() -> Harness:
    return Harness(VirtualMachineController)


def test_new_vm_becomes_active_with_its_resources() -> None:
    outcome = harness().now("2026-11-22T00:00:00Z").reconcile(vm(spec()))
    status = status_of(outcome)
    assert status == {
        "phase": "Active",
        "server": {"cpu": 2, "memory": "4Gi", "rootDisk": "40Gi"},
        "observedGeneration": 1,
        "lastUpdateTime": "2026-11-22T00:00:00Z",
    }
    event = outcome.actions[1]
    assert isinstance(event, Event) and (event.reason, event.note) == ("Active", "test-vm is Active")


def test_unchanged_status_writes_nothing() -> None:
    status = {"phase": "Active", "observedGeneration": 1, "server": spec()["resource"], "lastUpdateTime": "x"}
    assert harness().reconcile(vm(spec(), status)) == Outcome.done()


def test_spec_change_updates_status_without_a_second_event() -> None:
    status = {"phase": "Active", "observedGeneration": 0, "server": spec()["resource"]}
    outcome = harness().reconcile(vm(spec(cpu=4, memory="8Gi"), status))
    assert status_of(outcome)["server"]["cpu"] == 4
    assert len(outcome.actions) == 1


def test_invalid_resources_fail_with_a_warning() -> None:
    outcome = harness().reconcile(vm(spec(cpu=0)))
    status = status_of(outcome)
    assert status["phase"] == "Failed"
    assert status["reason"] == "spec.resource.cpu must be positive, got 0"
    assert "server" not in status
    [event] = outcome.events()
    assert (event.type, event.reason) == (EventType.WARNING, "Failed")
    assert event.note == "test-vm is Failed: spec.resource.cpu must be positive, got 0"
    outcome = harness().reconcile(vm(spec(cpu=1, memory="lots")))
    assert status_of(outcome)["reason"] == 'spec.resource.memory is not a quantity: "lots"'


def test_stop_action_stops() -> None:
    outcome = harness().reconcile(vm(spec(cpu=1, memory="1Gi", root_disk="1Gi", action="stop")))
    assert status_of(outcome)["phase"] == "Stopped"


def test_deleted_vm_is_logged_and_left_alone() -> None:
    h = harness()
    assert h.reconcile_deleted("default", "gone") == Outcome.done()
    [line] = [line for line in h.logs() if "no longer exists" in line.message]
    assert line.level == Level.INFO
    assert line.fields == [("key", "default/gone")]


def test_reconciling_logs_what_the_rust_plugin_logs() -> None:
    h = harness()
    h.reconcile(vm(spec(action="stop")))
    [line] = h.logs()
    assert line.message == "reconciling virtualmachine"
    assert line.fields == [
        ("key", "default/test-vm"),
        ("generation", "1"),
        ("spec", 'Spec { resource: Resource { cpu: 2, memory: "4Gi", root_disk: "40Gi" }, action: Some("stop") }'),
    ]
    without_generation = vm(spec())
    del without_generation["metadata"]["generation"]
    h = harness()
    h.reconcile(without_generation)
    assert [k for k, _ in h.logs()[0].fields] == ["key", "spec"], "an unset generation is left out, as tracing does"


def test_an_object_that_does_not_fit_is_a_terminal_error_naming_it() -> None:
    with pytest.raises(Error) as refused:
        harness().reconcile(vm(spec(cpu="2")))
    assert refused.value == Error.terminal(
        "default/test-vm: object does not parse: spec.resource.cpu: expected an integer, got string '2'"
    )


def test_manifest_watches_virtualmachines_on_generation_changes() -> None:
    m = harness().manifest()
    assert m.name == "virtualmachine-py"
    assert m.watches.kind == Gvk("cloudnative.tw", "v1alpha1", "VirtualMachine")
    assert m.watches.predicates == [Predicate.GENERATION_CHANGED]
    assert m.webhooks.validates == [Operation.CREATE, Operation.UPDATE] and m.webhooks.defaults


def test_the_webhooks_refuse_what_the_controller_would_fail_and_default_the_action() -> None:
    h = harness()
    with pytest.raises(Denied) as refused:
        h.validate(Operation.CREATE, vm(spec(cpu=0)))
    assert (refused.value.message, refused.value.code) == ("spec.resource.cpu must be positive, got 0", 403)
    warnings = h.validate(Operation.UPDATE, vm(spec(cpu=1)), vm(spec(cpu=2)))
    assert warnings == ["test-vm: fewer CPUs (2 -> 1) take effect at the next restart"]
    unknown = vm(spec())
    unknown["spec"]["extra"] = "kept"
    defaulted, _ = h.defaulted(unknown)
    assert defaulted["spec"]["action"] == "start"
    assert defaulted["spec"]["extra"] == "kept", "fields the plugin does not model are kept"
    with pytest.raises(WebhookError):
        h.validate(Operation.DELETE, None, vm(spec()))


def test_an_object_the_webhooks_cannot_read_is_refused_with_400() -> None:
    with pytest.raises(Denied) as refused:
        harness().validate(Operation.CREATE, vm({"resource": {"cpu": 1}}))
    assert refused.value.code == 400
    assert refused.value.message == "the object does not decode: spec.resource: missing field 'memory'"


def test_quantities_are_kubernetes_quantities() -> None:
    for good in ["4Gi", "40Gi", "1", "0.5", "500m", "1.5k", "2E"]:
        assert virtualmachine.is_quantity(good), good
    for bad in ["", "Gi", ".", "1..2", "4 Gi", "lots", "-1", "1.2.3Mi"]:
        assert not virtualmachine.is_quantity(bad), bad


def test_the_version_is_the_pyprojects() -> None:
    pyproject = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == virtualmachine.VERSION
    assert pyproject["tool"]["wasmctrl"]["plugin"] == "virtualmachine:VirtualMachineController"


def test_a_vm_being_deleted_is_logged_and_left_alone() -> None:
    deleting = vm(spec())
    deleting["metadata"]["deletionTimestamp"] = "2026-11-22T00:00:00Z"
    deleting["metadata"]["finalizers"] = ["example.com/someone-elses"]
    h = harness()
    assert h.reconcile(deleting) == Outcome.done()
    assert [(line.message, line.fields) for line in h.logs()] == [
        ("virtualmachine is being deleted", [("key", "default/test-vm")])
    ]
