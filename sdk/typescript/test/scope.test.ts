import assert from "node:assert/strict";
import { test } from "node:test";

import { scopeOf, type Declaration } from "../src/core/declaration.js";
import { Namespaces, Scope } from "../src/core/scope.js";
import { LabelSelector } from "../src/core/selector.js";
import { Gvk } from "../src/gvk.js";

const sel = (s: string): LabelSelector => LabelSelector.parse(s);
const thing = Gvk.of("example.com/v1", "Thing");
const [pod, cm, secret, node, deploy] = [
  Gvk.of("v1", "Pod"),
  Gvk.of("v1", "ConfigMap"),
  Gvk.of("v1", "Secret"),
  Gvk.of("v1", "Node"),
  Gvk.of("apps/v1", "Deployment"),
];

function scope(): Scope {
  return new Scope(thing, Namespaces.declared(["team-a"]), sel("tier=web"))
    .owns(pod)
    .readsKind(cm, [], sel("app=x"))
    .readsKind(secret, ["shared"], sel(""))
    .readsKind(node, [], sel(""))
    .writesKind(deploy);
}

const refusal = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    return (e as Error).message;
  }
  assert.fail("expected a refusal");
};

test("reads are limited to declared kinds, namespaces and labels", () => {
  const s = scope();
  const reads = s.checkRead("get", cm, "team-a", "c");
  assert.ok(reads.admits("team-a", { app: "x" }));
  assert.ok(!reads.admits("team-a", { app: "y" }), "outside the selector");
  assert.equal(
    refusal(() => s.checkRead("get", cm, "team-b", "c")),
    "get v1/ConfigMap team-b/c refused: namespace team-b is outside the namespaces declared for this kind ([team-a])",
  );
  assert.throws(() => s.checkRead("list", cm, "team-b", ""));
  assert.ok(!s.checkRead("list", cm, "", "").admits("team-b", { app: "x" }), "a list over every namespace is filtered");
  assert.match(refusal(() => s.checkRead("get", deploy, "team-a", "d")), /not declared in the manifest/);
  assert.doesNotThrow(() => s.checkRead("get", secret, "shared", "s"));
  assert.throws(() => s.checkRead("get", secret, "team-a", "s"));
  assert.doesNotThrow(() => s.checkRead("get", node, "", "n1"), "cluster-scoped objects of a declared kind");
  const watched = s.checkRead("list", thing, "team-a", "");
  assert.ok(watched.admits("team-a", { tier: "web" }) && !watched.admits("team-a", { app: "x" }));
});

test("writes are limited to declared kinds and namespaces", () => {
  const s = scope();
  assert.doesNotThrow(() => s.checkWrite("apply", pod, "team-a", "p", "team-a"));
  assert.doesNotThrow(() => s.checkWrite("apply", pod, "", "p", "team-a"));
  assert.match(refusal(() => s.checkWrite("apply", pod, "team-b", "p", "team-a")), /owner's namespace/);
  assert.doesNotThrow(() => s.checkWrite("patch", deploy, "team-a", "d", "team-a"));
  assert.match(refusal(() => s.checkWrite("delete", deploy, "team-b", "d", "team-a")), /^delete apps\/v1\/Deployment team-b\/d refused/);
  assert.match(refusal(() => s.checkWrite("patch", cm, "team-a", "c", "team-a")), /not declared/);
  assert.throws(() => s.checkWrite("patch", thing, "team-b", "t", "team-a"));
});

test("namespaces never read empty as all", () => {
  const none = Namespaces.declared(["a"]).intersect(Namespaces.declared(["b"]));
  assert.ok(!none.contains("a") && !none.contains("b"));
  assert.equal(none.toString(), "[]");
  assert.ok(Namespaces.declared(["a"]).contains(""), "cluster-scoped objects are in no namespace");
  assert.equal(Namespaces.all().intersect(Namespaces.declared(["b", "a"])).toString(), "[a, b]");
});

function sample(): Declaration {
  return {
    watched: thing,
    namespaces: [],
    labels: "app=x",
    owns: [pod],
    reads: [{ kind: cm, namespaces: [], labels: "" }],
    writes: [deploy],
    capabilities: [],
  };
}

test("grants follow the declaration and the operator only narrows", () => {
  const s = scopeOf(sample());
  const read = (k: Gvk): boolean => {
    try {
      s.checkRead("get", k, "ns", "x");
      return true;
    } catch {
      return false;
    }
  };
  assert.ok(read(thing) && read(pod) && read(cm) && !read(deploy) && !read(secret));
  const narrowed = scopeOf(sample(), ["team-a"]);
  assert.throws(() => narrowed.checkRead("get", cm, "team-b", "x"));
  assert.throws(() => narrowed.checkWrite("patch", deploy, "team-b", "x", "team-a"));
  const nothing = scopeOf({ ...sample(), namespaces: ["team-b"] }, ["team-a"]);
  assert.ok(!nothing.reconcilesIn("team-a") && !nothing.reconcilesIn("team-b"));
});

test("refusals of a declaration name the field", () => {
  const refused = (change: Partial<Declaration>): string => refusal(() => scopeOf({ ...sample(), ...change }));
  assert.match(refused({ owns: [new Gvk("", "v1", "")] }), /^owns:/);
  assert.match(refused({ watched: new Gvk("x", "", "Thing") }), /^watches\.kind:/);
  assert.match(refused({ labels: "a in (b" }), /^watches\.selector\.labels:/);
  assert.match(refused({ reads: [{ kind: cm, namespaces: [], labels: "=" }] }), /^reads\.selector\.labels:/);
  for (const nonsense of ["network", "sql:", "sql:Students", "sql:a b"]) {
    assert.match(refused({ capabilities: [nonsense] }), /^capabilities/, nonsense);
  }
  assert.ok(scopeOf({ ...sample(), capabilities: ["sql:students", "sql:audit_log-2"] }).hasCapability("sql:audit_log-2"));
});
