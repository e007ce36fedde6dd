import assert from "node:assert/strict";
import { test } from "node:test";

import { Condition, findCondition, setCondition } from "../src/conditions.js";

// Sub-second parts are dropped when stamped.
const t = (hour: number): Date => new Date(hour * 3_600_000 + 250);
const stamped = (hour: number): string => new Date(hour * 3_600_000).toISOString().replace(".000Z", "Z");

test("the transition time moves only when the status does", () => {
  const conditions: Condition[] = [Condition.of("Other", true, "Theirs", "kept")];
  assert.ok(setCondition(conditions, Condition.of("Ready", false, "PodPending", "scheduling", 1), t(1)));
  const waiting = Condition.of("Ready", false, "PodPending", "starting on n1", 2);
  assert.ok(setCondition(conditions, waiting, t(2)), "message and generation changed");
  assert.equal(findCondition(conditions, "Ready")?.lastTransitionTime, stamped(1));
  assert.ok(!setCondition(conditions, waiting, t(3)), "nothing changed");
  assert.ok(setCondition(conditions, Condition.of("Ready", true, "PodRunning", "running", 2), t(4)));
  const ready = findCondition(conditions, "Ready");
  assert.equal(ready?.status, "True");
  assert.equal(ready?.lastTransitionTime, stamped(4));
  assert.equal(conditions.length, 2);
  assert.equal(conditions[0]?.reason, "Theirs", "other types are left alone");
});

test("unknown is a status of its own", () => {
  const conditions: Condition[] = [];
  setCondition(conditions, Condition.unknown("Available", "Waiting", "no Job has run yet"), t(1));
  assert.equal(conditions[0]?.status, "Unknown");
  assert.ok(setCondition(conditions, Condition.of("Available", true, "Ran", "a Job ran"), t(2)));
  assert.equal(conditions[0]?.lastTransitionTime, stamped(2), "Unknown to True moves it");
});

test("it serializes as metav1.Condition, a time read back from the API server compared as a time", () => {
  const conditions: Condition[] = [
    { type: "Ready", status: "True", reason: "Up", message: "fine", lastTransitionTime: "2026-01-01T00:00:00.000Z", observedGeneration: 4 },
  ];
  assert.ok(!setCondition(conditions, Condition.of("Ready", true, "Up", "fine", 4), new Date("2026-02-01T00:00:00Z")));
  assert.deepEqual(JSON.parse(JSON.stringify(Condition.of("Ready", true, "Up", "fine", 0))), {
    type: "Ready",
    status: "True",
    reason: "Up",
    message: "fine",
  });
  const fresh: Condition[] = [];
  setCondition(fresh, Condition.of("Ready", true, "Up", "fine", 4), new Date("2026-01-01T00:00:00.900Z"));
  assert.equal(
    JSON.stringify(fresh[0]),
    '{"type":"Ready","status":"True","reason":"Up","message":"fine","lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":4}',
  );
});
