import assert from "node:assert/strict";
import { test } from "node:test";

import { Action, ObjectRef, Outcome } from "../src/action.js";
import { ReconcileError } from "../src/error.js";
import { Gvk } from "../src/gvk.js";
import { kinds, type ConfigMap } from "../src/objects.js";
import { finalizer, type Reconcile } from "../src/reconciler.js";

const NAME = "example.com/cleanup";

function object(holding: boolean, deleting: boolean): ConfigMap {
  return {
    metadata: {
      name: "c",
      ...(holding ? { finalizers: [NAME] } : {}),
      ...(deleting ? { deletionTimestamp: "1970-01-01T00:00:00Z" } : {}),
    },
  };
}

/** What `finalizer` returns, and what the reconcile was asked, if it was called. */
function run(holding: boolean, deleting: boolean): [Outcome, string | undefined] {
  let seen: string | undefined;
  const outcome = finalizer(object(holding, deleting), NAME, (event: Reconcile<ConfigMap>) => {
    seen = event.type;
    return Outcome.with([Action.event("Did", "it")]);
  });
  return [outcome, seen];
}

test("live objects get the finalizer first, then apply", () => {
  let [outcome, seen] = run(false, false);
  assert.equal(seen, undefined);
  assert.deepEqual(outcome.actions, [Action.addFinalizer(NAME)]);
  [outcome, seen] = run(true, false);
  assert.equal(seen, "apply");
  assert.deepEqual(outcome.actions, [Action.event("Did", "it")]);
});

test("deletion cleans up then releases, and ignores objects not held", () => {
  let [outcome, seen] = run(true, true);
  assert.equal(seen, "cleanup");
  assert.deepEqual(outcome.actions, [Action.event("Did", "it"), Action.removeFinalizer(NAME)]);
  [outcome, seen] = run(false, true);
  assert.equal(outcome.actions.length, 0);
  assert.equal(seen, undefined);
  assert.throws(
    () => finalizer(object(true, true), NAME, () => {
      throw ReconcileError.retryable("db down");
    }),
    { message: "db down", retryable: true },
    "a failed cleanup keeps the finalizer",
  );
});

test("typed accessors read back what the outcome carries", () => {
  const cm = (name: string): ConfigMap => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name } });
  const outcome = Outcome.done()
    .push(Action.apply(cm("a")))
    .push(Action.apply({ apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web" } }))
    .push(Action.children(kinds.ConfigMap, [cm("b"), cm("c")]))
    .push(Action.updateStatus({ phase: "Old" }))
    .push(Action.warning("Finalizing", "going"))
    .push(Action.delete(ObjectRef.of(kinds.ConfigMap, "ns", "gone")))
    .push(Action.updateStatus({ phase: "New" }));
  assert.deepEqual(
    outcome.applied(kinds.ConfigMap).map((m) => m.metadata?.name),
    ["a", "b", "c"],
  );
  assert.equal(outcome.applied(Gvk.of("apps/v1", "Deployment"))[0]?.metadata?.name, "web");
  assert.equal(outcome.status<{ phase: string }>()?.phase, "New", "the last status written is the one the object ends with");
  assert.deepEqual(outcome.events().map((e) => [e.type, e.reason]), [["Warning", "Finalizing"]]);
  assert.deepEqual(outcome.deleted().map((o) => o.name), ["gone"]);
  assert.equal(Outcome.done().status(), undefined);
});

test("an object JSON cannot carry fails where the action is made, terminally", () => {
  assert.throws(() => Action.updateStatus({ count: 1n }), (e: unknown) => {
    assert.ok(e instanceof ReconcileError && !e.retryable);
    assert.match(e.message, /^serializing action: /);
    return true;
  });
  assert.throws(() => Outcome.done().requeueAfter(-1), RangeError);
  const outcome = Outcome.done().push(Action.event("A", "a")).pushBestEffort(Action.event("B", "b")).requeueAfter(1500);
  assert.deepEqual([outcome.bestEffort, outcome.requeueAfterMs], [[1], 1500]);
});
