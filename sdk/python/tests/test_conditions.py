"""metav1.Condition and SetStatusCondition (wasmctrl.conditions), as the Rust SDK's
conditions.rs tests them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from wasmctrl import Condition, find_condition, set_condition
from wasmctrl.conditions import UNKNOWN
from wasmctrl.request import parse_time, rfc3339


def t(hour: int) -> datetime:
    # Sub-second parts are dropped when stamped.
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(hours=hour, milliseconds=250)


def stamped(hour: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(hours=hour)


def test_the_transition_time_moves_only_when_the_status_does() -> None:
    conditions: list[dict[str, Any]] = [Condition.new("Other", True, "Theirs", "kept").to_dict()]
    pending = Condition.new("Ready", False, "PodPending", "scheduling").observed(1)
    assert set_condition(conditions, pending, t(1))
    waiting = Condition.new("Ready", False, "PodPending", "starting on n1").observed(2)
    assert set_condition(conditions, waiting, t(2)), "message and generation changed"
    assert find_condition(conditions, "Ready").last_transition_time == stamped(1)
    assert not set_condition(conditions, waiting, t(3)), "nothing changed"
    running = Condition.new("Ready", True, "PodRunning", "running").observed(2)
    assert set_condition(conditions, running, t(4))
    ready = find_condition(conditions, "Ready")
    assert ready.is_true()
    assert ready.last_transition_time == stamped(4)
    assert len(conditions) == 2
    assert conditions[0]["reason"] == "Theirs", "other types are left alone"


def test_unknown_is_a_status_of_its_own() -> None:
    conditions: list[dict[str, Any]] = []
    waiting = Condition.unknown("Available", "Waiting", "no Job has run yet")
    assert waiting.is_unknown() and not waiting.is_true()
    assert waiting.status == UNKNOWN
    set_condition(conditions, waiting, t(1))
    assert set_condition(conditions, Condition.new("Available", True, "Ran", "a Job ran"), t(2))
    assert conditions[0]["lastTransitionTime"] == "1970-01-01T02:00:00Z", "Unknown to True moves it"


def test_it_serializes_as_metav1_condition() -> None:
    c = Condition.new("Ready", True, "Up", "fine").observed(4)
    conditions: list[dict[str, Any]] = []
    set_condition(conditions, c, datetime(2026, 1, 1, tzinfo=UTC))
    assert conditions == [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Up",
            "message": "fine",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "observedGeneration": 4,
        }
    ]
    assert Condition.from_dict(conditions[0]) == Condition(
        "Ready", "True", "Up", "fine", datetime(2026, 1, 1, tzinfo=UTC), 4
    )
    assert find_condition(conditions, "Missing") is None


def test_a_condition_stored_by_the_api_server_reads_back_equal() -> None:
    # The API server keeps what was written; a reconcile later sees the same JSON, and setting
    # the same condition again changes nothing.
    conditions = [
        {"type": "Ready", "status": "True", "reason": "Up", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ]
    assert not set_condition(conditions, Condition.new("Ready", True, "Up"), t(5))
    assert conditions[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def test_times_are_written_as_kubernetes_writes_them() -> None:
    # metav1.Time: UTC, to the second, a four-digit year; the zone it came in is converted.
    assert rfc3339(datetime(2026, 11, 22, 10, 0, 0, 999_999, tzinfo=UTC)) == "2026-11-22T10:00:00Z"
    assert rfc3339(datetime(2026, 1, 1, 1, 30, tzinfo=timezone(timedelta(hours=2)))) == "2025-12-31T23:30:00Z"
    assert rfc3339(datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC)) == "0999-01-02T03:04:05Z"
    assert parse_time(rfc3339(datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC))) == datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
