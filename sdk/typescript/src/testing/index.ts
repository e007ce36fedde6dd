/**
 * `wasmctrl/testing`: a native stand-in for the host, so `node --test` tests a plugin without
 * wasm, as the Rust SDK's `testing::Harness` does.
 *
 * It makes the host's own scope checks (a port of `wasmctrl-core`): a cache read or an action
 * outside the kinds, namespaces and labels the manifest declares (narrowed by
 * {@link Harness.namespaces}, as an operator's config would) fails the reconcile with a terminal
 * error naming what was refused, as it fails on the host. SQL goes to a stand-in function
 * ({@link Harness.sql}); every statement is recorded, and a database the manifest did not declare
 * is refused as the host refuses it.
 *
 * ```ts
 * const h = new Harness(new MyPlugin()).now("2026-01-01T00:00:00Z").object(cachedPod);
 * const outcome = h.reconcile(myObject);
 * assert.equal(outcome.actions.length, 1);
 * ```
 *
 * @module
 */

import type { Action, Outcome } from "../action.js";
import { Context, type Host } from "../context.js";
import { bestEffort, checkAction, MalformedAction, type Act, type Reconciled } from "../core/action.js";
import { scopeOf } from "../core/declaration.js";
import { Refusal, type Reads, type Scope } from "../core/scope.js";
import { LabelSelector } from "../core/selector.js";
import { ReconcileError, messageOf } from "../error.js";
import type { Gvk } from "../gvk.js";
import { withLogSink, type Level } from "../logging.js";
import type { Declared, Operation } from "../manifest.js";
import type { KubeObject } from "../objects.js";
import { parseSettings, runReconcile } from "../reconciler.js";
import { Request } from "../request.js";
import { SqlError, type Rows, type Statement } from "../sql.js";
import {
  Admission,
  defaultJson,
  isValidator,
  validateJson,
  type Denied,
  type JsonObject,
  type Plugin,
  type Verdict,
  type Warnings,
} from "../webhooks.js";

/** Answers the plugin's SQL in tests: one `Rows` per statement, or a thrown `SqlError`. */
export type SqlStandIn = (database: string, statements: readonly Statement[]) => Rows[];

/** One line a plugin logged. */
export interface LogLine {
  level: Level;
  message: string;
  fields: Array<[string, string]>;
}

/** A defaulter's result as a test reads it: the object as the host's patch leaves it, or the refusal. */
export type DefaultedObject = { allowed: true; object: JsonObject; warnings: Warnings } | { allowed: false; denied: Denied };

type Stored = { namespace: string; name: string; object: KubeObject };

const kindKey = (apiVersion: string, kind: string): string => `${apiVersion}\u0000${kind}`;

/**
 * A stand-in host: an in-memory cache, captured logs, fixed settings and clock, and SQL answered
 * by a function. The builder methods change the harness and return it.
 */
export class Harness<T extends KubeObject, S> {
  private readonly objects = new Map<string, Stored[]>();
  private readonly logged: LogLine[] = [];
  private readonly ran: Array<[string, Statement]> = [];
  private settingsJson = "";
  private clock: Date | undefined;
  private narrowed: string[] | undefined;
  private standIn: SqlStandIn | undefined;
  /** The scope of the call being run, and the first read it refused. */
  private scope: Scope | undefined;
  private refused: Refusal | undefined;

  constructor(private readonly plugin: Plugin<T, S>) {}

  /** Operator settings handed to `manifest` and `reconcile` (any JSON value). */
  settings(value: unknown): this {
    this.settingsJson = JSON.stringify(value) ?? "";
    return this;
  }

  /** The time the host reports: an RFC 3339 string (`2026-01-01T00:00:00Z`) or a `Date`. */
  now(now: string | Date): this {
    const at = typeof now === "string" ? new Date(Date.parse(now)) : now;
    if (Number.isNaN(at.getTime())) throw new Error(`Harness.now(${JSON.stringify(now)}): not an RFC 3339 time`);
    this.clock = at;
    return this;
  }

  /** Narrows the plugin's namespaces to these, as an operator's config does. */
  namespaces(namespaces: readonly string[]): this {
    this.narrowed = [...namespaces];
    return this;
  }

  /** Answers SQL with `standIn` (for example from an in-memory table the test keeps). */
  sql(standIn: SqlStandIn): this {
    this.standIn = standIn;
    return this;
  }

  /** Puts an object (with apiVersion, kind, metadata.name) in the stand-in cache. */
  object(object: KubeObject): this {
    const key = kindKey(object.apiVersion ?? "", object.kind ?? "");
    const namespace = object.metadata?.namespace ?? "";
    const name = object.metadata?.name ?? "";
    const stored = (this.objects.get(key) ?? []).filter((s) => s.namespace !== namespace || s.name !== name);
    stored.push({ namespace, name, object: JSON.parse(JSON.stringify(object)) as KubeObject });
    stored.sort((a, b) => compare(a.namespace, b.namespace) || compare(a.name, b.name));
    this.objects.set(key, stored);
    return this;
  }

  /** Every statement the plugin ran, with its database, in order. */
  statements(): Array<[string, Statement]> {
    return [...this.ran];
  }

  /** Everything logged so far. */
  logs(): LogLine[] {
    return this.logged.map((l) => ({ ...l, fields: [...l.fields] }));
  }

  /** The plugin's manifest for the configured settings; throws the host's message when they do not parse. */
  manifest(): Declared {
    return this.plugin.manifest(this.parsedSettings()).declared;
  }

  /** Reconciles an existing object, as the host would on a watch event. Throws a `ReconcileError`. */
  reconcile(object: T | KubeObject): Outcome {
    return this.run(Request.forObject(object));
  }

  /** Reconciles the key of an object that no longer exists. */
  reconcileDeleted(namespace: string, name: string): Outcome {
    return this.run(Request.forDeleted(namespace, name));
  }

  /**
   * Reconciles a hand-built request (settings and clock from the harness), failing as the host
   * would when the plugin reads or asks for anything outside its scope.
   */
  run(given: Request): Outcome {
    const request = this.clock === undefined ? given : given.at(this.clock);
    const settings = terminalOnThrow(() => this.parsedSettings());
    const declared = terminalOnThrow(() => this.plugin.manifest(settings).declared);
    const scope = terminalOnThrow(() => this.scopeOf(declared));
    if (!scope.reconcilesIn(request.namespace)) {
      const where = scope.namespaces.toString();
      throw ReconcileError.terminal(
        `test harness: ${request.key()} is outside the plugin's namespaces ${where}; the host never queues it`,
      );
    }
    const outcome = this.underScope(scope, () =>
      runReconcile(this.plugin, request, new Context(this.host(), settings, request)),
    );
    const refused = this.takeRefusal();
    if (refused !== undefined) throw ReconcileError.terminal(`cache read ${refused.message}`);
    // An uncaught SqlError fails the reconcile as the export glue fails it; other exceptions
    // reach the test as they are (the host reports them as a terminal error naming the object).
    if (outcome.threw) throw outcome.error instanceof SqlError ? outcome.error.toReconcileError() : outcome.error;
    this.checkOutcome(scope, request, outcome.value);
    return outcome.value;
  }

  /**
   * Runs the validating webhook natively, as the host would: `object` the object written (none
   * for a delete), `old` the one stored (none for a create). Throws as the host would refuse
   * when the manifest does not validate the operation or the plugin reads outside its scope.
   */
  validate(operation: Operation, object?: T | KubeObject, old?: T | KubeObject): Verdict {
    const settings = this.parsedSettings();
    const declared = this.plugin.manifest(settings).declared;
    if (!declared.webhooks.validates.includes(operation)) {
      throw new Error(`test harness: the manifest does not validate ${operation}`);
    }
    if (!isValidator(this.plugin)) throw new Error("test harness: the plugin implements no validator");
    const [json, oldJson] = [object, old].map((o) => (o === undefined ? undefined : JSON.stringify(o)));
    return this.admitting(declared, settings, operation, json ?? oldJson, (ctx) =>
      validateJson(this.plugin, ctx, json, oldJson),
    );
  }

  /** Runs the defaulting webhook natively on a create of `object`: the object as the host's patch would leave it. */
  defaulted(object: T | KubeObject): DefaultedObject {
    const settings = this.parsedSettings();
    const declared = this.plugin.manifest(settings).declared;
    if (!declared.webhooks.defaults) throw new Error("test harness: the manifest does not declare a defaulter");
    const json = JSON.stringify(object);
    const result = this.admitting(declared, settings, "create", json, (ctx) => defaultJson(this.plugin, ctx, json));
    if (!result.allowed) return result;
    const defaulted = result.patched ?? (JSON.parse(json) as JsonObject);
    return { allowed: true, object: defaulted, warnings: result.warnings };
  }

  /** Converts `objects` to `apiVersion` natively, as the conversion webhook would. */
  convert(objects: readonly JsonObject[], apiVersion: string): JsonObject[] {
    const settings = this.parsedSettings();
    const declared = this.plugin.manifest(settings).declared;
    const version = apiVersion.slice(apiVersion.lastIndexOf("/") + 1);
    if (!declared.webhooks.converts.includes(version)) {
      throw new Error(`test harness: the manifest does not convert to ${version}`);
    }
    const converter = this.plugin.convert;
    if (converter === undefined) throw new Error("test harness: the plugin implements no converter");
    const copy = (o: JsonObject): JsonObject => JSON.parse(JSON.stringify(o)) as JsonObject;
    return objects.map((o) => converter.call(this.plugin, copy(o), apiVersion, settings));
  }

  private parsedSettings(): S {
    return parseSettings(this.plugin, this.settingsJson);
  }

  private scopeOf(declared: Declared): Scope {
    const { watches } = declared;
    return scopeOf(
      {
        watched: watches.kind,
        namespaces: watches.selector.namespaces,
        labels: watches.selector.labels,
        owns: declared.owns,
        reads: declared.reads.map((r) => ({ kind: r.kind, namespaces: r.selector.namespaces, labels: r.selector.labels })),
        writes: declared.writes,
        capabilities: declared.capabilities,
      },
      this.narrowed,
    );
  }

  /** Runs a webhook's decision with an admission context over this harness, under the plugin's scope. */
  private admitting<R>(
    declared: Declared,
    settings: S,
    operation: Operation,
    json: string | undefined,
    decide: (ctx: Admission<S>) => R,
  ): R {
    const scope = this.scopeOf(declared);
    const request = admissionRequest(json);
    const now = this.clock === undefined ? request : request.at(this.clock);
    const user = { username: "", uid: "", groups: [] };
    const ctx = new Admission(this.host(), settings, now, operation, "", user, false);
    const decided = this.underScope(scope, () => decide(ctx));
    const refused = this.takeRefusal();
    if (refused !== undefined) throw new Error(`cache read ${refused.message}`);
    if (decided.threw) throw decided.error;
    return decided.value;
  }

  /** Runs `body` with `scope` in force and log lines captured; what it returned or threw. */
  private underScope<R>(scope: Scope, body: () => R): { threw: false; value: R } | { threw: true; error: unknown } {
    this.scope = scope;
    this.refused = undefined;
    const capture = (level: Level, message: string, fields: Array<[string, string]>): void => {
      this.logged.push({ level, message, fields });
    };
    try {
      return { threw: false, value: withLogSink(capture, body) };
    } catch (error) {
      return { threw: true, error };
    } finally {
      this.scope = undefined;
    }
  }

  private takeRefusal(): Refusal | undefined {
    const refused = this.refused;
    this.refused = undefined;
    return refused;
  }

  /** The host's checks of an outcome: best-effort positions, then each action against the scope. */
  private checkOutcome(scope: Scope, request: Request, outcome: Outcome): void {
    terminalOnThrow(() => bestEffort(outcome.bestEffort, outcome.actions.length));
    const exists = request.object !== undefined;
    const reconciled: Reconciled = { namespace: request.namespace, name: request.name, exists };
    outcome.actions.forEach((action, index) => {
      try {
        checkAction(scope, reconciled, act(action, reconciled.exists));
      } catch (e) {
        if (!(e instanceof Refusal || e instanceof MalformedAction)) throw e;
        throw ReconcileError.terminal(`action ${index}: ${e.message}`);
      }
    });
  }

  /** The host services, over this harness's cache, logs and SQL stand-in, under the current scope. */
  private host(): Host {
    return {
      log: (level, message, fields) => {
        this.logged.push({ level, message, fields: [...fields] });
      },
      get: (kind, namespace, name) => {
        const reads = this.checkRead("get", kind, namespace, name);
        const found = this.stored(kind).find((s) => s.namespace === namespace && s.name === name);
        // The host's caches hold only what the plugin declared: an object outside its selector is not found.
        if (found === undefined || !reads.admits(namespace, found.object.metadata?.labels)) return undefined;
        return JSON.stringify(found.object);
      },
      list: (kind, namespace, labels) => {
        const selector = LabelSelector.parse(labels);
        const reads = this.checkRead("list", kind, namespace, "");
        const refusal = reads.selectorRefusal(selector);
        if (refusal !== undefined) throw this.refuse(new Refusal("list", kind, namespace, "", refusal));
        return this.visible(kind, namespace, reads, (o) => selector.matches(o.metadata?.labels));
      },
      children: (kind, namespace, ownerUid) => {
        const reads = this.checkRead("list", kind, namespace, "");
        return this.visible(kind, namespace, reads, (o) => controlledBy(o, ownerUid));
      },
      sql: (database, statements) => this.runSql(database, statements),
    };
  }

  private stored(kind: Gvk): Stored[] {
    return this.objects.get(kindKey(kind.apiVersion(), kind.kind)) ?? [];
  }

  private visible(kind: Gvk, namespace: string, reads: Reads, keep: (o: KubeObject) => boolean): string[] {
    return this.stored(kind)
      .filter((s) => namespace === "" || s.namespace === namespace)
      .filter((s) => keep(s.object) && reads.admits(s.namespace, s.object.metadata?.labels))
      .map((s) => JSON.stringify(s.object));
  }

  /** Checks a read against the running plugin's scope, recording a refusal. */
  private checkRead(verb: "get" | "list", kind: Gvk, namespace: string, name: string): Reads {
    if (this.scope === undefined) throw new Error("test harness: the cache is read only during reconcile");
    try {
      return this.scope.checkRead(verb, kind, namespace, name);
    } catch (e) {
      if (e instanceof Refusal) throw this.refuse(e);
      throw e;
    }
  }

  private refuse(refusal: Refusal): Refusal {
    this.refused ??= refusal;
    return refusal;
  }

  private runSql(database: string, statements: readonly Statement[]): Rows[] {
    if (this.scope === undefined || !this.scope.hasCapability(`sql:${database}`)) {
      throw new SqlError(`the manifest does not declare the capability sql:${database}`, undefined, false);
    }
    this.ran.push(...statements.map((s): [string, Statement] => [database, s]));
    if (this.standIn === undefined) {
      throw new SqlError("test harness: no SQL stand-in; give one with Harness.sql", undefined, false);
    }
    return this.standIn(database, statements);
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Runs `body`, turning what it throws into a terminal reconcile error with its message. */
function terminalOnThrow<R>(body: () => R): R {
  try {
    return body();
  } catch (e) {
    throw ReconcileError.terminal(messageOf(e));
  }
}

/** The request behind an admission of the object `json` (its key and the object). */
function admissionRequest(json: string | undefined): Request {
  if (json === undefined) return Request.forDeleted("", "");
  const object = JSON.parse(json) as KubeObject;
  const meta = object.metadata ?? {};
  return new Request(meta.namespace ?? "", meta.name ?? "", json, false);
}

/** Whether `ownerUid` controls `object`: an owner reference with `controller: true` and that uid. */
function controlledBy(object: KubeObject, ownerUid: string): boolean {
  return (object.metadata?.ownerReferences ?? []).some((r) => r.controller === true && r.uid === ownerUid);
}

/** An action as the host parses it before checking it. */
function act(action: Action, exists: boolean): Act {
  const parse = (json: string): unknown => {
    try {
      return JSON.parse(json);
    } catch (e) {
      throw new MalformedAction(`invalid JSON: ${messageOf(e)}`);
    }
  };
  switch (action.type) {
    case "apply":
      return { verb: "apply", object: parse(action.object) };
    case "children":
      return { verb: "children", kind: action.kind, objects: action.objects.map(parse) };
    case "patch":
    case "delete":
      return { verb: action.type, target: action.target };
    case "update-status":
      return { verb: "update-status", status: exists ? parse(action.status) : null };
    case "add-finalizer":
    case "remove-finalizer":
      return { verb: action.type, finalizer: action.finalizer };
    case "emit-event":
      return { verb: "emit-event", reason: action.event.reason, action: action.event.action };
  }
}
