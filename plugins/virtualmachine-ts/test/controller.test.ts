// The Rust plugin's tests (plugins/virtualmachine/src/lib.rs), run on the harness.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Gvk, Operation, Outcome, Predicate, ReconcileError, type Action, type KubeObject } from "wasmctrl";
import { Harness } from "wasmctrl/testing";

import { VERSION, VirtualMachineController, type Status } from "../src/controller.js";

function vm(spec: unknown, status: unknown = null): KubeObject {
  return {
    apiVersion: "cloudnative.tw/v1alpha1",
    kind: "VirtualMachine",
    metadata: { name: "test-vm", namespace: "default", generation: 1 },
    ...({ spec, status } as object),
  };
}

const harness = () => new Harness(new VirtualMachineController());

/** The status the outcome's first action writes. */
function statusOf(outcome: Outcome): Status {
  const first: Action | undefined = outcome.actions[0];
  assert.ok(first?.type === "update-status", `expected a status update first, got ${JSON.stringify(outcome.actions)}`);
  return JSON.parse(first.status) as Status;
}

const resource = (cpu: number, memory = "4Gi", rootDisk = "40Gi") => ({ cpu, memory, rootDisk });

test("a new VM becomes Active with its resources", () => {
  const outcome = harness().now("2026-11-22T00:00:00Z").reconcile(vm({ resource: resource(2) }));
  const status = statusOf(outcome);
  assert.equal(status.phase, "Active");
  assert.equal(status.lastUpdateTime, "2026-11-22T00:00:00Z");
  assert.equal(status.server?.memory, "4Gi");
  assert.deepEqual(outcome.events(), [{ type: "Normal", reason: "Active", note: "test-vm is Active", action: "Reconcile" }]);
  // Field for field what the Rust plugin writes.
  assert.equal(
    outcome.actions[0]?.type === "update-status" ? outcome.actions[0].status : "",
    '{"phase":"Active","server":{"cpu":2,"memory":"4Gi","rootDisk":"40Gi"},"observedGeneration":1,"lastUpdateTime":"2026-11-22T00:00:00Z"}',
  );
});

test("an unchanged status writes nothing", () => {
  const status = { phase: "Active", observedGeneration: 1, server: resource(2), lastUpdateTime: "x" };
  const outcome = harness().reconcile(vm({ resource: resource(2) }, status));
  assert.deepEqual(outcome, Outcome.done());
});

test("a spec change updates the status without a second event", () => {
  const status = { phase: "Active", observedGeneration: 0, server: resource(2) };
  const outcome = harness().reconcile(vm({ resource: resource(4, "8Gi") }, status));
  assert.equal(statusOf(outcome).server?.cpu, 4);
  assert.equal(outcome.actions.length, 1);
});

test("invalid resources fail with a warning", () => {
  const outcome = harness().reconcile(vm({ resource: resource(0) }));
  const status = statusOf(outcome);
  assert.equal(status.phase, "Failed");
  assert.equal(status.reason, "spec.resource.cpu must be positive, got 0");
  assert.equal(status.server, undefined);
  assert.deepEqual(outcome.events(), [
    { type: "Warning", reason: "Failed", note: "test-vm is Failed: spec.resource.cpu must be positive, got 0", action: "Reconcile" },
  ]);
  const lots = harness().reconcile(vm({ resource: resource(1, "lots") }));
  assert.equal(statusOf(lots).reason, 'spec.resource.memory is not a quantity: "lots"');
  const reboot = harness().reconcile(vm({ resource: resource(1), action: "reboot" }));
  assert.equal(statusOf(reboot).reason, 'spec.action must be start or stop, got "reboot"');
});

test("the stop action stops", () => {
  const outcome = harness().reconcile(vm({ resource: resource(1, "1Gi", "1Gi"), action: "stop" }));
  assert.equal(statusOf(outcome).phase, "Stopped");
});

test("quantities are numbers with an optional suffix", () => {
  const quantity = (memory: string): string => statusOf(harness().reconcile(vm({ resource: resource(1, memory) }))).phase;
  for (const good of ["4Gi", "512Mi", "1.5G", "100m", "1E", "3"]) assert.equal(quantity(good), "Active", good);
  for (const bad of ["", "Gi", ".", "1.2.3", "4 Gi", "-1", "4GB"]) assert.equal(quantity(bad), "Failed", bad);
});

test("a deleted VM is logged and left alone", () => {
  const h = harness();
  assert.deepEqual(h.reconcileDeleted("default", "gone"), Outcome.done());
  const gone = h.logs().find((l) => l.message.includes("no longer exists"));
  assert.ok(gone, JSON.stringify(h.logs()));
  assert.deepEqual(gone.fields, [["key", "default/gone"]]);
  const deleting = { ...vm({ resource: resource(2) }), metadata: { name: "test-vm", namespace: "default", deletionTimestamp: "2026-01-01T00:00:00Z" } };
  assert.deepEqual(h.reconcile(deleting), Outcome.done());
  assert.equal(h.logs().at(-1)?.message, "virtualmachine is being deleted");
});

test("it logs what the Rust plugin logs", () => {
  const h = harness();
  h.reconcile(vm({ resource: resource(2), action: "stop" }));
  assert.deepEqual(h.logs(), [
    {
      level: "info",
      message: "reconciling virtualmachine",
      fields: [
        ["key", "default/test-vm"],
        ["generation", "1"],
        ["spec", 'Spec { resource: Resource { cpu: 2, memory: "4Gi", root_disk: "40Gi" }, action: Some("stop") }'],
      ],
    },
  ]);
});

test("an object that does not fit the type is a terminal error naming it", () => {
  assert.throws(() => harness().reconcile(vm({ resource: { cpu: "two", memory: "4Gi", rootDisk: "40Gi" } })), (e: unknown) => {
    assert.ok(e instanceof ReconcileError && !e.retryable);
    assert.equal(e.message, "default/test-vm: object does not parse: spec.resource.cpu: expected an integer");
    return true;
  });
  assert.throws(() => harness().reconcile(vm(undefined)), { message: "default/test-vm: object does not parse: missing field `spec`" });
});

test("the manifest watches VirtualMachines on generation changes", () => {
  const m = harness().manifest();
  assert.equal(m.name, "virtualmachine-ts");
  assert.ok(m.watches.kind.equals(Gvk.of("cloudnative.tw/v1alpha1", "VirtualMachine")));
  assert.deepEqual(m.watches.predicates, [Predicate.GenerationChanged]);
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  assert.equal(m.version, pkg.version, "VERSION follows package.json");
  assert.equal(VERSION, pkg.version);
});

test("the webhooks refuse what the controller would fail and default the action", () => {
  const h = harness();
  const bad = vm({ resource: resource(0) });
  const refused = h.validate(Operation.Create, bad);
  assert.ok(!refused.allowed);
  assert.equal(refused.denied.message, "spec.resource.cpu must be positive, got 0");
  assert.equal(refused.denied.code, 403);
  const good = vm({ resource: resource(2) });
  const fewer = vm({ resource: resource(1) });
  assert.deepEqual(h.validate(Operation.Update, fewer, good), {
    allowed: true,
    warnings: ["test-vm: fewer CPUs (2 -> 1) take effect at the next restart"],
  });
  const unknown = vm({ resource: resource(2), extra: "kept" });
  const defaulted = h.defaulted(unknown);
  assert.ok(defaulted.allowed);
  const spec = defaulted.object["spec"] as Record<string, unknown>;
  assert.equal(spec["action"], "start");
  assert.equal(spec["extra"], "kept", "fields the type does not know are kept");
  assert.throws(() => h.validate(Operation.Delete, undefined, good), /does not validate delete/, "deletes are not validated");
});
