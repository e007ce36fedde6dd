"""Actions and outcomes (wasmctrl.action): built as the Rust SDK builds them, JSON written as
serde_json writes it, and read back typed as tests do."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from wasmctrl import Action, Error, EventType, Gvk, ObjectRef, Outcome, Propagation
from wasmctrl.action import Apply, Children, Delete, Patch, PatchType


def config_map(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def test_typed_accessors_read_back_what_the_outcome_carries() -> None:
    outcome = (
        Outcome.done()
        .push(Action.apply(config_map("a")))
        .push(Action.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}))
        .push(Action.children("v1", "ConfigMap", [config_map("b"), config_map("c")]))
        .push(Action.update_status({"phase": "Old"}))
        .push(Action.warning("Finalizing", "going"))
        .push(Action.delete(ObjectRef("v1", "ConfigMap", "ns", "gone")))
        .push(Action.update_status({"phase": "New"}))
    )
    assert [m["metadata"]["name"] for m in outcome.applied("v1", "ConfigMap")] == ["a", "b", "c"]
    [deployment] = outcome.applied("apps/v1", "Deployment")
    assert deployment["metadata"]["name"] == "web"
    assert outcome.status() == {"phase": "New"}, "the last status written is the one the object ends with"
    assert [e.reason for e in outcome.events()] == ["Finalizing"]
    assert [o.name for o in outcome.deleted()] == ["gone"]
    assert Outcome.done().status() is None


def test_json_is_written_as_serde_json_writes_it() -> None:
    applied = Action.apply({"apiVersion": "v1", "kind": "ConfigMap", "data": {"greeting": "grüß dich"}})
    assert isinstance(applied, Apply)
    assert applied.json == '{"apiVersion":"v1","kind":"ConfigMap","data":{"greeting":"grüß dich"}}'


def test_an_object_that_cannot_be_sent_fails_when_the_action_is_built() -> None:
    with pytest.raises(Error) as refused:
        Action.update_status({"ratio": math.nan})
    assert not refused.value.is_retryable
    assert refused.value.message.startswith("serializing a status:")
    with pytest.raises(Error, match="serializing an applied object"):
        Action.apply({"when": object()})


def test_changing_a_dict_after_building_its_action_changes_nothing_sent() -> None:
    status = {"phase": "Ready"}
    action = Action.update_status(status)
    status["phase"] = "Changed"
    assert action.status == {"phase": "Ready"}


def test_patches_deletes_events_and_children_carry_their_parts() -> None:
    target = ObjectRef("apps/v1", "Deployment", "team-a", "tools")
    merge = Action.merge_patch(target, {"spec": {"replicas": 2}})
    assert merge == Patch(target, PatchType.MERGE, '{"spec":{"replicas":2}}')
    ops = Action.json_patch(target, [{"op": "test", "path": "/a", "value": 1}])
    assert ops.type is PatchType.JSON and ops.body.startswith('[{"op":"test"')
    assert Action.delete(target) == Delete(target, Propagation.BACKGROUND)
    assert Action.delete(target, Propagation.ORPHAN).propagation is Propagation.ORPHAN
    event = Action.event("Created", "made it")
    assert (event.type, event.action) == (EventType.NORMAL, "Reconcile")
    children = Action.children("apps/v1", "Deployment", [])
    assert children == Children(Gvk("apps", "v1", "Deployment"), ())
    assert ObjectRef.to({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}) == ObjectRef(
        "v1", "Pod", "", "p"
    )


def test_best_effort_positions_and_requeues() -> None:
    outcome = Outcome.of(Action.add_finalizer("example.com/x"))
    outcome.push_best_effort(Action.event("A", "a")).push(Action.event("B", "b")).push_best_effort(
        Action.event("C", "c")
    )
    assert outcome.best_effort == [1, 3]
    assert Outcome.done().requeue_after(timedelta(seconds=1.5)).requeue_after_ms == 1500
    assert Outcome.done().requeue_after(0.01).requeue_after_ms == 10
    with pytest.raises(ValueError):
        Outcome.done().requeue_after(-1)


def test_errors_say_whether_they_are_retried() -> None:
    assert str(Error.retryable("db down")) == "db down (retryable)"
    assert str(Error.terminal("bad spec")) == "bad spec (terminal)"
    assert Error.retryable("x") != Error.terminal("x")
    assert Error.retryable("x").is_retryable and not Error.terminal("x").is_retryable
