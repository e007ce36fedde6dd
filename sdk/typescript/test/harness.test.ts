import assert from "node:assert/strict";
import { test } from "node:test";

import { Action, ObjectRef, Outcome } from "../src/action.js";
import type { Context } from "../src/context.js";
import { ReconcileError } from "../src/error.js";
import { Gvk } from "../src/gvk.js";
import { log } from "../src/logging.js";
import { Manifest, Operation } from "../src/manifest.js";
import { kinds, type KubeObject } from "../src/objects.js";
import type { Reconcile, Reconciler, Settings } from "../src/reconciler.js";
import { Request } from "../src/request.js";
import { Rows, SqlError, Statement } from "../src/sql.js";
import { Harness } from "../src/testing/index.js";

const deployment = Gvk.of("apps/v1", "Deployment");

/**
 * The Rust hostile plugin's `scope` mode: declared for `team-a` (owning ConfigMaps, reading
 * Secrets labelled `visible=yes`, writing Deployments), it tries what the object's `try` label says.
 */
class Scoped implements Reconciler<KubeObject> {
  manifest(): Manifest {
    return Manifest.forKind("example.com/v1", "Thing", "scoped")
      .namespaces(["team-a"])
      .owns(kinds.ConfigMap)
      .reads(kinds.Secret, { labels: "visible=yes" })
      .writes(deployment)
      .capability("sql:db");
  }

  reconcile(event: Reconcile<KubeObject>, ctx: Context<Settings>): Outcome {
    if (event.type === "gone") return Outcome.done();
    const own = ctx.namespace;
    const child = (namespace: string) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: `${ctx.name}-child`, namespace },
      data: { owner: ctx.name },
    });
    const restart = { spec: { template: { metadata: { annotations: { restartedBy: ctx.name } } } } };
    // A refused read is an error; carry on as a careless plugin would: the host fails the reconcile all the same.
    const careless = (read: () => unknown): void => {
      try {
        read();
      } catch {
        log.warn("read failed");
      }
    };
    switch (event.object.metadata?.labels?.["try"]) {
      case "get-other":
        careless(() => ctx.cache.get(kinds.Secret, "team-b", "data"));
        return Outcome.done();
      case "list-other":
        careless(() => ctx.cache.list(kinds.Secret, "team-b"));
        return Outcome.done();
      case "list-hidden":
        careless(() => ctx.cache.list(kinds.Secret, own, "visible=no"));
        return Outcome.done();
      case "patch-other":
        return Outcome.with([Action.mergePatch(ObjectRef.of(deployment, "team-b", "tools"), restart)]);
      case "apply-other":
        return Outcome.with([Action.apply(child("team-b"))]);
      case "delete-other":
        return Outcome.with([Action.delete(ObjectRef.of(deployment, "team-b", "tools"))]);
      case "past-the-end": {
        const outcome = Outcome.with([Action.event("A", "a")]).pushBestEffort(Action.event("B", "b"));
        outcome.bestEffort.push(2);
        return outcome;
      }
      case "sql": {
        const rows = ctx.sql("db").execute(new Statement("SELECT {0} FROM t WHERE id = $1").identifier("age").bind(7));
        return Outcome.with([Action.updateStatus({ age: String(rows.get(0, "age")) })]);
      }
      case "other-db":
        ctx.sql("other").execute(new Statement("SELECT 1"));
        return Outcome.done();
      default: {
        const visible = ctx.cache.get(kinds.Secret, own, "data") !== undefined;
        const hidden = ctx.cache.get(kinds.Secret, own, "hidden") !== undefined;
        const listed = ctx.cache.list(kinds.Secret).length;
        return Outcome.with([
          Action.apply(child(own)),
          Action.mergePatch(ObjectRef.of(deployment, own, "tools"), restart),
          Action.event("InScope", "did what it declared"),
          Action.updateStatus({ phase: "Done", visible, hidden, listed }),
        ]);
      }
    }
  }
}

const thing = (namespace: string, attempt: string, name = "t"): KubeObject => ({
  apiVersion: "example.com/v1",
  kind: "Thing",
  metadata: { name, namespace, labels: { try: attempt } },
});

function harness(): Harness<KubeObject, Settings> {
  const secret = (namespace: string, name: string, visible: string): KubeObject => ({
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name, namespace, labels: { visible } },
  });
  return new Harness(new Scoped())
    .object(secret("team-a", "data", "yes"))
    .object(secret("team-a", "hidden", "no"))
    .object(secret("team-b", "data", "yes"));
}

/** The terminal error a reconcile fails with. */
function refused(h: Harness<KubeObject, Settings>, object: KubeObject): string {
  try {
    h.reconcile(object);
  } catch (e) {
    assert.ok(e instanceof ReconcileError, String(e));
    assert.equal(e.retryable, false, "a declaration error is terminal");
    return e.message;
  }
  assert.fail("the reconcile succeeded");
}

test("reaching outside the scope fails as on the host", () => {
  const cases: Array<[string, string]> = [
    ["get-other", "cache read get v1/Secret team-b/data refused"],
    ["list-other", "cache read list v1/Secret in namespace team-b refused"],
    ["list-hidden", "cache read list v1/Secret in namespace team-a refused: the selector visible=no asks for labels outside the declared selector (visible=yes)"],
    ["patch-other", "action 0: patch apps/v1/Deployment team-b/tools refused"],
    ["apply-other", "action 0: apply v1/ConfigMap team-b/t-child refused"],
    ["delete-other", "action 0: delete apps/v1/Deployment team-b/tools refused"],
    ["past-the-end", "best-effort position 2 names no action (the outcome has 2)"],
  ];
  for (const [attempt, needle] of cases) {
    const message = refused(harness(), thing("team-a", attempt));
    assert.ok(message.startsWith(needle), `${attempt}: ${message}`);
  }
});

test("the same plugin works inside its scope, seeing only what it declared", () => {
  const outcome = harness().reconcile(thing("team-a", "legit"));
  assert.equal(outcome.actions.length, 4);
  assert.deepEqual(outcome.status(), { phase: "Done", visible: true, hidden: false, listed: 1 });
  assert.equal(
    refused(harness(), thing("team-b", "legit")),
    "test harness: team-b/t is outside the plugin's namespaces [team-a]; the host never queues it",
  );
  assert.match(refused(harness().namespaces(["team-c"]), thing("team-a", "legit")), /outside the plugin's namespaces \[\]/);
});

test("an object the API server would refuse fails as on the host", () => {
  const message = refused(harness(), thing("team-a", "legit", "Big.Thing"));
  assert.ok(
    message.startsWith('action 0: the API server would refuse ConfigMap Big.Thing-child: metadata.name: Invalid value: "Big.Thing-child"'),
    message,
  );
});

test("SQL goes to the stand-in for declared databases only, every statement recorded", () => {
  const h = harness().sql((database, statements) => {
    assert.equal(database, "db");
    assert.deepEqual(statements[0]?.params, [7]);
    return [new Rows(["age"], [[41n]], 1)];
  });
  assert.deepEqual(h.reconcile(thing("team-a", "sql")).status(), { age: "41" });
  assert.deepEqual(
    h.statements().map(([db, s]) => [db, s.query, s.identifiers]),
    [["db", "SELECT {0} FROM t WHERE id = $1", ["age"]]],
  );
  assert.throws(() => h.reconcile(thing("team-a", "other-db")), {
    message: "sql: the manifest does not declare the capability sql:other",
    retryable: false,
  });
  const failing = harness().sql(() => {
    throw new SqlError("could not connect", undefined, true);
  });
  assert.throws(() => failing.reconcile(thing("team-a", "sql")), { message: "sql: could not connect", retryable: true });
});

test("the harness's clock, previous results and logs", () => {
  let seen: unknown;
  const probe: Reconciler<KubeObject> = {
    manifest: () => Manifest.forKind("v1", "ConfigMap", "probe").validating([Operation.Create]),
    reconcile: (event, ctx) => {
      log.info("probing", { key: ctx.key, type: event.type });
      seen = [ctx.nowRfc3339(), ctx.failures().map(([i, f]) => [i, f.code])];
      return Outcome.done();
    },
    ...{ validateCreate: () => ["checked"] },
  };
  const h = new Harness(probe).now("2026-11-22T10:00:00.750Z");
  const failed = { type: "failed" as const, failure: { target: ObjectRef.of(kinds.ConfigMap, "", "c"), code: 409, reason: "Conflict", message: "" } };
  h.run(Request.forDeleted("default", "c").after([{ index: 2, status: failed }]));
  assert.deepEqual(seen, ["2026-11-22T10:00:00Z", [[2, 409]]]);
  assert.deepEqual(h.logs(), [{ level: "info", message: "probing", fields: [["key", "default/c"], ["type", "gone"]] }]);
  assert.deepEqual(h.validate(Operation.Create, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } }), { allowed: true, warnings: ["checked"] });
  assert.throws(() => h.validate(Operation.Delete, undefined, {}), { message: "test harness: the manifest does not validate delete" });
  assert.throws(() => h.defaulted({}), { message: "test harness: the manifest does not declare a defaulter" });
  assert.throws(() => new Harness(probe).now("yesterday"), /not an RFC 3339 time/);
});
