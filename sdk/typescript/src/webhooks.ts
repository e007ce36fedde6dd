/**
 * Webhooks for the kind a plugin reconciles, answered from the same sandbox: validation and
 * defaulting shaped like controller-runtime's `CustomValidator` and `CustomDefaulter`, and CRD
 * conversion with kubebuilder's hub and spokes ({@link HubAndSpoke}).
 *
 * A plugin declares what it serves in its manifest (`validating`, `defaulting`, `converting`)
 * and implements the matching methods on its reconciler. Each call is pure: it decides, with no
 * actions; it may read the cache as the manifest declares.
 *
 * @module
 */

import { Context, type Host } from "./context.js";
import { messageOf } from "./error.js";
import type { Operation } from "./manifest.js";
import type { KubeObject } from "./objects.js";
import { decodeJson, type Reconciler } from "./reconciler.js";
import type { Request } from "./request.js";

/** Warnings for the client (kubectl prints each as `Warning: ...`). */
export type Warnings = string[];

/**
 * A refused request: the client sees `admission webhook "<name>" denied the request: <message>`
 * with `code` (403 unless given). Throw it from a validator or defaulter.
 */
export class Denied extends Error {
  constructor(
    message: string,
    /** The HTTP code the refusal answers with (422 for an invalid object, say). */
    readonly code = 403,
    /** Warnings sent with the refusal. */
    readonly warnings: Warnings = [],
  ) {
    super(message);
    this.name = "Denied";
  }
}

/** Who sent an admission request. */
export interface UserInfo {
  /** The user's name (`system:serviceaccount:<ns>:<name>` for a ServiceAccount). */
  username: string;
  uid: string;
  groups: string[];
}

/**
 * An admission request as a validator or defaulter sees it: the operation, who asked, and the
 * context of a reconcile (settings, clock, cache).
 */
export class Admission<S> extends Context<S> {
  constructor(
    host: Host,
    settings: S,
    request: Request,
    /** What is being done. */
    readonly operation: Operation,
    /** The subresource written (`status`), or empty. */
    readonly subresource: string,
    /** Who asked. */
    readonly user: UserInfo,
    /** A dry run: nothing the request implies is stored, so a webhook must have no side effects. */
    readonly dryRun: boolean,
  ) {
    super(host, settings, request);
  }
}

/**
 * Validates the objects of the reconciled kind, as controller-runtime's `CustomValidator`: one
 * method per operation, each allowing when left out. Return warnings (or nothing) to allow;
 * throw {@link Denied} to refuse.
 */
export interface Validator<T extends KubeObject, S> {
  /** A create of `object`. */
  validateCreate?(object: T, ctx: Admission<S>): Warnings | void;
  /** An update from `old` (as stored) to `object`. */
  validateUpdate?(old: T, object: T, ctx: Admission<S>): Warnings | void;
  /** A delete of `object` (as stored). */
  validateDelete?(object: T, ctx: Admission<S>): Warnings | void;
}

/**
 * Defaults the objects of the reconciled kind on create and update, as controller-runtime's
 * `CustomDefaulter`: it changes `object` in place, and the host answers the JSON Patch of what
 * it changed. Return warnings (or nothing); throw {@link Denied} to refuse.
 */
export interface Defaulter<T extends KubeObject, S> {
  default(object: T, ctx: Admission<S>): Warnings | void;
}

/** A JSON object. */
export type JsonObject = Record<string, unknown>;

/** Converts objects of the reconciled kind (a CRD with several versions) between versions. */
export interface Converter<S> {
  /** `object` (at any version the manifest declares) as `apiVersion`; throw to fail the review. */
  convert(object: JsonObject, apiVersion: string, settings: S): JsonObject;
}

/** A reconciler and the webhooks it implements: what a plugin exports. */
export type Plugin<T extends KubeObject, S> = Reconciler<T, S> &
  Validator<T, S> &
  Partial<Defaulter<T, S>> &
  Partial<Converter<S>>;

/** A validator's or defaulter's decision. */
export type Verdict = { allowed: true; warnings: Warnings } | { allowed: false; denied: Denied };

/** Whether the plugin implements any of the validator's methods. */
export function isValidator<T extends KubeObject, S>(plugin: Plugin<T, S>): boolean {
  return [plugin.validateCreate, plugin.validateUpdate, plugin.validateDelete].some((m) => typeof m === "function");
}

/** The verdict of a decision that returned warnings or threw. Other exceptions propagate. */
function verdictOf(decide: () => Warnings | void): Verdict {
  try {
    return { allowed: true, warnings: decide() ?? [] };
  } catch (e) {
    if (e instanceof Denied) return { allowed: false, denied: e };
    throw e;
  }
}

/** The object of `json` as `T`, or the 400 refusal controller-runtime answers when it does not decode. */
function decoded<T extends KubeObject, S>(plugin: Plugin<T, S>, json: string | undefined): T {
  if (json === undefined) throw new Denied("the object does not decode: the request carries none", 400);
  try {
    return decodeJson(plugin, json);
  } catch (e) {
    throw new Denied(`the object does not decode: ${messageOf(e)}`, 400);
  }
}

/**
 * A validator's verdict on a request whose objects are JSON (`object` as written, `old` as
 * stored): the method its operation names.
 */
export function validateJson<T extends KubeObject, S>(
  plugin: Plugin<T, S>,
  ctx: Admission<S>,
  object: string | undefined,
  old: string | undefined,
): Verdict {
  return verdictOf(() => {
    switch (ctx.operation) {
      case "create":
        return plugin.validateCreate?.(decoded(plugin, object), ctx);
      case "update":
        return plugin.validateUpdate?.(decoded(plugin, old), decoded(plugin, object), ctx);
      case "delete":
        return plugin.validateDelete?.(decoded(plugin, old), ctx);
      case "connect":
        return [];
    }
  });
}

/** A defaulter's result: the object with its changes (undefined when it changed nothing), or its refusal. */
export type Defaulted =
  | { allowed: true; patched: JsonObject | undefined; warnings: Warnings }
  | { allowed: false; denied: Denied };

/**
 * A defaulter's result on `json`: the original object with the defaulter's changes applied
 * (so fields a decoder drops are kept, as controller-runtime keeps them), or its refusal.
 */
export function defaultJson<T extends KubeObject, S>(plugin: Plugin<T, S>, ctx: Admission<S>, json: string): Defaulted {
  if (plugin.default === undefined) throw new Error("the plugin implements no defaulter");
  const original = JSON.parse(json) as JsonObject;
  let typed: T;
  try {
    typed = decoded(plugin, json);
  } catch (e) {
    if (e instanceof Denied) return { allowed: false, denied: e };
    throw e;
  }
  const before: unknown = JSON.parse(JSON.stringify(typed));
  const verdict = verdictOf(() => plugin.default?.(typed, ctx));
  if (!verdict.allowed) return verdict;
  const after: unknown = JSON.parse(JSON.stringify(typed));
  const changes = diff(before, after, []);
  if (changes.length === 0) return { allowed: true, patched: undefined, warnings: verdict.warnings };
  const patched = changes.reduce<unknown>((doc, change) => applyChange(doc, change), original) as JsonObject;
  return { allowed: true, patched, warnings: verdict.warnings };
}

/** One change between two JSON documents: the value at `path` set, or removed. */
type Change = { path: string[]; value: unknown } | { path: string[]; removed: true };

const isPlainObject = (v: unknown): v is JsonObject => v !== null && typeof v === "object" && !Array.isArray(v);

/** The changes that turn `before` into `after`: objects compared key by key, anything else whole. */
function diff(before: unknown, after: unknown, path: string[]): Change[] {
  if (isPlainObject(before) && isPlainObject(after)) {
    const removed = Object.keys(before)
      .filter((k) => !(k in after))
      .map((k): Change => ({ path: [...path, k], removed: true }));
    const changed = Object.keys(after).flatMap((k) => diff(before[k], after[k], [...path, k]));
    return [...removed, ...changed];
  }
  return JSON.stringify(before) === JSON.stringify(after) ? [] : [{ path, value: after }];
}

/** `doc` with `change` made (in place where it can be; objects created along the path). */
function applyChange(doc: unknown, change: Change): unknown {
  if (change.path.length === 0) return "removed" in change ? undefined : change.value;
  const root = isPlainObject(doc) ? doc : {};
  let node: JsonObject = root;
  for (const key of change.path.slice(0, -1)) {
    const next = node[key];
    node = isPlainObject(next) ? next : (node[key] = {});
  }
  const last = change.path[change.path.length - 1] as string;
  if ("removed" in change) delete node[last];
  else node[last] = change.value;
  return root;
}

/** How one spoke version converts to and from the hub, as kubebuilder's `Convertible`. */
export interface Spoke {
  /** This version's object as the hub's. */
  toHub(object: JsonObject): JsonObject;
  /** The hub's object as this version's. */
  fromHub(hub: JsonObject): JsonObject;
}

/**
 * Conversion through a hub, as kubebuilder lays it out: each spoke version converts to and from
 * the hub, so N versions need 2(N - 1) conversions, not N(N - 1). `convert` sets `apiVersion`
 * and keeps what the versions share (`kind`, `metadata`).
 */
export class HubAndSpoke {
  private readonly spokes = new Map<string, Spoke>();

  /** Conversions of `group`'s kind through the hub version `hub`. */
  constructor(
    private readonly group: string,
    private readonly hub: string,
  ) {}

  /** Adds the spoke `version`. */
  spoke(version: string, spoke: Spoke): this {
    this.spokes.set(version, spoke);
    return this;
  }

  /** `object` as `apiVersion`: to the hub from its own version, then from the hub. */
  convert(object: JsonObject, apiVersion: string): JsonObject {
    const from = this.versionOf(typeof object["apiVersion"] === "string" ? object["apiVersion"] : "");
    const to = this.versionOf(apiVersion);
    const { kind, metadata } = object;
    const hub = { ...this.step(from, "from", (s) => s.toHub(object), object), apiVersion: `${this.group}/${this.hub}` };
    const out: JsonObject = { ...this.step(to, "to", (s) => s.fromHub(hub), hub), apiVersion };
    if (kind !== undefined) out["kind"] = kind;
    if (metadata !== undefined) out["metadata"] = metadata;
    return out;
  }

  private versionOf(apiVersion: string): string {
    const slash = apiVersion.lastIndexOf("/");
    if (slash < 0 || apiVersion.slice(0, slash) !== this.group) {
      throw new Error(`${apiVersion} is not a version of ${this.group}`);
    }
    return apiVersion.slice(slash + 1);
  }

  /** The spoke's conversion of `version`, or `object` itself for the hub. */
  private step(
    version: string,
    direction: "from" | "to",
    convert: (s: Spoke) => JsonObject,
    object: JsonObject,
  ): JsonObject {
    const spoke = this.spokes.get(version);
    if (spoke !== undefined) return convert(spoke);
    if (version === this.hub) return object;
    throw new Error(`no conversion ${direction} ${version}`);
  }
}
