"""The glue to the generated bindings (wasmctrl.guest), run natively on the bindings
componentize-py generates from the contract, its imports stood in for: what crosses the wire,
and how errors map (as the Rust SDK's export.rs maps them), an uncaught exception included."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from standin import (
    Host,
    Plain,
    Sized,
    admission,
    componentize_py,
    generate_bindings,
    load_bindings,
    request,
    sized,
    thing,
)
from wasmctrl import Apply, Context, Manifest, Outcome, Reconcile
from wasmctrl.guest import WARM_UP_ROUNDS, export


@pytest.fixture(scope="session")
def bindings(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    tool = componentize_py()
    if tool is None:
        pytest.skip("componentize-py is not installed: pip install componentize-py")
    out = tmp_path_factory.mktemp("bindings")
    generate_bindings(tool, out)
    return load_bindings(out)


@pytest.fixture
def host(bindings: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> Host:
    # export() forwards the stdlib logging for good, as a component's entry module should;
    # put the root logger back afterwards.
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    monkeypatch.setattr(logging.root, "level", logging.root.level)
    return Host(bindings, monkeypatch.setattr)


def test_the_manifest_crosses_as_the_contracts_record(bindings: SimpleNamespace, host: Host) -> None:
    reconciler, _ = export(Plain)
    m = reconciler().manifest("")
    t = bindings.types
    assert (m.name, m.version) == ("plain", "1.2.3")
    assert m.watches == t.Watch(
        t.Gvk("example.com", "v1", "Thing"), t.Selector(["a", "b"], "tier=web"), [t.Predicate.GENERATION_CHANGED]
    )
    assert m.owns == [t.Gvk("", "v1", "ConfigMap")]
    assert m.reads == [t.Related(t.Gvk("", "v1", "Secret"), t.Selector(["shared"], "x=y"), t.Mapping_Label("owner"))]
    assert m.writes == [t.Gvk("apps", "v1", "Deployment")] and m.capabilities == ["sql:db"]


def test_settings_that_do_not_parse_are_the_manifests_error(bindings: SimpleNamespace, host: Host) -> None:
    reconciler, _ = export(Plain)
    with pytest.raises(bindings.Err) as refused:
        reconciler().manifest("[1]")
    assert refused.value.value == "invalid settings: expected an object, got an array"
    with pytest.raises(bindings.Err) as failed:
        reconciler().reconcile(request(bindings, thing(), settings="[1]"))
    assert failed.value.value == bindings.types.Error("invalid settings: expected an object, got an array", False)


def test_an_outcome_crosses_with_its_actions_best_effort_marks_and_requeue(
    bindings: SimpleNamespace, host: Host
) -> None:
    t = bindings.types
    failed = t.ActionStatus_Failed(t.ActionFailure(t.ObjectRef("v1", "ConfigMap", "a", "c"), 422, "Invalid", "no"))
    previous = [t.ActionResult(0, t.ActionStatus_Applied()), t.ActionResult(1, failed)]
    reconciler, _ = export(Plain)
    outcome = reconciler().reconcile(request(bindings, thing(), previous=previous))
    status, event, delete = outcome.actions
    assert json.loads(status.value) == {
        "now": "2025-11-24T16:00:00Z",
        "previous": [[0, "applied", None], [1, "failed", 422]],
    }
    assert event == t.Action_EmitEvent(t.Event(t.EventType.WARNING, "Odd", "note", "Reconcile"))
    assert delete == t.Action_Delete(
        t.Deletion(t.ObjectRef("apps/v1", "Deployment", "", "d"), t.Propagation.BACKGROUND)
    )
    assert (outcome.best_effort, outcome.requeue_after_ms) == ([1], None)
    assert reconciler().reconcile(request(bindings, None)) == t.Outcome([], [], 2000)


def test_failures_become_the_contracts_error_and_never_a_trap(bindings: SimpleNamespace, host: Host) -> None:
    reconciler, _ = export(Plain)
    t = bindings.types
    with pytest.raises(bindings.Err) as failed:
        reconciler().reconcile(request(bindings, thing("retry")))
    assert failed.value.value == t.Error("not yet", True)
    with pytest.raises(bindings.Err) as failed:
        reconciler().reconcile(request(bindings, thing("raise")))
    assert failed.value.value == t.Error("a/t: reconcile raised KeyError: 'missing'", False)
    level, message, fields = host.logs[-1]
    assert (level, message) == (t.Level.ERROR, "a/t: reconcile raised KeyError: 'missing'")
    assert fields[0][0] == "traceback" and "KeyError" in fields[0][1]
    with pytest.raises(bindings.Err) as failed:
        reconciler().reconcile(request(bindings, "{not json"))
    assert failed.value.value.message.startswith("a/t: object does not parse:")
    assert failed.value.value.retryable is False


def test_host_calls_cross_both_ways(bindings: SimpleNamespace, host: Host) -> None:
    reconciler, _ = export(Plain)
    host.objects[("ConfigMap", "a", "c")] = '{"data": {"k": "v"}}'
    outcome = reconciler().reconcile(request(bindings, thing("read")))
    assert json.loads(outcome.actions[0].value) == {"found": {"data": {"k": "v"}}}
    with pytest.raises(bindings.Err) as failed:
        reconciler().reconcile(request(bindings, thing("read-forbidden")))
    assert failed.value.value == bindings.types.Error("get v1/ConfigMap forbidden/x refused: outside", True)
    outcome = reconciler().reconcile(request(bindings, thing("sql", name="db")))
    assert json.loads(outcome.actions[0].value) == {"rows": [["SELECT $1", 7]]}


def test_a_plugin_without_webhooks_declares_none_and_serves_none(bindings: SimpleNamespace, host: Host) -> None:
    _, webhooks = export(Plain)
    assert webhooks().declare("{}") == bindings.webhooks.Declaration([], False, [])
    with pytest.raises(bindings.Err) as refused:
        webhooks().validate(admission(bindings, "create", thing()))
    assert refused.value.value == "this plugin does not serve a `validate` webhook"
    with pytest.raises(bindings.Err, match="convert"):
        webhooks().convert("{}", "example.com/v2", [])


def test_webhooks_answer_decisions_and_the_defaulted_object(bindings: SimpleNamespace, host: Host) -> None:
    _, webhooks = export(Sized)
    w = bindings.webhooks
    assert webhooks().declare("") == w.Declaration([w.Operation.CREATE, w.Operation.UPDATE], True, [])
    assert webhooks().validate(admission(bindings, "create", sized(2))) == w.AdmissionResponse(
        True, "", 200, ["alice asked"], None
    )
    assert webhooks().validate(admission(bindings, "create", sized(5))) == w.AdmissionResponse(
        False, "size 5 is over 3", 422, ["think small"], None
    )
    patched = webhooks().mutate(admission(bindings, "create", sized(None)))
    assert json.loads(patched.patched)["spec"] == {"size": 1}
    assert webhooks().mutate(admission(bindings, "create", sized(2))).patched is None, "unchanged: no patch"
    assert webhooks().mutate(admission(bindings, "delete", None, sized(2))) == w.AdmissionResponse(
        True, "", 200, [], None
    )
    with pytest.raises(bindings.Err) as failed:
        webhooks().validate(admission(bindings, "create", json.dumps({"spec": {}})))
    assert failed.value.value == "KeyError: 'size'"


def test_declare_refuses_a_declared_webhook_the_plugin_does_not_implement(
    bindings: SimpleNamespace, host: Host
) -> None:
    class Claims(Plain):
        def manifest(self, settings: Any) -> Manifest:
            return super().manifest(settings).converting("v1", "v2")

    _, webhooks = export(Claims)
    with pytest.raises(bindings.Err) as refused:
        webhooks().declare("{}")
    assert refused.value.value == "the manifest declares a `convert` webhook that the plugin does not implement"


def test_only_reconcilers_are_exported(bindings: SimpleNamespace, host: Host) -> None:
    with pytest.raises(TypeError):
        export(object)  # type: ignore[arg-type]


def test_apply_is_what_a_live_object_gets(bindings: SimpleNamespace, host: Host) -> None:
    seen: ClassVar[list[Any]] = []

    class Looks(Plain):
        def reconcile(self, event: Reconcile, ctx: Context[Any]) -> Outcome:
            seen.append((type(event), ctx.key, ctx.now.microsecond))
            return Outcome.done()

    reconciler, _ = export(Looks)
    reconciler().reconcile(request(bindings, thing()))
    assert seen == [(Apply, "a/t", 999_000)]


def test_calls_import_nothing(bindings: SimpleNamespace) -> None:
    """A component holds only the modules its build imported (componentize-py snapshots the
    interpreter once the entry module ran): a module first imported during a call is not
    there (ModuleNotFoundError, then a trap). So no path through the SDK may import lazily;
    checked in a fresh interpreter, where nothing earlier imported them already."""
    script = Path(__file__).with_name("standin.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(script.parents[1] / "src"), str(script.parent)])}
    ran = subprocess.run(
        [sys.executable, str(script), str(bindings.path)], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(ran.stdout) == []


class Warmed(Plain):
    """Plain, with samples for the build to reconcile: one that reads the cache, one that asks
    for a database (there is none at build time), one that logs through the stdlib."""

    SAMPLES = ("read", "sql", "")
    seen: ClassVar[list[Any]] = []

    def warm_up(self) -> list[dict[str, Any]]:
        return [json.loads(thing(do, name=f"sample-{i}", namespace="a")) for i, do in enumerate(self.SAMPLES)]

    def reconcile(self, event: Reconcile, ctx: Context[Any]) -> Outcome:
        Warmed.seen.append((ctx.key, ctx.now_rfc3339(), ctx.cache.get("v1", "ConfigMap", ctx.namespace, "c")))
        logging.getLogger("warm").warning("warming %s", ctx.key)
        return super().reconcile(event, ctx)


class Unwarmable(Plain):
    def warm_up(self) -> list[dict[str, Any]]:
        raise RuntimeError("no samples today")


def test_warm_up_reconciles_each_sample_its_rounds_against_a_host_that_answers_nothing(
    bindings: SimpleNamespace, host: Host
) -> None:
    host.objects[("ConfigMap", "a", "c")] = json.dumps({"data": {"seen": "by the host"}})
    Warmed.seen = []
    reconciler, _ = export(Warmed)
    # Each sample WARM_UP_ROUNDS times, in order, at the epoch (the sql one stops at its first
    # failure); the real imports were never called: no log line reached them and the ConfigMap
    # the host holds was not read.
    seen = [(f"a/sample-{i}", "1970-01-01T00:00:00Z", None) for i in range(3)]
    assert Warmed.seen == WARM_UP_ROUNDS * [seen[0]] + [seen[1]] + WARM_UP_ROUNDS * [seen[2]]
    assert WARM_UP_ROUNDS > 1
    assert host.logs == []
    # Calls after the build use the real imports.
    outcome = reconciler().reconcile(request(bindings, thing("read")))
    assert Warmed.seen[-1] == ("a/t", "2025-11-24T16:00:00Z", {"data": {"seen": "by the host"}})
    assert json.loads(outcome.actions[0].value) == {"found": {"data": {"seen": "by the host"}}}
    assert [line[1] for line in host.logs] == ["warming a/t"]


def test_a_warm_up_that_fails_fails_nothing(bindings: SimpleNamespace, host: Host) -> None:
    from wasmctrl.guest import Guest
    from wasmctrl.guest.wire import Wire

    wire = Wire(bindings.types, bindings.webhooks, bindings.log, bindings.cache, bindings.sql, bindings.Err)
    assert Guest(Unwarmable, wire).warm_up() == 0
    assert Guest(Plain, wire).warm_up() == 0
    # The sql sample fails (no database at build time) and is not counted.
    assert Guest(Warmed, wire).warm_up() == 2
    assert host.logs == []
