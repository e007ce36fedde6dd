import assert from "node:assert/strict";
import { test } from "node:test";

import { LabelSelector } from "../src/core/selector.js";

const matches = (selector: string, labels: Record<string, string> | null): boolean =>
  LabelSelector.parse(selector).matches(labels);

test("every operator matches like Kubernetes", () => {
  const l = { app: "nginx", tier: "web" };
  assert.ok(matches("", null));
  assert.ok(matches("app=nginx", l) && matches("app==nginx", l));
  assert.ok(!matches("app!=nginx", l) && matches("app!=other", l));
  assert.ok(matches("app!=x", {}), "!= matches objects without the label");
  assert.ok(matches("tier in (web, api)", l) && !matches("tier in (api)", l));
  assert.ok(matches("tier notin (api)", l) && !matches("tier notin (web)", l));
  assert.ok(matches("app", l) && !matches("!app", l) && matches("!canary", l));
  assert.ok(matches("app=nginx,tier in (web),!canary", l));
  assert.ok(!matches("app=nginx,tier=api", l));
});

test("bad selectors are rejected with the selector named", () => {
  assert.doesNotThrow(() => LabelSelector.parse("app="), "empty values are legal");
  for (const bad of ["=x", "a in web", "a in (b", "app=ngi nx", ",", "-a=b", "a=b,"]) {
    assert.throws(() => LabelSelector.parse(bad), (e: Error) => e.message.includes(JSON.stringify(bad)), bad);
  }
});

test("disjoint selectors are those no labels satisfy", () => {
  const d = (a: string, b: string): boolean => LabelSelector.parse(a).disjoint(LabelSelector.parse(b));
  assert.ok(d("app=a", "app=b") && d("x", "!x") && d("t in (a)", "t notin (a)"));
  assert.ok(d("t in (a,b)", "t in (c)") && d("app=a", "!app"));
  assert.ok(!d("app=a", "") && !d("app=a", "tier=web") && !d("t in (a,b)", "t=b"));
  assert.ok(!d("app!=a", "app=b") && !d("app!=a", "!app") && !d("x", "x=1"));
});

test("the string form round-trips", () => {
  const s = LabelSelector.parse("app=nginx,tier in (web,api),!canary,x!=y,k");
  assert.equal(s.toString(), "app=nginx,tier in (web,api),!canary,x!=y,k");
  assert.ok(LabelSelector.parse(s.toString()).equals(s));
});
