"""The native harness (wasmctrl.testing.Harness) refuses what the host refuses: reads and
actions outside the manifest's kinds, namespaces and labels (the Rust hostile plugin's `scope`
mode, attempt by attempt), undeclared SQL, bad best-effort positions, undeclared webhooks."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from wasmctrl import (
    Action,
    Apply,
    Context,
    Converter,
    Denied,
    Error,
    Gone,
    HubAndSpoke,
    Manifest,
    ObjectRef,
    Operation,
    Outcome,
    Reconcile,
    Reconciler,
    Statement,
    Validator,
    meta,
)
from wasmctrl.request import Request
from wasmctrl.sql import Rows
from wasmctrl.testing import Harness, WebhookError

SECRETS = ("v1", "Secret")
DEPLOYMENTS = ("apps/v1", "Deployment")


class Scoped(Reconciler):
    """Declared for namespace team-a: owns ConfigMaps, reads Secrets labelled visible=yes,
    writes Deployments; tries what the object's `try` label says."""

    def manifest(self, settings: Any) -> Manifest:
        return (
            Manifest.for_kind("example.com/v1", "Thing", "scoped")
            .namespaces("team-a")
            .owns_kind("v1", "ConfigMap")
            .reads_kind(*SECRETS, labels="visible=yes")
            .writes_kind(*DEPLOYMENTS)
            .capability("sql:db")
        )

    def reconcile(self, event: Reconcile, ctx: Context[Any]) -> Outcome:
        if isinstance(event, Gone):
            return Outcome.done()
        attempt = meta.labels(event.object).get("try", "legit")
        own = ctx.namespace
        child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{ctx.name}-child", "namespace": own}}
        tools = ObjectRef(*DEPLOYMENTS, "team-b", "tools")
        match attempt:
            case "get-other":
                # A careless plugin carries on after a refused read; the host fails it anyway.
                with contextlib.suppress(Error):
                    ctx.cache.get(*SECRETS, "team-b", "data")
                return Outcome.done()
            case "list-other":
                ctx.cache.list(*SECRETS, "team-b")
            case "list-hidden":
                ctx.cache.list(*SECRETS, own, "visible=no")
            case "get-hidden":
                found = ctx.cache.get(*SECRETS, own, "hidden")
                return Outcome.of(Action.update_status({"found": found is not None}))
            case "patch-other":
                return Outcome.of(Action.update_status({"phase": "Escaping"}), Action.merge_patch(tools, {"spec": {}}))
            case "apply-other":
                return Outcome.of(Action.apply({**child, "metadata": {**child["metadata"], "namespace": "team-b"}}))
            case "delete-other":
                return Outcome.of(Action.delete(tools))
            case "best-effort-past-end":
                return Outcome(actions=[Action.apply(child)], best_effort=[1])
            case "sql":
                rows = ctx.sql(meta.labels(event.object)["db"]).execute(Statement("SELECT $1").bind(ctx.key))
                return Outcome.of(Action.update_status({"got": rows.get(0, "value")}))
            case "children":
                names = [meta.name(c) for c in ctx.cache.children("v1", "ConfigMap", event.object)]
                return Outcome.of(Action.update_status({"children": names}))
        visible = ctx.cache.get(*SECRETS, own, "data") is not None
        listed = [meta.name(s) for s in ctx.cache.list(*SECRETS)]
        return Outcome.of(Action.apply(child), Action.update_status({"visible": visible, "listed": listed}))


def thing(attempt: str, namespace: str = "team-a", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t", "namespace": namespace, "uid": "u-1", "labels": {"try": attempt, **labels}},
    }


def secret(namespace: str, name: str, visible: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": {"visible": visible}},
    }


def harness() -> Harness:
    return (
        Harness(Scoped)
        .object(secret("team-a", "data", "yes"))
        .object(secret("team-a", "hidden", "no"))
        .object(secret("team-b", "data", "yes"))
    )


def refusal(attempt: str) -> str:
    with pytest.raises(Error) as refused:
        harness().reconcile(thing(attempt))
    assert not refused.value.is_retryable
    return refused.value.message


def test_legitimate_reads_see_only_declared_namespaces_and_labels() -> None:
    outcome = harness().reconcile(thing("legit"))
    assert outcome.status() == {"visible": True, "listed": ["data"]}, "team-b's and the hidden Secret are not seen"
    assert harness().reconcile(thing("get-hidden")).status() == {"found": False}


def test_reads_outside_the_scope_fail_the_reconcile_even_when_the_plugin_carries_on() -> None:
    assert refusal("get-other") == (
        "cache read get v1/Secret team-b/data refused: namespace team-b is outside the namespaces declared for this kind ([team-a])"
    )
    assert refusal("list-other").startswith("cache read list v1/Secret in namespace team-b refused")
    assert refusal("list-hidden") == (
        "cache read list v1/Secret in namespace team-a refused: the selector visible=no asks for labels "
        "outside the declared selector (visible=yes)"
    )


def test_actions_outside_the_scope_are_refused_by_position() -> None:
    assert refusal("patch-other") == (
        "action 1: patch apps/v1/Deployment team-b/tools refused: namespace team-b is outside the plugin's namespaces [team-a]"
    )
    assert refusal("apply-other") == (
        "action 0: apply v1/ConfigMap team-b/t-child refused: owned objects live in their owner's namespace (team-a)"
    )
    assert refusal("delete-other").startswith("action 0: delete apps/v1/Deployment team-b/tools refused")
    assert refusal("best-effort-past-end") == "best-effort position 1 names no action (the outcome has 1)"


def test_keys_outside_the_namespaces_are_never_queued_and_the_operator_only_narrows() -> None:
    with pytest.raises(Error, match="test harness: team-b/t is outside the plugin's namespaces \\[team-a\\]"):
        harness().reconcile(thing("legit", namespace="team-b"))
    with pytest.raises(Error, match="outside the plugin's namespaces \\[\\]"):
        harness().namespaces("team-c").reconcile(thing("legit"))


def test_sql_needs_the_capability_and_is_recorded() -> None:
    def stand_in(database: str, statements: list[Statement]) -> list[Rows]:
        return [Rows(["value"], [[s.params[0]]], 1) for s in statements]

    h = harness().sql(stand_in)
    assert h.reconcile(thing("sql", db="db")).status() == {"got": "team-a/t"}
    assert [(db, s.query) for db, s in h.statements()] == [("db", "SELECT $1")]
    with pytest.raises(Error) as refused:
        h.reconcile(thing("sql", db="other"))
    assert refused.value == Error.terminal("sql: the manifest does not declare the capability sql:other")
    with pytest.raises(Error, match="no SQL stand-in"):
        harness().reconcile(thing("sql", db="db"))


def test_children_are_found_by_their_controller_reference() -> None:
    def owned(name: str, uid: str, controller: bool = True) -> dict[str, Any]:
        reference = {"apiVersion": "example.com/v1", "kind": "Thing", "name": "t", "uid": uid, "controller": controller}
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "team-a", "ownerReferences": [reference]},
        }

    h = (
        harness()
        .object(owned("b", "u-1"))
        .object(owned("a", "u-1"))
        .object(owned("other", "u-2"))
        .object(owned("c", "u-1", False))
    )
    assert h.reconcile(thing("children")).status() == {"children": ["a", "b"]}


class Judged(Reconciler, Validator, Converter):
    """Validates creates (refusing size over 3, reading a limit from the cache) and converts
    between v1 and v2."""

    def manifest(self, settings: Any) -> Manifest:
        return (
            Manifest.for_kind("example.com/v1", "Box", "judged")
            .reads_kind("v1", "ConfigMap", namespaces=["limits"])
            .validating(Operation.CREATE)
            .converting("v1", "v2")
        )

    def reconcile(self, event: Reconcile, ctx: Context[Any]) -> Outcome:
        return Outcome.done()

    def validate_create(self, obj: dict[str, Any], admission: Any) -> list[str]:
        limits = admission.cache.get("v1", "ConfigMap", obj["spec"].get("limits", "limits"), "box")
        limit = int(limits["data"]["max"]) if limits else 3
        if obj["spec"]["size"] > limit:
            raise Denied(f"size {obj['spec']['size']} is over {limit}", 422)
        return ["sizes may change"] if admission.operation is Operation.CREATE else []

    def convert(self, obj: dict[str, Any], api_version: str, settings: Any) -> dict[str, Any]:
        def to_hub(o: dict[str, Any]) -> dict[str, Any]:
            o["size"] = o.pop("capacity")
            return o

        def from_hub(o: dict[str, Any]) -> dict[str, Any]:
            o["capacity"] = o.pop("size")
            return o

        return HubAndSpoke("example.com", "v1").spoke("v2", to_hub=to_hub, from_hub=from_hub).convert(obj, api_version)


def box(size: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Box",
        "metadata": {"name": "b", "namespace": "ns"},
        "spec": {"size": size, **spec},
    }


def test_webhooks_decide_read_the_cache_in_scope_and_refuse_what_is_not_declared() -> None:
    h = Harness(Judged).object(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "box", "namespace": "limits"},
            "data": {"max": "5"},
        }
    )
    assert h.validate(Operation.CREATE, box(4)) == ["sizes may change"]
    with pytest.raises(Denied) as denied:
        h.validate(Operation.CREATE, box(6))
    assert (denied.value.message, denied.value.code) == ("size 6 is over 5", 422)
    with pytest.raises(WebhookError, match=r"^cache read get v1/ConfigMap elsewhere/box refused"):
        h.validate(Operation.CREATE, box(6, limits="elsewhere"))
    with pytest.raises(WebhookError, match="the manifest does not validate UPDATE"):
        h.validate(Operation.UPDATE, box(1), box(2))
    with pytest.raises(WebhookError, match="does not declare a defaulter"):
        h.defaulted(box(1))
    with pytest.raises(Denied) as undecodable:
        h.validate(Operation.CREATE, None)
    assert undecodable.value.code == 400


def test_conversion_goes_through_the_hub_and_keeps_what_the_versions_share() -> None:
    h = Harness(Judged)
    v1 = {"apiVersion": "example.com/v1", "kind": "Box", "metadata": {"name": "b"}, "size": 3}
    [v2] = h.convert([v1], "example.com/v2")
    assert v2 == {"apiVersion": "example.com/v2", "kind": "Box", "metadata": {"name": "b"}, "capacity": 3}
    assert h.convert([v2], "example.com/v1") == [v1]
    with pytest.raises(WebhookError, match="does not convert to v3"):
        h.convert([v1], "example.com/v3")
    with pytest.raises(ValueError, match=r"other\.io/v2 is not a version of example\.com"):
        h.convert([{**v1, "apiVersion": "other.io/v2"}], "example.com/v2")


def test_a_declared_webhook_the_plugin_does_not_implement_is_refused_as_declare_refuses_it() -> None:
    class Undone(Scoped):
        def manifest(self, settings: Any) -> Manifest:
            return super().manifest(settings).defaulting()

    with pytest.raises(WebhookError, match="this plugin does not serve a `default` webhook"):
        Harness(Undone).defaulted(thing("legit"))


def test_settings_the_plugin_refuses_fail_as_the_host_fails_them() -> None:
    class Picky(Scoped):
        def manifest(self, settings: Any) -> Manifest:
            raise ValueError("picky refuses")

    with pytest.raises(ValueError, match="picky refuses"):
        Harness(Picky).manifest()
    with pytest.raises(Error) as refused:
        Harness(Picky).reconcile(thing("legit"))
    assert refused.value == Error.terminal("picky refuses")
    with pytest.raises(Error, match="invalid settings: expected an object"):
        Harness(Scoped).settings([1]).reconcile(thing("legit"))


def test_apply_events_reach_a_plugin_as_apply() -> None:
    seen: list[Reconcile] = []

    class Looks(Scoped):
        def reconcile(self, event: Reconcile, ctx: Context[Any]) -> Outcome:
            seen.append(event)
            return Outcome.done()

    Harness(Looks).reconcile(thing("legit"))
    assert isinstance(seen[0], Apply) and seen[0].object["metadata"]["uid"] == "u-1"


def test_the_harness_runs_reconcilers_only_and_leaves_a_request_as_it_was() -> None:
    with pytest.raises(TypeError):
        Harness(dict)  # type: ignore[arg-type]
    request = Request.for_object(thing("legit"))
    harness().now("2026-01-01T00:00:00Z").run(request)
    assert request.now.year == 1970, "the harness's clock applies to its run, not to the caller's request"
