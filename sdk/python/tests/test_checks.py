"""The host's check of each action (wasmctrl.testing.checks), as wasmctrl-core's action.rs
tests it."""

from __future__ import annotations

from typing import Any

import pytest

from wasmctrl import Action, Gvk, ObjectRef
from wasmctrl.action import Event, EventType
from wasmctrl.testing.checks import ActionError, BestEffortError, Reconciled, best_effort, check_action
from wasmctrl.testing.scope import Namespaces, Refusal, Scope
from wasmctrl.testing.selector import LabelSelector
from wasmctrl.testing.validation import EVENT_REASON_MAX


def scope() -> Scope:
    return (
        Scope.new(Gvk("example.com", "v1", "Thing"), Namespaces.declared(["ns"]), LabelSelector())
        .owns(Gvk("", "v1", "ConfigMap"))
        .writes(Gvk("apps", "v1", "Deployment"))
    )


LIVE = Reconciled("ns", "a", exists=True)
GONE = Reconciled("ns", "a", exists=False)


def check(reconciled: Reconciled, action: Action) -> str | None:
    """None when the action passes, else the refusal's message."""
    try:
        check_action(scope(), reconciled, action)
        return None
    except (ActionError, Refusal) as e:
        return str(e)


def cm(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}}


def test_best_effort_positions_must_name_actions() -> None:
    assert best_effort([2, 0, 2], 3) == [0, 2]
    with pytest.raises(BestEffortError) as refused:
        best_effort([1, 3], 3)
    assert str(refused.value) == "best-effort position 3 names no action (the outcome has 3)"


def test_applies_must_be_in_scope_and_admissible() -> None:
    assert check(LIVE, Action.apply(cm("a"))) is None
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    assert "not declared" in check(LIVE, Action.apply(secret))
    assert "owner's namespace" in check(LIVE, Action.apply(cm("a", namespace="other")))
    assert check(LIVE, Action.apply(cm("Bad_Name"))).startswith(
        'the API server would refuse ConfigMap Bad_Name: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain'
    )
    assert check(LIVE, Action.apply({"kind": "ConfigMap"})) == "object has no apiVersion"


def test_the_metadata_sent_is_checked_as_the_api_server_checks_it() -> None:
    assert 'metadata.labels: Invalid value: "-x"' in check(LIVE, Action.apply(cm("a", labels={"app": "-x"})))
    assert "metadata.annotations" in check(LIVE, Action.apply(cm("a", annotations={"a/b/c": "v"})))
    refs = [{"apiVersion": "v1", "kind": "Thing", "name": "t", "uid": "1", "controller": True}] * 2
    assert "Only one reference can have Controller set to true" in check(
        LIVE, Action.apply(cm("a", ownerReferences=refs))
    )
    both = check(LIVE, Action.apply(cm("a", finalizers=["orphan", "foregroundDeletion"])))
    assert both.endswith(
        'Invalid value: []string{"orphan", "foregroundDeletion"}: finalizer orphan and foregroundDeletion cannot be both set'
    )


def test_children_are_of_one_owned_kind_each_once() -> None:
    assert check(LIVE, Action.children("v1", "ConfigMap", [cm("a"), cm("b")])) is None
    assert "not an owned kind" in check(LIVE, Action.children("apps/v1", "Deployment", []))
    assert check(LIVE, Action.children("v1", "ConfigMap", [cm("a"), cm("a")])) == "child a appears twice"
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    assert check(LIVE, Action.children("v1", "ConfigMap", [deployment])) == "child d is a Deployment, not a ConfigMap"
    assert check(GONE, Action.children("v1", "ConfigMap", [])) == "ns/a no longer exists"


def test_the_reconciled_object_must_exist_for_status_finalizers_and_events() -> None:
    status = {"ready": True}
    assert check(LIVE, Action.update_status(status)) is None
    assert check(GONE, Action.update_status(status)) == "ns/a no longer exists"
    assert check(LIVE, Action.update_status([])) == "status must be a JSON object"  # type: ignore[arg-type]
    assert check(LIVE, Action.add_finalizer("example.com/cleanup")) is None
    assert "qualified finalizer" in check(LIVE, Action.remove_finalizer("not a name!"))
    made = Event(EventType.NORMAL, "Made", "", "Make")
    assert check(LIVE, made) is None
    long = Event(EventType.NORMAL, "x" * (EVENT_REASON_MAX + 1), "", "Make")
    assert check(LIVE, long) == f"event reason must be 1-{EVENT_REASON_MAX} characters"
    assert "outside" in check(Reconciled("other", "a", True), Action.add_finalizer("example.com/x"))


def test_patches_and_deletes_name_a_writable_target() -> None:
    def target(kind: str, name: str) -> ObjectRef:
        return ObjectRef("apps/v1", kind, "", name)

    assert check(LIVE, Action.merge_patch(target("Deployment", "d"), {})) is None
    assert check(GONE, Action.delete(target("Deployment", "d"))) is None, "no object needed"
    assert "not declared" in check(LIVE, Action.delete(target("StatefulSet", "s")))
    assert check(LIVE, Action.merge_patch(target("Deployment", ""), {})) == "target needs apiVersion, kind and name"
