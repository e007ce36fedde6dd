"""Status conditions as Kubernetes defines them (``metav1.Condition``) and apimachinery's
``meta.SetStatusCondition``: what every controller that reports conditions writes by hand
otherwise.

Conditions live in a status as a list of dicts; :func:`set_condition` updates such a list in
place::

    conditions = status.setdefault("conditions", [])
    ready = Condition.new("Ready", True, "PodRunning", "running on node-1").observed(3)
    set_condition(conditions, ready, ctx.now)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from .request import parse_time, rfc3339

#: ``status`` of a condition that holds.
TRUE = "True"
#: ``status`` of a condition that does not hold.
FALSE = "False"
#: ``status`` of a condition that cannot be told.
UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Condition:
    """A ``metav1.Condition``: one aspect of an object's state, as ``kubectl wait
    --for=condition=`` and other controllers read it. The API server refuses one without a
    reason, as kube's does."""

    #: CamelCase (``Ready``, ``Available``).
    type: str
    #: ``True``, ``False`` or ``Unknown``.
    status: str
    #: CamelCase, for machines.
    reason: str = ""
    #: For people.
    message: str = ""
    #: When ``status`` last changed; :func:`set_condition` sets it.
    last_transition_time: datetime | None = None
    #: The object's ``metadata.generation`` the condition was computed from.
    observed_generation: int = 0

    @classmethod
    def new(cls, type: str, holds: bool, reason: str, message: str = "") -> Condition:
        """A condition of ``type`` that holds (``True``) or not (``False``)."""
        return cls(type, TRUE if holds else FALSE, reason, message)

    @classmethod
    def unknown(cls, type: str, reason: str, message: str = "") -> Condition:
        """A condition of ``type`` whose status cannot be told yet (``Unknown``)."""
        return cls(type, UNKNOWN, reason, message)

    def observed(self, generation: int) -> Condition:
        """The same, computed from generation ``generation`` of the object."""
        return replace(self, observed_generation=generation)

    def is_true(self) -> bool:
        """Whether its status is ``True``."""
        return self.status == TRUE

    def is_unknown(self) -> bool:
        """Whether its status is ``Unknown``."""
        return self.status == UNKNOWN

    def to_dict(self) -> dict[str, Any]:
        """As ``metav1.Condition`` JSON (the Rust SDK's field order, empty optionals left
        out)."""
        out: dict[str, Any] = {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
        }
        if self.last_transition_time is not None:
            out["lastTransitionTime"] = rfc3339(self.last_transition_time)
        if self.observed_generation:
            out["observedGeneration"] = self.observed_generation
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Condition:
        """A condition from its JSON; ``ValueError`` when ``type`` or ``status`` is missing or
        ``lastTransitionTime`` is not a time."""
        if not isinstance(data.get("type"), str) or not isinstance(data.get("status"), str):
            raise ValueError(f"a condition needs a type and a status: {data!r}")
        when = data.get("lastTransitionTime")
        return cls(
            type=data["type"],
            status=data["status"],
            reason=str(data.get("reason") or ""),
            message=str(data.get("message") or ""),
            last_transition_time=parse_time(when) if isinstance(when, str) else None,
            observed_generation=int(data.get("observedGeneration") or 0),
        )


def _to_second(moment: datetime) -> datetime:
    """``moment`` truncated to the second, as ``metav1.Time`` keeps it."""
    return moment.replace(microsecond=0)


def find_condition(conditions: list[dict[str, Any]], type: str) -> Condition | None:
    """The condition of ``type`` in a status's list, if there is one."""
    for data in conditions:
        if data.get("type") == type:
            return Condition.from_dict(data)
    return None


def set_condition(conditions: list[dict[str, Any]], condition: Condition, now: datetime) -> bool:
    """Sets ``condition`` in ``conditions`` (a status's list, changed in place), replacing the
    one of its type, as apimachinery's ``SetStatusCondition``: ``lastTransitionTime`` becomes
    ``now`` (to the second) when the condition is new or its status changed, and stays
    otherwise (unless ``condition`` brings its own). Conditions of other types are kept as
    they are. Returns whether anything changed."""
    now = _to_second(now)
    for i, data in enumerate(conditions):
        if data.get("type") != condition.type:
            continue
        existing = Condition.from_dict(data)
        if condition.last_transition_time is None:
            keep = existing.status == condition.status and existing.last_transition_time
            condition = replace(condition, last_transition_time=keep or now)
        conditions[i] = condition.to_dict()
        return existing != condition
    if condition.last_transition_time is None:
        condition = replace(condition, last_transition_time=now)
    conditions.append(condition.to_dict())
    return True
