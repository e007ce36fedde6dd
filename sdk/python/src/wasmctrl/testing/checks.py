"""The host's check of each action a reconcile returns, made before anything is sent: is the
target in the plugin's :class:`~wasmctrl.testing.scope.Scope`, is the action well-formed, and
would the API server accept the metadata it sends.

A port of ``wasmctrl-core``'s ``action.rs``, message for message. The JSON is parsed here as
the host parses it; the owner reference the host adds to owned children is not (the harness
does not invent the reconciled object's uid).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..action import (
    Action,
    AddFinalizer,
    Apply,
    Children,
    Delete,
    Event,
    ObjectRef,
    Patch,
    RemoveFinalizer,
    UpdateStatus,
)
from ..manifest import Gvk
from .scope import Refusal, Scope, Verb
from .validation import EVENT_REASON_MAX, NameRule, qualified_name, sent_meta


class ActionError(Exception):
    """An action the host refuses: malformed, or (as a :class:`Refusal`) out of scope."""


class Malformed(ActionError):
    """The action cannot be carried out as written, or the API server would refuse it."""


class BestEffortError(ValueError):
    """An outcome marks as best effort a position past its last action."""


def best_effort(positions: list[int], actions: int) -> list[int]:
    """The positions of an outcome's best-effort actions, sorted, once each; each must name
    one of its ``actions`` actions."""
    for position in positions:
        if not 0 <= position < actions:
            raise BestEffortError(f"best-effort position {position} names no action (the outcome has {actions})")
    return sorted(set(positions))


@dataclass(frozen=True)
class Reconciled:
    """The key being reconciled, and whether its object still exists."""

    namespace: str
    name: str
    exists: bool

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise Malformed(f"invalid JSON: {e}") from None


def object_id(obj: Any) -> tuple[Gvk, str, str]:
    """Which object an applied object names: its kind, namespace (empty when it has none) and
    name."""

    def field(value: Any, name: str) -> str:
        if not isinstance(value, str) or not value:
            raise Malformed(f"object has no {name}")
        return value

    obj = obj if isinstance(obj, dict) else {}
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    api_version = field(obj.get("apiVersion"), "apiVersion")
    kind = field(obj.get("kind"), "kind")
    name = field(meta.get("name"), "metadata.name")
    namespace = meta.get("namespace")
    return Gvk.from_api_version(api_version, kind), namespace if isinstance(namespace, str) else "", name


def check_action(scope: Scope, reconciled: Reconciled, action: Action) -> None:
    """Checks one action of a reconcile of ``reconciled``; raises :class:`Malformed` or
    :class:`Refusal`."""
    if isinstance(action, Apply):
        _check_applied(scope, Verb.APPLY, reconciled, _parse(action.json))
    elif isinstance(action, Children):
        _check_children(scope, reconciled, action.kind, [_parse(o) for o in action.objects])
    elif isinstance(action, (Patch, Delete)):
        verb = Verb.PATCH if isinstance(action, Patch) else Verb.DELETE
        _check_target(scope, verb, reconciled, action.target)
    elif isinstance(action, UpdateStatus):
        _on_reconciled(scope, Verb.UPDATE_STATUS, reconciled)
        if not isinstance(_parse(action.json), dict):
            raise Malformed("status must be a JSON object")
    elif isinstance(action, (AddFinalizer, RemoveFinalizer)):
        verb = Verb.ADD_FINALIZER if isinstance(action, AddFinalizer) else Verb.REMOVE_FINALIZER
        _on_reconciled(scope, verb, reconciled)
        if qualified_name(action.name):
            raise Malformed(f"{json.dumps(action.name)} is not a qualified finalizer name")
    elif isinstance(action, Event):
        _on_reconciled(scope, Verb.EMIT_EVENT, reconciled)
        for name, value in (("reason", action.reason), ("action", action.action)):
            if not value or len(value.encode()) > EVENT_REASON_MAX:
                raise Malformed(f"event {name} must be 1-{EVENT_REASON_MAX} characters")
    else:
        raise Malformed(f"not an action: {action!r}")


def _check_target(scope: Scope, verb: Verb, reconciled: Reconciled, target: ObjectRef) -> None:
    if not target.api_version or not target.kind or not target.name:
        raise Malformed("target needs apiVersion, kind and name")
    kind = Gvk.from_api_version(target.api_version, target.kind)
    scope.check_write(verb, kind, target.namespace, target.name, reconciled.namespace)


def _on_reconciled(scope: Scope, verb: Verb, reconciled: Reconciled) -> None:
    """Status, finalizers, events and children act on the reconciled object itself, which must
    exist and be in the plugin's namespaces."""
    if not reconciled.exists:
        raise Malformed(f"{reconciled.key} no longer exists")
    scope.check_reconciled(verb, reconciled.namespace, reconciled.name)


def _check_applied(scope: Scope, verb: Verb, reconciled: Reconciled, obj: Any) -> tuple[Gvk, str, str]:
    """An object sent whole: in scope, and with metadata the API server accepts."""
    kind, namespace, name = object_id(obj)
    scope.check_write(verb, kind, namespace, name, reconciled.namespace)
    refused = sent_meta(obj.get("metadata"), NameRule.of(kind.group, kind.kind))
    if refused:
        errors = "; ".join(str(e) for e in refused)
        raise Malformed(f"the API server would refuse {kind.kind} {name}: {errors}")
    return kind, namespace, name


def _check_children(scope: Scope, reconciled: Reconciled, kind: Gvk, objects: list[Any]) -> None:
    _on_reconciled(scope, Verb.APPLY, reconciled)
    if not scope.is_owned(kind):
        raise Malformed(f"{kind.kind} is not an owned kind: declare it with `owns` to return its children")
    seen: set[tuple[str, str]] = set()
    for obj in objects:
        child, namespace, name = _check_applied(scope, Verb.APPLY, reconciled, obj)
        if child != kind:
            raise Malformed(f"child {name} is a {child.kind}, not a {kind.kind}")
        where = (namespace or reconciled.namespace, name)
        if where in seen:
            raise Malformed(f"child {name} appears twice")
        seen.add(where)


__all__ = [
    "ActionError",
    "BestEffortError",
    "Malformed",
    "Reconciled",
    "Refusal",
    "best_effort",
    "check_action",
    "object_id",
]
