"""The host's :class:`Request` for one reconcile, and what the previous reconcile's actions did
(:class:`ActionResult`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from . import _json
from .action import ObjectRef
from .error import Error

#: The Unix epoch, the time a request has until the host (or a test) says otherwise.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ActionStatus(enum.Enum):
    """What the host did with one action."""

    #: The request was sent and the API server accepted it.
    APPLIED = "applied"
    #: No request was needed: the cache showed the effect already in place (the same apply
    #: as last time, a finalizer already there, an object already gone).
    UNCHANGED = "unchanged"
    #: The request failed: see :attr:`ActionResult.failure`.
    FAILED = "failed"
    #: Not attempted: an earlier action that was not best effort failed.
    SKIPPED = "skipped"


@dataclass(frozen=True)
class ActionFailure:
    """Why an action failed."""

    #: The object the failed request was about: the action's target, the reconciled object
    #: for status, finalizer and event actions, the child that failed for a set of children.
    target: ObjectRef
    #: The HTTP status the API server answered (422, 409, 403, ...); 0 when none.
    code: int
    #: The API server's ``Status.reason`` (``Invalid``, ``Conflict``, ...), or the host's own
    #: (``RequestFailed``, ``NotServed``, ``Uncached``, ``Malformed``, ``NotLeader``).
    reason: str
    #: What the server (or the host) said.
    message: str


@dataclass(frozen=True)
class ActionResult:
    """What became of one action of the previous reconcile."""

    #: The action's position in that reconcile's ``Outcome.actions``.
    index: int
    status: ActionStatus
    #: Set when ``status`` is :attr:`ActionStatus.FAILED`.
    failure: ActionFailure | None = None


def rfc3339(moment: datetime) -> str:
    """``moment`` as Kubernetes writes times (``metav1.Time``): RFC 3339 in UTC, to the
    second (``2026-11-22T10:00:00Z``)."""
    # isoformat, not strftime: in the component, strftime goes through `time.strftime` and a
    # struct_time (importing `time` again on each call), about 7% of the VirtualMachine
    # seed's reconcile; isoformat also writes a year below 1000 with four digits, as Go does.
    return moment.astimezone(UTC).replace(microsecond=0, tzinfo=None).isoformat() + "Z"


def parse_time(text: str) -> datetime:
    """An RFC 3339 time (``2026-01-01T00:00:00Z``) as an aware ``datetime``."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return moment.astimezone(UTC)


@dataclass
class Request:
    """One reconcile as the host asks for it: the key, the cached object (JSON) and the
    host's clock. The SDK turns it into a reconcile event and a context; tests build one to
    run a plugin on (:meth:`wasmctrl.testing.Harness.run`)."""

    #: Namespace of the object; empty for cluster-scoped kinds.
    namespace: str
    #: Name of the object.
    name: str
    #: The cached object as JSON; ``None`` once it no longer exists.
    object: str | None = None
    #: The object exists and has a ``deletionTimestamp``: finalizers are holding it.
    deleting: bool = False
    #: The host's current time.
    now: datetime = EPOCH
    #: What each action of this key's previous reconcile did, in order.
    previous: list[ActionResult] = field(default_factory=list)

    @classmethod
    def for_object(cls, obj: dict[str, Any]) -> Request:
        """A request for an object that exists, as the host would send it."""
        meta = obj.get("metadata") or {}
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            object=_json.dumps(obj),
            deleting=meta.get("deletionTimestamp") is not None,
        )

    @classmethod
    def for_deleted(cls, namespace: str, name: str) -> Request:
        """A request for an object that no longer exists."""
        return cls(namespace=namespace, name=name)

    def after(self, previous: list[ActionResult]) -> Request:
        """The same request, as if the previous reconcile's actions had done ``previous``."""
        return replace(self, previous=list(previous))

    @property
    def key(self) -> str:
        """``namespace/name``, or ``name`` for cluster-scoped objects."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def failures(self) -> Iterator[tuple[int, ActionFailure]]:
        """The previous reconcile's failed actions: each one's position and failure."""
        for result in self.previous:
            if result.failure is not None:
                yield result.index, result.failure

    def decoded(self) -> dict[str, Any] | None:
        """The object, parsed; ``None`` once it no longer exists. An object that is not a JSON
        object is a terminal error naming it: retrying cannot help until it changes."""
        if self.object is None:
            return None
        try:
            obj = _json.loads(self.object)
        except ValueError as e:
            raise Error.terminal(f"{self.key}: object does not parse: {e}") from None
        if not isinstance(obj, dict):
            raise Error.terminal(f"{self.key}: object does not parse: not a JSON object")
        return obj
