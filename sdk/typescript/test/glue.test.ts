import assert from "node:assert/strict";
import { test } from "node:test";
import vm from "node:vm";

import { Action, Outcome } from "../src/action.js";
import type { Context } from "../src/context.js";
import { ReconcileError } from "../src/error.js";
import { exportWith, hostOver, resolveGlobals, warmUp, type Imports } from "../src/export/glue.js";
import { Failure, type AdmissionRequest, type Request as WireRequest } from "../src/export/wire.js";
import { log } from "../src/logging.js";
import { Manifest, Mapping, Operation, Predicate } from "../src/manifest.js";
import { kinds, type ConfigMap, type CustomResource } from "../src/objects.js";
import type { Reconcile, Reconciler, Settings } from "../src/reconciler.js";
import { SqlError, Statement } from "../src/sql.js";
import { Denied, type Validator } from "../src/webhooks.js";

/** What the stand-in imports saw, and what they answer. */
class Recorded implements Imports {
  readonly lines: Array<[string, string, Array<[string, string]>]> = [];
  getAnswer: () => string | undefined = () => undefined;
  executeAnswer: () => [] = () => [];
  log(level: string, message: string, fields: Array<[string, string]>): void {
    this.lines.push([level, message, fields]);
  }
  get(): string | undefined {
    return this.getAnswer();
  }
  list(): string[] {
    return [];
  }
  children(): string[] {
    return [];
  }
  execute(): [] {
    return this.executeAnswer();
  }
}

/** Throws as componentize-js throws a `result`'s error: an object whose own `payload` holds it. */
function thrownWith(payload: unknown): never {
  throw Object.assign(new Error("ComponentError"), { payload });
}

type Thing = CustomResource<{ mode?: string }>;

/** Does what the object's `spec.mode` says; has no webhooks. */
class Modes implements Reconciler<Thing> {
  manifest(settings: Settings): Manifest {
    if (settings["refuse"] === true) throw new Error("settings refused");
    return Manifest.forKind("example.com/v1", "Thing", "modes")
      .version("1.2.3")
      .predicate(Predicate.GenerationChanged)
      .owns(kinds.ConfigMap)
      .reads(kinds.Secret, { labels: "visible=yes" }, Mapping.label("owner"))
      .capability("sql:db");
  }

  reconcile(event: Reconcile<Thing>, ctx: Context<Settings>): Outcome {
    if (event.type !== "apply") return Outcome.done();
    log.info("reconciling", { key: ctx.key, generation: event.object.metadata?.generation, missing: undefined });
    switch (event.object.spec.mode) {
      case "retry":
        throw ReconcileError.retryable("not yet");
      case "bug":
        return (event.object as unknown as { nothing: { here: () => Outcome } }).nothing.here();
      case "sql":
        ctx.sql("db").execute(new Statement("SELECT 1"));
        return Outcome.done();
      case "cache": {
        ctx.cache.get(kinds.Secret, "default", "s");
        return Outcome.done();
      }
      default:
        return Outcome.done()
          .push(Action.updateStatus({ phase: "Ready" }))
          .pushBestEffort(Action.delete({ apiVersion: "v1", kind: "ConfigMap", namespace: "", name: "old" }, "Orphan"))
          .push(Action.warning("Slow", "took long"))
          .requeueAfter(1500);
    }
  }
}

function request(mode: string, settings = ""): WireRequest {
  const object = { apiVersion: "example.com/v1", kind: "Thing", metadata: { name: "t", namespace: "default", generation: 3 }, spec: { mode } };
  return {
    namespace: "default",
    name: "t",
    object: JSON.stringify(object),
    deleting: false,
    settings,
    now: { seconds: 1_795_305_600n, nanoseconds: 0 },
    previous: [{ index: 0, status: { tag: "failed", val: { target: { apiVersion: "v1", kind: "ConfigMap", namespace: "default", name: "c" }, code: 422, reason: "Invalid", message: "no" } } }],
  };
}

/** The payload an export threw. */
function failure(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof Failure, `threw ${String(e)}, not a Failure`);
    assert.ok(Object.prototype.hasOwnProperty.call(e, "payload"), "componentize-js reads an own `payload`");
    return e.payload;
  }
  assert.fail("the export did not fail");
}

test("the manifest goes on the wire as the contract spells it", () => {
  const { reconciler } = exportWith(hostOver(new Recorded()), new Modes());
  assert.deepEqual(reconciler.manifest("{}"), {
    name: "modes",
    version: "1.2.3",
    watches: { kind: { group: "example.com", version: "v1", kind: "Thing" }, selector: { namespaces: [], labels: "" }, predicates: ["generation-changed"] },
    owns: [{ group: "", version: "v1", kind: "ConfigMap" }],
    reads: [{ kind: { group: "", version: "v1", kind: "Secret" }, selector: { namespaces: [], labels: "visible=yes" }, trigger: { tag: "label", val: "owner" } }],
    writes: [],
    capabilities: ["sql:db"],
  });
  assert.equal(failure(() => reconciler.manifest('{"refuse": true}')), "settings refused");
  assert.match(String(failure(() => reconciler.manifest("[1]"))), /^invalid settings: expected a JSON object/);
  assert.match(String(failure(() => reconciler.manifest("{"))), /^invalid settings: /);
});

test("an outcome goes on the wire with its best-effort positions and requeue", () => {
  const imports = new Recorded();
  const outcome = exportWith(hostOver(imports), new Modes()).reconciler.reconcile(request("ok"));
  assert.deepEqual(outcome.actions, [
    { tag: "update-status", val: '{"phase":"Ready"}' },
    { tag: "delete", val: { target: { apiVersion: "v1", kind: "ConfigMap", namespace: "", name: "old" }, propagation: "orphan" } },
    { tag: "emit-event", val: { type: "warning", reason: "Slow", note: "took long", action: "Reconcile" } },
  ]);
  assert.ok(outcome.bestEffort instanceof Uint32Array);
  assert.deepEqual([...outcome.bestEffort], [1]);
  assert.equal(outcome.requeueAfterMs, 1500n);
  assert.deepEqual(imports.lines, [["info", "reconciling", [["key", "default/t"], ["generation", "3"]]]]);
});

test("errors map as the Rust SDK maps them, and a bug is a terminal error naming the object", () => {
  const imports = new Recorded();
  const { reconciler } = exportWith(hostOver(imports), new Modes());
  assert.deepEqual(failure(() => reconciler.reconcile(request("retry"))), { message: "not yet", retryable: true });
  const bug = failure(() => reconciler.reconcile(request("bug"))) as { message: string; retryable: boolean };
  assert.equal(bug.retryable, false);
  assert.match(bug.message, /^default\/t: reconcile threw TypeError: /);
  assert.deepEqual(failure(() => reconciler.reconcile(request("ok", "[]"))), {
    message: "invalid settings: expected a JSON object, got []",
    retryable: false,
  });
  const broken = { ...request("ok"), object: "{not json" };
  const parsed = failure(() => reconciler.reconcile(broken)) as { message: string; retryable: boolean };
  assert.match(parsed.message, /^default\/t: object does not parse: /);
  assert.equal(parsed.retryable, false);
});

test("the imports' errors reach the plugin as the SDK's errors", () => {
  const imports = new Recorded();
  const { reconciler } = exportWith(hostOver(imports), new Modes());
  imports.getAnswer = () => thrownWith("get v1/Secret default/s refused: the kind is not declared");
  assert.deepEqual(failure(() => reconciler.reconcile(request("cache"))), {
    message: "get v1/Secret default/s refused: the kind is not declared",
    retryable: true,
  });
  imports.executeAnswer = () => thrownWith({ message: "duplicate key", sqlstate: "23505", transient: false });
  assert.deepEqual(failure(() => reconciler.reconcile(request("sql"))), {
    message: "sql: duplicate key (SQLSTATE 23505)",
    retryable: false,
  });
  imports.executeAnswer = () => thrownWith({ message: "unreachable", sqlstate: undefined, transient: true });
  assert.deepEqual(failure(() => reconciler.reconcile(request("sql"))), { message: "sql: unreachable", retryable: true });
  assert.ok(new SqlError("x", undefined, true).toReconcileError().retryable);
});

test("a plugin without webhooks declares none and serves none", () => {
  const { webhooks } = exportWith(hostOver(new Recorded()), new Modes());
  assert.deepEqual(webhooks.declare(""), { validates: [], defaults: false, converts: [] });
  assert.equal(failure(() => webhooks.validate(admission("create"))), "this plugin does not serve a `validate` webhook");
  assert.equal(failure(() => webhooks.mutate(admission("create"))), "this plugin does not serve a `default` webhook");
  assert.equal(failure(() => webhooks.convert("", "example.com/v1", [])), "this plugin does not serve a `convert` webhook");
});

type Sized = CustomResource<{ size: number; extra?: string }>;

/** Validates sizes and defaults one; declares what `declares` says. */
class Sizes implements Reconciler<Sized>, Validator<Sized, Settings> {
  constructor(private readonly declares: "all" | "convert") {}
  manifest(): Manifest {
    const m = Manifest.forKind("example.com/v1", "Thing", "sizes").validating([Operation.Create, Operation.Update]).defaulting();
    return this.declares === "convert" ? m.converting(["v1", "v2"]) : m;
  }
  reconcile(): Outcome {
    return Outcome.done();
  }
  decodeObject(json: unknown): Sized {
    const spec = (json as { spec?: { size?: unknown } }).spec;
    if (typeof spec?.size !== "number") throw new Error("spec.size: expected a number");
    return json as Sized;
  }
  validateCreate(object: Sized): string[] {
    if (object.spec.size > 10) throw new Denied(`size ${object.spec.size} is over 10`, 422, ["think small"]);
    return object.spec.size > 5 ? ["large"] : [];
  }
  default(object: Sized): void {
    object.spec.size ||= 1;
  }
}

function admission(operation: AdmissionRequest["operation"], spec?: object): AdmissionRequest {
  const object = spec === undefined ? undefined : JSON.stringify({ apiVersion: "example.com/v1", kind: "Thing", metadata: { name: "t", namespace: "default" }, spec });
  return {
    uid: "u1",
    kind: { group: "example.com", version: "v1", kind: "Thing" },
    plural: "things",
    subresource: "",
    name: "t",
    namespace: "default",
    operation,
    userInfo: { username: "alice", uid: "", groups: [] },
    object,
    oldObject: undefined,
    dryRun: false,
    settings: "",
    now: { seconds: 0n, nanoseconds: 0 },
  };
}

test("webhooks answer as controller-runtime's: warnings, refusals with their code, defaults as the patched object", () => {
  const { webhooks } = exportWith(hostOver(new Recorded()), new Sizes("all"));
  assert.deepEqual(webhooks.declare("{}"), { validates: ["create", "update"], defaults: true, converts: [] });
  assert.deepEqual(webhooks.validate(admission("create", { size: 7 })), { allowed: true, message: "", code: 200, warnings: ["large"], patched: undefined });
  assert.deepEqual(webhooks.validate(admission("create", { size: 11 })), {
    allowed: false,
    message: "size 11 is over 10",
    code: 422,
    warnings: ["think small"],
    patched: undefined,
  });
  const undecodable = webhooks.validate(admission("create", { size: "big" }));
  assert.deepEqual([undecodable.allowed, undecodable.code, undecodable.message], [false, 400, "the object does not decode: spec.size: expected a number"]);
  assert.deepEqual(webhooks.validate(admission("update", { size: 11 })).allowed, true, "validateUpdate left out allows");
  const defaulted = webhooks.mutate(admission("create", { size: 0, extra: "kept" }));
  assert.deepEqual(JSON.parse(defaulted.patched ?? "null").spec, { size: 1, extra: "kept" });
  assert.equal(webhooks.mutate(admission("create", { size: 2 })).patched, undefined, "no change, no patch");
  assert.equal(
    failure(() => exportWith(hostOver(new Recorded()), new Sizes("convert")).webhooks.declare("")),
    "the manifest declares a `convert` webhook that the reconciler does not implement",
  );
});

test("the host's clock, key and previous results reach the context", () => {
  let seen: unknown;
  const probe: Reconciler<ConfigMap> = {
    manifest: () => Manifest.forKind("v1", "ConfigMap", "probe"),
    reconcile: (_event, ctx) => {
      seen = [ctx.key, ctx.namespace, ctx.name, ctx.nowRfc3339(), ctx.now.getTime(), ctx.failures()];
      return Outcome.done();
    },
  };
  exportWith(hostOver(new Recorded()), probe).reconciler.reconcile(request("ok"));
  assert.deepEqual(seen, [
    "default/t",
    "default",
    "t",
    "2026-11-22T00:00:00Z",
    1_795_305_600_000,
    [[0, { target: { apiVersion: "v1", kind: "ConfigMap", namespace: "default", name: "c" }, code: 422, reason: "Invalid", message: "no" }]],
  ]);
});

test("warm-up reconciles each sample once against a host that answers nothing", () => {
  const seen: unknown[] = [];
  const sample = (name: string, mode?: string): Thing => ({
    apiVersion: "example.com/v1",
    kind: "Thing",
    metadata: { name, namespace: "default" },
    spec: { mode },
  });
  const warmed: Reconciler<Thing> = {
    manifest: () => Manifest.forKind("example.com/v1", "Thing", "warmed"),
    warmUp: () => [sample("a"), sample("b", "sql"), sample("c")],
    reconcile: (event, ctx) => {
      if (event.type !== "apply") return Outcome.done();
      log.info("warming", { key: ctx.key });
      seen.push([ctx.key, ctx.cache.get(kinds.Secret, "default", "s"), ctx.cache.list(kinds.Secret)]);
      if (event.object.spec.mode === "sql") ctx.sql("db").execute(new Statement("SELECT 1"));
      return Outcome.with([Action.updateStatus({ phase: "Ready" })]);
    },
  };
  // The SQL sample fails (no database at build time) and is not counted; the others are.
  assert.equal(warmUp(warmed), 2);
  assert.deepEqual(seen, [
    ["default/a", undefined, []],
    ["default/b", undefined, []],
    ["default/c", undefined, []],
  ]);
});

test("warm-up without samples runs nothing, and one that throws fails nothing", () => {
  let reconciles = 0;
  const counting = (warm?: () => readonly ConfigMap[]): Reconciler<ConfigMap> => ({
    manifest: () => Manifest.forKind("v1", "ConfigMap", "counting"),
    warmUp: warm,
    reconcile: () => {
      reconciles += 1;
      return Outcome.done();
    },
  });
  assert.equal(warmUp(counting()), 0);
  assert.equal(
    warmUp(
      counting(() => {
        throw new Error("no samples today");
      }),
    ),
    0,
  );
  assert.equal(reconciles, 0);
});

test("resolving globals reaches each global the functions were made in, once, and calls no getter", () => {
  const context = vm.createContext({});
  vm.runInContext(
    "var reads = 0; Object.defineProperty(globalThis, 'probe', { get() { reads += 1; return 1; } });",
    context,
  );
  const made = vm.runInContext("(function made() {})", context) as unknown;
  const arrow = vm.runInContext("(() => 1)", context) as unknown;
  // This module's global and the context's; what is not a function is passed over.
  assert.equal(resolveGlobals([made, arrow, () => 0, "not a function", undefined]), 2);
  assert.equal(resolveGlobals([]), 1);
  assert.equal(vm.runInContext("reads", context), 0);
});
