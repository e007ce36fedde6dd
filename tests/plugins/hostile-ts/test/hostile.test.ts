// What can be shown natively: the harness refuses the escapes as the host does. The loop and the
// allocation never return; the host's sandbox tests run those on the component.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Outcome, ReconcileError, type ConfigMap } from "wasmctrl";
import { Harness } from "wasmctrl/testing";

import { Hostile, type HostileSettings } from "../src/hostile.js";

const configMap = (namespace: string, name = "c"): ConfigMap => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace } });

const harness = (settings: object): Harness<ConfigMap, HostileSettings> =>
  new Harness(new Hostile()).settings(settings).object(configMap("other"));

function terminal(h: Harness<ConfigMap, HostileSettings>, object: ConfigMap): string {
  try {
    h.reconcile(object);
  } catch (e) {
    assert.ok(e instanceof ReconcileError && !e.retryable, String(e));
    return e.message;
  }
  assert.fail("the reconcile succeeded");
}

test("the manifest is named after the mode unless the settings name it", () => {
  assert.equal(harness({ mode: "loop" }).manifest().name, "hostile-ts-loop");
  assert.equal(harness({ mode: "alloc", name: "posing" }).manifest().name, "posing");
  assert.equal(harness({}).manifest().name, "hostile-ts-ok");
  assert.deepEqual(harness({ mode: "loop" }).manifest().watches.selector.namespaces, []);
  assert.deepEqual(harness({ mode: "get-other" }).manifest().watches.selector.namespaces, ["team-a"]);
  assert.throws(() => harness({ mode: "panic" }).manifest(), /^Error: invalid settings: mode must be one of loop, alloc, patch-other, get-other, ok, got "panic"$/);
});

test("a patch of another namespace is refused as on the host", () => {
  assert.equal(
    terminal(harness({ mode: "patch-other" }), configMap("team-a")),
    "action 0: patch v1/ConfigMap other/c refused: namespace other is outside the plugin's namespaces [team-a]",
  );
});

test("a read of another namespace fails the reconcile as on the host, whatever the plugin made of it", () => {
  const h = harness({ mode: "get-other" });
  assert.equal(
    terminal(h, configMap("team-a")),
    "cache read get v1/ConfigMap other/c refused: namespace other is outside the namespaces declared for this kind ([team-a])",
  );
  const [line] = h.logs();
  assert.deepEqual(line?.fields, [
    ["key", "team-a/c"],
    ["target", "other/c"],
    ["got", "refused: get v1/ConfigMap other/c refused: namespace other is outside the namespaces declared for this kind ([team-a])"],
  ]);
});

test("the scoped modes are never asked about another namespace's keys; ok does nothing", () => {
  assert.match(terminal(harness({ mode: "get-other" }), configMap("other")), /outside the plugin's namespaces \[team-a\]; the host never queues it/);
  assert.deepEqual(harness({ mode: "ok" }).reconcile(configMap("default")), Outcome.done());
  assert.deepEqual(harness({ mode: "patch-other" }).reconcileDeleted("team-a", "c"), Outcome.done());
});
