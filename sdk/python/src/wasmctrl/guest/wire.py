"""The wire: componentize-py's generated bindings (``wit_world``) and the conversions between
their types and the SDK's, both ways, and the real :class:`~wasmctrl.context.Host` (the
component's imports) on top of them.

Bindings are the wire, not the domain model: everything a plugin sees is converted here, so a
contract bump touches this module only. ``wit_world`` exists only inside a component build;
:meth:`Wire.load` imports it, when :func:`wasmctrl.guest.export` runs (at build time).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any

from .. import log
from ..action import (
    Action,
    AddFinalizer,
    Apply,
    Children,
    Delete,
    Event,
    ObjectRef,
    Outcome,
    Patch,
    PatchType,
    RemoveFinalizer,
    UpdateStatus,
)
from ..context import CacheError
from ..error import Error
from ..manifest import Gvk, Manifest, MapBy, Mapping
from ..request import EPOCH, ActionFailure, ActionResult, ActionStatus, Request
from ..sql import Rows, SqlError, Statement, Value

#: The largest ``u32`` and ``u64``: what the contract's integers can carry.
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1


@dataclass(frozen=True)
class Wire:
    """The generated binding modules, and the conversions between their types and the SDK's.

    Bindings are the wire, not the domain model: everything the plugin sees is converted here,
    so a contract bump touches this module only.
    """

    types: ModuleType
    webhooks: ModuleType
    log: ModuleType
    cache: ModuleType
    sql: ModuleType
    #: componentize-py's ``Err``: raised with a call's error, and by an import that failed
    #: (its ``value`` the error); a generated class, so typed loosely.
    err: Any

    @classmethod
    def load(cls) -> Wire:
        """The bindings of the component being built."""
        from componentize_py_types import Err
        from wit_world.exports import webhooks
        from wit_world.imports import cache, sql, types
        from wit_world.imports import log as wlog

        return cls(types, webhooks, wlog, cache, sql, Err)

    # Toward the host.

    def gvk(self, kind: Gvk) -> Any:
        """A kind, as the contract's ``gvk``."""
        return self.types.Gvk(kind.group, kind.version, kind.kind)

    def selector(self, namespaces: list[str], labels: str) -> Any:
        """Namespaces and a label selector, as the contract's ``selector``."""
        return self.types.Selector(list(namespaces), labels)

    def mapping(self, mapping: Mapping | None) -> Any:
        """A trigger, as the contract's ``option<mapping>``."""
        if mapping is None:
            return None
        t = self.types
        match mapping.by:
            case MapBy.OWNER:
                return t.Mapping_Owner()
            case MapBy.SAME_NAME:
                return t.Mapping_SameName()
            case MapBy.LABEL:
                return t.Mapping_Label(mapping.key)
            case MapBy.ANNOTATION:
                return t.Mapping_Annotation(mapping.key)
            case MapBy.NAMESPACE:
                return t.Mapping_Namespace()

    def manifest(self, m: Manifest) -> Any:
        """The manifest, as the contract's record (the finalizer and webhooks are the SDK's
        and ``declare``'s, not the record's)."""
        t = self.types
        w = m.watches
        predicates = [t.Predicate[p.name] for p in w.predicates]
        watch = t.Watch(self.gvk(w.kind), self.selector(w.selector.namespaces, w.selector.labels), predicates)
        reads = [
            t.Related(
                self.gvk(r.kind), self.selector(r.selector.namespaces, r.selector.labels), self.mapping(r.trigger)
            )
            for r in m.reads
        ]
        owns = [self.gvk(k) for k in m.owns]
        writes = [self.gvk(k) for k in m.writes]
        return t.Manifest(m.name, m.version, watch, owns, reads, writes, list(m.capabilities))

    def object_ref(self, r: ObjectRef) -> Any:
        """A target, as the contract's ``object-ref``."""
        return self.types.ObjectRef(r.api_version, r.kind, r.namespace, r.name)

    def action(self, a: Action) -> Any:
        """An action, as the contract's variant; anything else a plugin put in its outcome
        is a terminal error rather than a failure to lower it (a trap)."""
        t = self.types
        if isinstance(a, Apply):
            return t.Action_Apply(a.json)
        if isinstance(a, Patch):
            body = t.PatchBody_Merge(a.body) if a.type is PatchType.MERGE else t.PatchBody_Json(a.body)
            return t.Action_Patch(t.Patch(self.object_ref(a.target), body))
        if isinstance(a, Delete):
            propagation = t.Propagation[a.propagation.name]
            return t.Action_Delete(t.Deletion(self.object_ref(a.target), propagation))
        if isinstance(a, UpdateStatus):
            return t.Action_UpdateStatus(a.json)
        if isinstance(a, AddFinalizer):
            return t.Action_AddFinalizer(a.name)
        if isinstance(a, RemoveFinalizer):
            return t.Action_RemoveFinalizer(a.name)
        if isinstance(a, Event):
            return t.Action_EmitEvent(t.Event(t.EventType[a.type.name], a.reason, a.note, a.action))
        if isinstance(a, Children):
            return t.Action_Children(t.Children(self.gvk(a.kind), list(a.objects)))
        raise Error.terminal(f"not an action: {a!r}")

    def outcome(self, o: Outcome) -> Any:
        """The outcome, its integers checked to fit the contract's: a negative best-effort
        position is refused; a huge one is clamped (the host refuses positions past the end);
        the requeue delay is clamped into ``u64``."""
        for position in o.best_effort:
            if not isinstance(position, int) or position < 0:
                raise Error.terminal(f"best-effort position {position!r} names no action")
        requeue = o.requeue_after_ms
        if requeue is not None:
            requeue = min(max(int(requeue), 0), U64_MAX)
        best_effort = [min(p, U32_MAX) for p in o.best_effort]
        return self.types.Outcome([self.action(a) for a in o.actions], best_effort, requeue)

    def statement(self, s: Statement) -> Any:
        """A SQL statement, as the contract's record."""
        return self.sql.Statement(s.query, list(s.identifiers), [self.value(v) for v in s.params])

    def value(self, v: Value) -> Any:
        """A Python value, as the contract's SQL ``value`` (``bool`` before ``int``: it is one)."""
        q = self.sql
        if v is None:
            return q.Value_Null()
        if isinstance(v, bool):
            return q.Value_Boolean(v)
        if isinstance(v, int):
            return q.Value_Integer(v)
        if isinstance(v, float):
            return q.Value_Float(v)
        return q.Value_Text(v)

    # From the host.

    def request(self, r: Any) -> Request:
        """The host's reconcile request, as the SDK's."""
        previous = [self.action_result(result) for result in r.previous]
        return Request(r.namespace, r.name, r.object, r.deleting, self.time(r.now), previous)

    def time(self, t: Any) -> datetime:
        """The contract's ``timestamp`` as an aware ``datetime`` (to the microsecond)."""
        return EPOCH + timedelta(seconds=t.seconds, microseconds=t.nanoseconds // 1000)

    def action_result(self, r: Any) -> ActionResult:
        """What one action of the previous reconcile did, as the SDK says it."""
        t = self.types
        s = r.status
        if isinstance(s, t.ActionStatus_Failed):
            f = s.value
            target = ObjectRef(f.target.api_version, f.target.kind, f.target.namespace, f.target.name)
            return ActionResult(r.index, ActionStatus.FAILED, ActionFailure(target, f.code, f.reason, f.message))
        if isinstance(s, t.ActionStatus_Applied):
            return ActionResult(r.index, ActionStatus.APPLIED)
        if isinstance(s, t.ActionStatus_Unchanged):
            return ActionResult(r.index, ActionStatus.UNCHANGED)
        return ActionResult(r.index, ActionStatus.SKIPPED)

    def rows(self, r: Any) -> Rows:
        """A statement's result, its values as Python's own."""
        return Rows(list(r.columns), [[self.python(v) for v in row] for row in r.rows], r.affected)

    def python(self, v: Any) -> Value:
        """The contract's SQL ``value`` as a Python value."""
        return None if isinstance(v, self.sql.Value_Null) else v.value


class Imports:
    """The real host: the component's imports, raising the SDK's exceptions."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    def log(self, level: log.Level, message: str, fields: list[tuple[str, str]]) -> None:
        self.wire.log.log(self.wire.types.Level[level.name], message, fields)

    def get(self, kind: Gvk, namespace: str, name: str) -> str | None:
        try:
            return self.wire.cache.get(self.wire.gvk(kind), namespace, name)
        except self.wire.err as e:
            raise CacheError(e.value) from None

    def list(self, kind: Gvk, namespace: str, labels: str) -> builtins.list[str]:
        try:
            return self.wire.cache.list(self.wire.gvk(kind), namespace, labels)
        except self.wire.err as e:
            raise CacheError(e.value) from None

    def children(self, kind: Gvk, namespace: str, owner_uid: str) -> builtins.list[str]:
        try:
            return self.wire.cache.children(self.wire.gvk(kind), namespace, owner_uid)
        except self.wire.err as e:
            raise CacheError(e.value) from None

    def sql(self, database: str, statements: builtins.list[Statement]) -> builtins.list[Rows]:
        try:
            answer = self.wire.sql.execute(database, [self.wire.statement(s) for s in statements])
        except self.wire.err as e:
            raise SqlError(e.value.message, e.value.sqlstate, e.value.transient) from None
        return [self.wire.rows(r) for r in answer]
