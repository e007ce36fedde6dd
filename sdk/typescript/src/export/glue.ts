/**
 * The edge between the contract and the SDK: the world's exports built from a plugin
 * ({@link exportWith}), the {@link Host} built from the world's imports ({@link hostOver}), and
 * the conversions between the wire's types and the SDK's. Errors map as the Rust SDK's
 * `export.rs` maps them; an exception the plugin did not mean becomes a terminal error naming
 * the object, never a trap.
 *
 * Nothing here imports the world, so it runs natively too (its tests give it stand-in imports).
 *
 * @module
 */

import type { Action, Outcome } from "../action.js";
import { Context, type Host } from "../context.js";
import { ReconcileError, messageOf } from "../error.js";
import type { Gvk } from "../gvk.js";
import { withLogSink } from "../logging.js";
import type { Declared, Mapping } from "../manifest.js";
import { keyOf, type KubeObject } from "../objects.js";
import { parseSettings, runReconcile } from "../reconciler.js";
import { Request, type ActionResult } from "../request.js";
import { Float, Rows, SqlError, type Column, type SqlValue, type Statement } from "../sql.js";
import { Admission, defaultJson, isValidator, validateJson, type Plugin, type Verdict } from "../webhooks.js";
import * as wire from "./wire.js";

/** What a plugin's entry module exports: the world's two interfaces. */
export interface PluginExports {
  reconciler: wire.ReconcilerExport;
  webhooks: wire.WebhooksExport;
}

/** The world's imports, as componentize-js binds them (errors thrown with a `payload`). */
export interface Imports {
  log(level: wire.Level, message: string, fields: Array<[string, string]>): void;
  get(kind: wire.Gvk, namespace: string, name: string): string | undefined;
  list(kind: wire.Gvk, namespace: string, labels: string): string[];
  children(kind: wire.Gvk, namespace: string, ownerUid: string): string[];
  execute(database: string, statements: wire.Statement[]): wire.Rows[];
}

/** The world's exports for `plugin`, its services and logs going to `host`. */
export function exportWith<T extends KubeObject, S>(host: Host, plugin: Plugin<T, S>): PluginExports {
  const call = <R>(body: () => R): R => withLogSink((level, message, fields) => host.log(level, message, fields), body);
  return {
    reconciler: {
      manifest: (settings) => call(() => manifest(plugin, settings)),
      reconcile: (request) => call(() => reconcile(host, plugin, request)),
    },
    webhooks: {
      declare: (settings) => call(() => declare(plugin, settings)),
      validate: (request) => call(() => validate(host, plugin, request)),
      mutate: (request) => call(() => mutate(host, plugin, request)),
      convert: (settings, apiVersion, objects) => call(() => convert(plugin, settings, apiVersion, objects)),
    },
  };
}

/**
 * The host a build-time reconcile sees ({@link warmUp}): nothing cached, no database, logs
 * dropped. The component's imports cannot be called before its snapshot.
 */
const NOTHING: Host = {
  log: () => {},
  get: () => undefined,
  list: () => [],
  children: () => [],
  sql: () => {
    throw new SqlError("no database while the component is built", undefined, false);
  },
};

/**
 * Reconciles each of the plugin's {@link Reconciler.warmUp} samples once, against a host that
 * answers nothing, so that the snapshot the component is built from holds the code they ran
 * compiled. A sample that fails, or a `warmUp` that throws, warms less and fails nothing.
 * Returns how many samples were reconciled without an error.
 */
export function warmUp<T extends KubeObject, S>(plugin: Plugin<T, S>): number {
  let samples: readonly T[];
  try {
    samples = plugin.warmUp?.() ?? [];
  } catch {
    return 0;
  }
  const { reconciler } = exportWith(NOTHING, plugin);
  let reconciled = 0;
  for (const object of samples) {
    try {
      reconciler.reconcile({
        namespace: object.metadata?.namespace ?? "",
        name: object.metadata?.name ?? "",
        object: JSON.stringify(object),
        deleting: false,
        settings: "",
        now: { seconds: 0n, nanoseconds: 0 },
        previous: [],
      });
      reconciled += 1;
    } catch {
      // Less warmed; the build goes on.
    }
  }
  return reconciled;
}

/**
 * Builds, before the snapshot, what SpiderMonkey otherwise builds on first use: a standard
 * class (its constructor, prototype and methods, each name atomized) is created the first time
 * code names it, and every call starts from the build's snapshot, so a class first named during
 * a call was created again in every call. A `perf` profile of the TypeScript seed put about a
 * fifth of a call there: `Promise` for the export's async wrapper, `DataView` and `TextDecoder`
 * in the bindings, `SavedFrame` for the stack the engine records with each promise. The
 * bindings componentize-js generates run in a global of their own, so this resolves the
 * classes of each global that `functions` (the world's imports, made there) belong to, and of
 * this module's. Looking up each global's descriptor resolves it without calling a getter; an
 * async function that awaits builds the promise machinery. Returns how many globals it
 * resolved.
 */
export function resolveGlobals(functions: readonly unknown[]): number {
  const globals = new Set<object>([globalThis]);
  for (const f of functions) {
    const global = globalOf(f);
    if (global !== undefined) globals.add(global);
  }
  for (const global of globals) {
    for (const name of Object.getOwnPropertyNames(global)) Object.getOwnPropertyDescriptor(global, name);
    try {
      const inRealm = functionConstructorOf(global);
      void inRealm("return (async () => { await undefined; })()")();
    } catch {
      // No code from strings in this engine: the classes above are still resolved.
    }
  }
  return globals.size;
}

type FunctionConstructor = (body: string) => () => unknown;

function functionConstructorOf(global: object): FunctionConstructor {
  return (global as { Function: FunctionConstructor }).Function;
}

/** The global a function was made in: its realm's `Function` evaluates `globalThis` there. */
function globalOf(f: unknown): object | undefined {
  if (typeof f !== "function") return undefined;
  try {
    const realmFunction = (Object.getPrototypeOf(f) as { constructor: FunctionConstructor }).constructor;
    const global = realmFunction("return globalThis")();
    return typeof global === "object" && global !== null ? global : undefined;
  } catch {
    return undefined;
  }
}

/**
 * An exception as a message: an `Error`'s message, its kind in front unless it is a plain
 * `Error` (so a `TypeError` from a bug reads as one).
 */
function describe(thrown: unknown): string {
  if (thrown instanceof Error && thrown.name !== "Error" && !(thrown instanceof ReconcileError)) {
    return `${thrown.name}: ${thrown.message}`;
  }
  return messageOf(thrown);
}

/** Runs `body`, failing the export with the message of whatever it throws. */
function failingWithMessage<R>(body: () => R): R {
  try {
    return body();
  } catch (e) {
    throw new wire.Failure(describe(e));
  }
}

function manifest<T extends KubeObject, S>(plugin: Plugin<T, S>, settings: string): wire.Manifest {
  return failingWithMessage(() => toWireManifest(plugin.manifest(parseSettings(plugin, settings)).declared));
}

function reconcile<T extends KubeObject, S>(host: Host, plugin: Plugin<T, S>, r: wire.Request): wire.Outcome {
  const request = new Request(r.namespace, r.name, r.object, r.deleting, dateOf(r.now), r.previous.map(fromWireResult));
  let settings: S;
  try {
    settings = parseSettings(plugin, r.settings);
  } catch (e) {
    throw new wire.Failure<wire.Error>({ message: messageOf(e), retryable: false });
  }
  try {
    return toWireOutcome(runReconcile(plugin, request, new Context(host, settings, request)));
  } catch (e) {
    throw new wire.Failure(errorOf(e, request.key()));
  }
}

/** A reconcile's exception as the contract's error, as the Rust SDK maps its errors. */
export function errorOf(thrown: unknown, key: string): wire.Error {
  const error =
    thrown instanceof ReconcileError
      ? thrown
      : thrown instanceof SqlError
        ? thrown.toReconcileError()
        : ReconcileError.terminal(`${key}: reconcile threw ${describe(thrown)}`);
  return { message: error.message, retryable: error.retryable };
}

function declare<T extends KubeObject, S>(plugin: Plugin<T, S>, settings: string): wire.Declaration {
  return failingWithMessage(() => {
    const declared = plugin.manifest(parseSettings(plugin, settings)).declared.webhooks;
    const implemented: Array<[string, boolean, boolean]> = [
      ["validate", declared.validates.length > 0, isValidator(plugin)],
      ["default", declared.defaults, typeof plugin.default === "function"],
      ["convert", declared.converts.length > 0, typeof plugin.convert === "function"],
    ];
    for (const [name, wanted, served] of implemented) {
      if (wanted && !served) {
        throw new Error(`the manifest declares a \`${name}\` webhook that the reconciler does not implement`);
      }
    }
    return { validates: [...declared.validates], defaults: declared.defaults, converts: [...declared.converts] };
  });
}

/** A webhook the plugin does not implement. */
export function unserved(webhook: string): string {
  return `this plugin does not serve a \`${webhook}\` webhook`;
}

/** The admission context of a request (its key and object, settings, clock and caller). */
function admission<T extends KubeObject, S>(host: Host, plugin: Plugin<T, S>, r: wire.AdmissionRequest): Admission<S> {
  const settings = parseSettings(plugin, r.settings);
  const request = new Request(r.namespace, r.name, r.object ?? r.oldObject, false, dateOf(r.now));
  const user = { username: r.userInfo.username, uid: r.userInfo.uid, groups: [...r.userInfo.groups] };
  return new Admission(host, settings, request, r.operation, r.subresource, user, r.dryRun);
}

function answer(verdict: Verdict, patched?: string): wire.AdmissionResponse {
  if (verdict.allowed) return { allowed: true, message: "", code: 200, warnings: verdict.warnings, patched };
  const { message, code, warnings } = verdict.denied;
  return { allowed: false, message, code, warnings, patched: undefined };
}

function validate<T extends KubeObject, S>(
  host: Host,
  plugin: Plugin<T, S>,
  r: wire.AdmissionRequest,
): wire.AdmissionResponse {
  if (!isValidator(plugin)) throw new wire.Failure(unserved("validate"));
  const ctx = failingWithMessage(() => admission(host, plugin, r));
  const key = keyOf(r.namespace, r.name);
  return answer(failingWithKey(key, "validate", () => validateJson(plugin, ctx, r.object, r.oldObject)));
}

function mutate<T extends KubeObject, S>(
  host: Host,
  plugin: Plugin<T, S>,
  r: wire.AdmissionRequest,
): wire.AdmissionResponse {
  if (typeof plugin.default !== "function") throw new wire.Failure(unserved("default"));
  const ctx = failingWithMessage(() => admission(host, plugin, r));
  const json = r.object;
  if (json === undefined) return answer({ allowed: true, warnings: [] });
  const key = keyOf(r.namespace, r.name);
  const defaulted = failingWithKey(key, "default", () => defaultJson(plugin, ctx, json));
  if (!defaulted.allowed) return answer(defaulted);
  const patched = defaulted.patched === undefined ? undefined : JSON.stringify(defaulted.patched);
  return answer({ allowed: true, warnings: defaulted.warnings }, patched);
}

/** Runs a webhook's decision, failing the call with the object's key when it throws. */
function failingWithKey<R>(key: string, webhook: string, body: () => R): R {
  try {
    return body();
  } catch (e) {
    throw new wire.Failure(`${key === "" ? "the object" : key}: ${webhook} threw ${describe(e)}`);
  }
}

function convert<T extends KubeObject, S>(
  plugin: Plugin<T, S>,
  settings: string,
  apiVersion: string,
  objects: string[],
): string[] {
  const converter = plugin.convert;
  if (typeof converter !== "function") throw new wire.Failure(unserved("convert"));
  return failingWithMessage(() => {
    const parsed = parseSettings(plugin, settings);
    return objects.map((json) => {
      const object = JSON.parse(json) as Record<string, unknown>;
      return JSON.stringify(converter.call(plugin, object, apiVersion, parsed));
    });
  });
}

/** The host's clock as a `Date` (to the millisecond). */
export function dateOf(t: wire.Timestamp): Date {
  return new Date(Number(t.seconds) * 1000 + Math.floor(t.nanoseconds / 1_000_000));
}

function toWireGvk(kind: Gvk): wire.Gvk {
  return { group: kind.group, version: kind.version, kind: kind.kind };
}

function toWireMapping(mapping: Mapping): wire.Mapping {
  switch (mapping.type) {
    case "label":
    case "annotation":
      return { tag: mapping.type, val: mapping.name };
    default:
      return { tag: mapping.type };
  }
}

/** A manifest on the wire. */
export function toWireManifest(m: Declared): wire.Manifest {
  return {
    name: m.name,
    version: m.version,
    watches: {
      kind: toWireGvk(m.watches.kind),
      selector: { namespaces: [...m.watches.selector.namespaces], labels: m.watches.selector.labels },
      predicates: [...m.watches.predicates],
    },
    owns: m.owns.map(toWireGvk),
    reads: m.reads.map((r) => ({
      kind: toWireGvk(r.kind),
      selector: { namespaces: [...r.selector.namespaces], labels: r.selector.labels },
      trigger: r.trigger === undefined ? undefined : toWireMapping(r.trigger),
    })),
    writes: m.writes.map(toWireGvk),
    capabilities: [...m.capabilities],
  };
}

function toWireAction(a: Action): wire.Action {
  switch (a.type) {
    case "apply":
      return { tag: "apply", val: a.object };
    case "patch":
      return { tag: "patch", val: { target: { ...a.target }, body: { tag: a.body.type, val: a.body.patch } } };
    case "delete": {
      const propagation = a.propagation.toLowerCase() as "background" | "foreground" | "orphan";
      return { tag: "delete", val: { target: { ...a.target }, propagation } };
    }
    case "update-status":
      return { tag: "update-status", val: a.status };
    case "add-finalizer":
    case "remove-finalizer":
      return { tag: a.type, val: a.finalizer };
    case "emit-event": {
      const { type, reason, note, action } = a.event;
      return { tag: "emit-event", val: { type: type === "Warning" ? "warning" : "normal", reason, note, action } };
    }
    case "children":
      return { tag: "children", val: { kind: toWireGvk(a.kind), objects: [...a.objects] } };
  }
}

/** An outcome on the wire. */
export function toWireOutcome(o: Outcome): wire.Outcome {
  return {
    actions: o.actions.map(toWireAction),
    bestEffort: Uint32Array.from(o.bestEffort),
    requeueAfterMs: o.requeueAfterMs === undefined ? undefined : BigInt(o.requeueAfterMs),
  };
}

/** What one action of the previous reconcile did, in the SDK's terms. */
export function fromWireResult(r: wire.ActionResult): ActionResult {
  switch (r.status.tag) {
    case "failed":
      const failure = { ...r.status.val, target: { ...r.status.val.target } };
      return { index: r.index, status: { type: "failed", failure } };
    default:
      return { index: r.index, status: { type: r.status.tag } };
  }
}

/** A thrown import error's payload, or its message. */
function payloadOf(thrown: unknown): unknown {
  if (thrown !== null && typeof thrown === "object" && Object.prototype.hasOwnProperty.call(thrown, "payload")) {
    return (thrown as { payload: unknown }).payload;
  }
  return messageOf(thrown);
}

/** A cache import's answer, its error rethrown as an `Error` carrying the host's message. */
function asked<R>(ask: () => R): R {
  try {
    return ask();
  } catch (e) {
    const payload = payloadOf(e);
    throw new Error(typeof payload === "string" ? payload : JSON.stringify(payload));
  }
}

/** The {@link Host} over the world's imports. */
export function hostOver(imports: Imports): Host {
  return {
    log: (level, message, fields) => imports.log(level, message, fields),
    get: (kind, namespace, name) => asked(() => imports.get(toWireGvk(kind), namespace, name)),
    list: (kind, namespace, labels) => asked(() => imports.list(toWireGvk(kind), namespace, labels)),
    children: (kind, namespace, uid) => asked(() => imports.children(toWireGvk(kind), namespace, uid)),
    sql: (database, statements) => {
      let rows: wire.Rows[];
      try {
        rows = imports.execute(database, statements.map(toWireStatement));
      } catch (e) {
        throw sqlErrorOf(payloadOf(e));
      }
      return rows.map((r) => new Rows([...r.columns], r.rows.map((row) => row.map(fromWireValue)), Number(r.affected)));
    },
  };
}

function sqlErrorOf(payload: unknown): SqlError {
  if (payload !== null && typeof payload === "object" && "message" in payload) {
    const p = payload as wire.SqlError;
    return new SqlError(p.message, p.sqlstate, p.transient);
  }
  return new SqlError(String(payload), undefined, false);
}

function toWireStatement(s: Statement): wire.Statement {
  return { query: s.query, identifiers: [...s.identifiers], params: s.params.map(toWireValue) };
}

/** A bound value on the wire: a safe-integer `number` as an integer, other numbers as floats. */
export function toWireValue(v: SqlValue): wire.SqlValue {
  if (v === null) return { tag: "null" };
  if (v instanceof Float) return { tag: "float", val: v.value };
  switch (typeof v) {
    case "boolean":
      return { tag: "boolean", val: v };
    case "bigint":
      return { tag: "integer", val: v };
    case "number":
      return Number.isSafeInteger(v) ? { tag: "integer", val: BigInt(v) } : { tag: "float", val: v };
    default:
      return { tag: "text", val: v };
  }
}

function fromWireValue(v: wire.SqlValue): Column {
  return v.tag === "null" ? null : v.val;
}
