import assert from "node:assert/strict";
import { test } from "node:test";

import { bestEffort, checkAction, type Act, type Reconciled } from "../src/core/action.js";
import { Namespaces, Scope } from "../src/core/scope.js";
import { LabelSelector } from "../src/core/selector.js";
import { EVENT_REASON_MAX } from "../src/core/validation.js";
import { Gvk } from "../src/gvk.js";

const scope = (): Scope =>
  new Scope(Gvk.of("example.com/v1", "Thing"), Namespaces.declared(["ns"]), LabelSelector.parse(""))
    .owns(Gvk.of("v1", "ConfigMap"))
    .writesKind(Gvk.of("apps/v1", "Deployment"));

const LIVE: Reconciled = { namespace: "ns", name: "a", exists: true };
const GONE: Reconciled = { ...LIVE, exists: false };

/** The check's refusal, or "ok". */
function check(reconciled: Reconciled, act: Act): string {
  try {
    checkAction(scope(), reconciled, act);
    return "ok";
  } catch (e) {
    return (e as Error).message;
  }
}

const cm = (name: string, namespace?: string) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: namespace === undefined ? { name } : { name, namespace },
});

test("best-effort positions must name actions", () => {
  assert.deepEqual(bestEffort([2, 0, 2], 3), [0, 2]);
  assert.throws(() => bestEffort([1, 3], 3), { message: "best-effort position 3 names no action (the outcome has 3)" });
});

test("applies must be in scope and admissible", () => {
  assert.equal(check(LIVE, { verb: "apply", object: cm("a") }), "ok");
  const secret = { apiVersion: "v1", kind: "Secret", metadata: { name: "s" } };
  assert.match(check(LIVE, { verb: "apply", object: secret }), /not declared/);
  assert.match(check(LIVE, { verb: "apply", object: cm("a", "other") }), /owner's namespace/);
  assert.match(
    check(LIVE, { verb: "apply", object: cm("Bad_Name") }),
    /^the API server would refuse ConfigMap Bad_Name: metadata\.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain/,
  );
  assert.equal(check(LIVE, { verb: "apply", object: { kind: "ConfigMap" } }), "object has no apiVersion");
  const labelled = { ...cm("a"), metadata: { name: "a", labels: { "bad key!": "v" }, finalizers: ["orphan", "foregroundDeletion"] } };
  const refused = check(LIVE, { verb: "apply", object: labelled });
  assert.match(refused, /metadata\.labels: Invalid value: "bad key!"/);
  assert.match(refused, /metadata\.finalizers: Invalid value: \[\]string\{"orphan", "foregroundDeletion"\}/);
});

test("children are of one owned kind, each once", () => {
  const cms = Gvk.of("v1", "ConfigMap");
  const children = (r: Reconciled, kind: Gvk, objects: unknown[]): string => check(r, { verb: "children", kind, objects });
  assert.equal(children(LIVE, cms, [cm("a"), cm("b")]), "ok");
  assert.match(children(LIVE, Gvk.of("apps/v1", "Deployment"), []), /not an owned kind/);
  assert.equal(children(LIVE, cms, [cm("a"), cm("a")]), "child a appears twice");
  const deployment = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d" } };
  assert.equal(children(LIVE, cms, [deployment]), "child d is a Deployment, not a ConfigMap");
  assert.equal(children(GONE, cms, []), "ns/a no longer exists");
});

test("the reconciled object must exist for status, finalizers and events", () => {
  assert.equal(check(LIVE, { verb: "update-status", status: { ready: true } }), "ok");
  assert.equal(check(GONE, { verb: "update-status", status: null }), "ns/a no longer exists");
  assert.equal(check(LIVE, { verb: "update-status", status: [] }), "status must be a JSON object");
  assert.equal(check(LIVE, { verb: "add-finalizer", finalizer: "example.com/cleanup" }), "ok");
  assert.match(check(LIVE, { verb: "remove-finalizer", finalizer: "not a name!" }), /qualified finalizer/);
  assert.equal(check(LIVE, { verb: "emit-event", reason: "Made", action: "Make" }), "ok");
  assert.equal(
    check(LIVE, { verb: "emit-event", reason: "x".repeat(EVENT_REASON_MAX + 1), action: "Make" }),
    `event reason must be 1-${EVENT_REASON_MAX} characters`,
  );
  assert.match(check({ ...LIVE, namespace: "other" }, { verb: "add-finalizer", finalizer: "example.com/x" }), /outside/);
});

test("patches and deletes name a writable target", () => {
  const target = (kind: string, name: string) => ({ apiVersion: "apps/v1", kind, namespace: "", name });
  assert.equal(check(LIVE, { verb: "patch", target: target("Deployment", "d") }), "ok");
  assert.equal(check(GONE, { verb: "delete", target: target("Deployment", "d") }), "ok", "no object needed");
  assert.match(check(LIVE, { verb: "delete", target: target("StatefulSet", "s") }), /not declared/);
  assert.equal(check(LIVE, { verb: "patch", target: target("Deployment", "") }), "target needs apiVersion, kind and name");
});
