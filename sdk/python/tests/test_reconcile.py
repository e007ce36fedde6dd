"""The events a reconcile is asked to handle and the declared-finalizer flow
(wasmctrl.reconcile), as the Rust SDK's reconcile.rs tests them."""

from __future__ import annotations

from typing import Any

import pytest

from wasmctrl import Action, Apply, Cleanup, Context, Error, Gone, Manifest, Outcome, Reconcile, Reconciler, finalizer
from wasmctrl.request import Request
from wasmctrl.sql import SqlError
from wasmctrl.testing import Harness

NAME = "example.com/cleanup"


def config_map(holding: bool, deleting: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "c", "namespace": "ns"}
    if holding:
        meta["finalizers"] = [NAME]
    if deleting:
        meta["deletionTimestamp"] = "1970-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def run_finalizer(holding: bool, deleting: bool) -> tuple[Outcome, str | None]:
    """What finalizer() returns, and what the reconcile was asked, if it was called."""
    seen: list[str] = []

    def reconcile(event: Reconcile) -> Outcome:
        seen.append(type(event).__name__)
        return Outcome.of(Action.event("Did", "it"))

    outcome = finalizer(config_map(holding, deleting), NAME, reconcile)
    return outcome, (seen[0] if seen else None)


def test_live_objects_get_the_finalizer_first_then_apply() -> None:
    outcome, seen = run_finalizer(holding=False, deleting=False)
    assert seen is None
    assert outcome.actions == [Action.add_finalizer(NAME)]
    outcome, seen = run_finalizer(holding=True, deleting=False)
    assert seen == "Apply"
    assert outcome.actions == [Action.event("Did", "it")]


def test_deletion_cleans_up_then_releases_and_ignores_objects_not_held() -> None:
    outcome, seen = run_finalizer(holding=True, deleting=True)
    assert seen == "Cleanup"
    assert outcome.actions == [Action.event("Did", "it"), Action.remove_finalizer(NAME)]
    outcome, seen = run_finalizer(holding=False, deleting=True)
    assert (outcome.actions, seen) == ([], None)

    def failing(event: Reconcile) -> Outcome:
        raise Error.retryable("db down")

    with pytest.raises(Error):
        finalizer(config_map(True, True), NAME, failing)  # a failed cleanup keeps the finalizer


class Recorder(Reconciler):
    """Records the event it got; the manifest declares the finalizer when asked to."""

    declares_finalizer = False
    answer: Any = None

    def manifest(self, settings: Any) -> Manifest:
        manifest = Manifest.for_kind("v1", "ConfigMap", "recorder")
        return manifest.with_finalizer(NAME) if self.declares_finalizer else manifest

    def reconcile(self, event: Reconcile, ctx: Context[Any]) -> Any:
        Recorder.seen = event
        if self.answer is not None:
            return self.answer
        # No actions on an object that is gone: the host refuses them.
        return Outcome.done() if isinstance(event, Gone) else Outcome.of(Action.event("Seen", type(event).__name__))


def test_the_sdk_dispatches_on_the_object_and_the_declared_finalizer() -> None:
    h = Harness(Recorder)
    h.reconcile(config_map(holding=False, deleting=False))
    assert isinstance(Recorder.seen, Apply)
    h.reconcile(config_map(holding=False, deleting=True))
    assert isinstance(Recorder.seen, Cleanup), "other finalizers hold it: cleanup without one of ours"
    h.reconcile_deleted("ns", "c")
    assert Recorder.seen == Gone("ns", "c")

    class Guarded(Recorder):
        declares_finalizer = True

    outcome = Harness(Guarded).reconcile(config_map(holding=False, deleting=False))
    assert outcome.actions == [Action.add_finalizer(NAME)]
    outcome = Harness(Guarded).reconcile(config_map(holding=True, deleting=True))
    assert outcome.actions == [Action.event("Seen", "Cleanup"), Action.remove_finalizer(NAME)]


def test_errors_may_be_raised_or_returned_and_anything_but_an_outcome_is_refused() -> None:
    class Returns(Recorder):
        answer = Error.retryable("later")

    with pytest.raises(Error) as failed:
        Harness(Returns).reconcile(config_map(False, False))
    assert failed.value == Error.retryable("later")

    class Forgets(Recorder):
        answer = "done"

    with pytest.raises(Error) as failed:
        Harness(Forgets).reconcile(config_map(False, False))
    assert failed.value == Error.terminal("reconcile returned str, not an Outcome")


def test_an_uncaught_sql_error_becomes_the_reconcile_error_as_rusts_question_mark_makes_it() -> None:
    class Sql(Recorder):
        def reconcile(self, event: Reconcile, ctx: Context[Any]) -> Outcome:
            raise SqlError(self.message, "40001" if self.transient else None, self.transient)

    for transient, expected in [
        (True, Error.retryable("sql: busy (SQLSTATE 40001)")),
        (False, Error.terminal("sql: busy")),
    ]:
        Sql.message, Sql.transient = "busy", transient
        with pytest.raises(Error) as failed:
            Harness(Sql).reconcile(config_map(False, False))
        assert failed.value == expected


def test_an_object_that_is_not_json_is_a_terminal_error_naming_it() -> None:
    with pytest.raises(Error) as failed:
        Harness(Recorder).run(Request("ns", "c", object="{not json"))
    assert not failed.value.is_retryable
    assert failed.value.message.startswith("ns/c: object does not parse:")
