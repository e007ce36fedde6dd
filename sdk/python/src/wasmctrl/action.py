"""The :class:`Action`\\ s and the :class:`Outcome` a reconcile returns, and the parts of
actions.

Objects, patches and statuses are serialized to JSON when the action is built, as the Rust SDK
does: an object that cannot be sent fails there, naming the action, and changing a dict after
building its action does not change what is sent.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from . import _json
from .error import Error
from .manifest import Gvk


@dataclass(frozen=True)
class ObjectRef:
    """Names an object other than the one being reconciled; ``namespace`` is empty for
    cluster-scoped objects (on a patch or delete: the reconciled object's namespace)."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def to(cls, obj: dict[str, Any]) -> ObjectRef:
        """Names the object ``obj`` (its apiVersion, kind, namespace and name)."""
        meta = obj.get("metadata") or {}
        return cls(
            str(obj.get("apiVersion", "")),
            str(obj.get("kind", "")),
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
        )


class Propagation(enum.Enum):
    """How a delete treats the object's dependents, as the API's ``propagationPolicy``."""

    #: The object goes at once; the garbage collector deletes its dependents afterwards
    #: (kubectl's default, and :meth:`Action.delete`'s).
    BACKGROUND = "background"
    #: The object stays, being deleted, until its blocking dependents are gone.
    FOREGROUND = "foreground"
    #: The object goes; its dependents stay, their owner references to it removed.
    ORPHAN = "orphan"


class PatchType(enum.Enum):
    """The body of a patch: an RFC 7386 merge patch or an RFC 6902 JSON patch."""

    MERGE = "merge"
    JSON = "json"


class EventType(enum.Enum):
    """The type of a Kubernetes Event."""

    NORMAL = "Normal"
    WARNING = "Warning"


def _to_json(value: Any, what: str) -> str:
    try:
        return _json.dumps(value)
    except (TypeError, ValueError) as e:
        raise Error.terminal(f"serializing {what}: {e}") from None


class Action:
    """Something the plugin wants done. The host checks each against the manifest before
    sending anything. Build actions with the static methods; the subclasses below are what
    they build, for tests to match on."""

    @staticmethod
    def apply(obj: dict[str, Any]) -> Apply:
        """Server-side apply of a full desired object (with apiVersion, kind and name).
        Objects of an owned kind get a controller owner reference to the reconciled object."""
        return Apply(_to_json(obj, "an applied object"))

    @staticmethod
    def update_status(status: dict[str, Any]) -> UpdateStatus:
        """Replaces the reconciled object's ``.status``."""
        return UpdateStatus(_to_json(status, "a status"))

    @staticmethod
    def merge_patch(target: ObjectRef, patch: dict[str, Any]) -> Patch:
        """An RFC 7386 merge patch of ``target``."""
        return Patch(target, PatchType.MERGE, _to_json(patch, "a merge patch"))

    @staticmethod
    def json_patch(target: ObjectRef, operations: list[dict[str, Any]]) -> Patch:
        """An RFC 6902 JSON patch (a list of operations, ``test`` included) of ``target``."""
        return Patch(target, PatchType.JSON, _to_json(operations, "a JSON patch"))

    @staticmethod
    def delete(target: ObjectRef, propagation: Propagation = Propagation.BACKGROUND) -> Delete:
        """Deletes ``target``; an object already gone is not a failure."""
        return Delete(target, propagation)

    @staticmethod
    def add_finalizer(name: str) -> AddFinalizer:
        """Adds a finalizer to the reconciled object (nothing when present)."""
        return AddFinalizer(name)

    @staticmethod
    def remove_finalizer(name: str) -> RemoveFinalizer:
        """Removes a finalizer from the reconciled object (nothing when absent)."""
        return RemoveFinalizer(name)

    @staticmethod
    def event(reason: str, note: str) -> Event:
        """A ``Normal`` Event about the reconciled object."""
        return Event(EventType.NORMAL, reason, note)

    @staticmethod
    def warning(reason: str, note: str) -> Event:
        """A ``Warning`` Event about the reconciled object."""
        return Event(EventType.WARNING, reason, note)

    @staticmethod
    def children(api_version: str, kind: str, objects: Iterable[dict[str, Any]]) -> Children:
        """The complete desired set of the reconciled object's children of an owned kind: the
        host applies each, then deletes every child of that kind the object controls that the
        set does not name (Metacontroller's sync hook). An empty set deletes them all."""
        encoded = tuple(_to_json(o, f"a child {kind}") for o in objects)
        return Children(Gvk.from_api_version(api_version, kind), encoded)


@dataclass(frozen=True)
class Apply(Action):
    """Server-side apply of ``json``."""

    json: str

    @property
    def object(self) -> dict[str, Any]:
        """The object applied, parsed."""
        return _json.loads(self.json)


@dataclass(frozen=True)
class Patch(Action):
    """A patch of ``target``."""

    target: ObjectRef
    type: PatchType
    body: str


@dataclass(frozen=True)
class Delete(Action):
    """A delete of ``target``."""

    target: ObjectRef
    propagation: Propagation = Propagation.BACKGROUND


@dataclass(frozen=True)
class UpdateStatus(Action):
    """The reconciled object's new ``.status``."""

    json: str

    @property
    def status(self) -> dict[str, Any]:
        """The status written, parsed."""
        return _json.loads(self.json)


@dataclass(frozen=True)
class AddFinalizer(Action):
    """A finalizer added to the reconciled object."""

    name: str


@dataclass(frozen=True)
class RemoveFinalizer(Action):
    """A finalizer removed from the reconciled object."""

    name: str


@dataclass(frozen=True)
class Event(Action):
    """A Kubernetes Event (events.k8s.io/v1) recorded about the reconciled object: the action
    :meth:`Action.event` and :meth:`Action.warning` build."""

    type: EventType
    #: UpperCamelCase, machine-readable (``Created``).
    reason: str
    #: For people.
    note: str
    #: What was done (``Reconcile``).
    action: str = "Reconcile"


@dataclass(frozen=True)
class Children(Action):
    """The complete set of the reconciled object's children of ``kind``, each as JSON."""

    kind: Gvk
    objects: tuple[str, ...]


@dataclass
class Outcome:
    """A successful reconcile: the actions, in order, and when to look again.

    The host carries the actions out in order. The first failure of an action that is not
    best effort stops the rest; any failure has the key retried with backoff, and the next
    reconcile reads what each action did in ``ctx.previous``.
    """

    actions: list[Action] = field(default_factory=list)
    #: Positions in ``actions`` of those whose failure does not stop the ones after them.
    best_effort: list[int] = field(default_factory=list)
    #: Reconcile again after this many milliseconds, even if nothing changes.
    requeue_after_ms: int | None = None

    @classmethod
    def done(cls) -> Outcome:
        """Nothing to do."""
        return cls()

    @classmethod
    def of(cls, *actions: Action) -> Outcome:
        """These actions, in order (the Rust SDK's ``Outcome::with``)."""
        return cls(list(actions))

    def push(self, action: Action) -> Outcome:
        """Appends an action."""
        self.actions.append(action)
        return self

    def push_best_effort(self, action: Action) -> Outcome:
        """Appends an action whose failure does not stop the ones after it (a cleanup that
        must not keep the status from being written). Its failure still has the key retried,
        and the next reconcile sees it."""
        self.best_effort.append(len(self.actions))
        self.actions.append(action)
        return self

    def requeue_after(self, delay: timedelta | float) -> Outcome:
        """Asks to be reconciled again after ``delay`` (a ``timedelta``, or seconds) even if
        nothing changes."""
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        if seconds < 0:
            raise ValueError(f"requeue_after: a negative delay ({seconds} s)")
        self.requeue_after_ms = round(seconds * 1000)
        return self

    def applied(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        """The objects of ``kind`` it applies, in order: by :meth:`Action.apply` and in
        :meth:`Action.children` sets of that kind."""
        wanted = Gvk.from_api_version(api_version, kind)
        out: list[dict[str, Any]] = []
        for action in self.actions:
            if isinstance(action, Apply):
                obj = action.object
                if (obj.get("apiVersion"), obj.get("kind")) == (api_version, kind):
                    out.append(obj)
            elif isinstance(action, Children) and action.kind == wanted:
                out.extend(_json.loads(o) for o in action.objects)
        return out

    def status(self) -> dict[str, Any] | None:
        """The status its last :meth:`Action.update_status` writes; ``None`` when it writes
        none."""
        written = [a for a in self.actions if isinstance(a, UpdateStatus)]
        return written[-1].status if written else None

    def events(self) -> list[Event]:
        """The Events it records, in order."""
        return [a for a in self.actions if isinstance(a, Event)]

    def deleted(self) -> list[ObjectRef]:
        """The objects it deletes, in order."""
        return [a.target for a in self.actions if isinstance(a, Delete)]
