/**
 * {@link Reconciler}: what a plugin implements, and how the SDK runs it for one request: the
 * settings parsed, the object decoded, the declared finalizer handled (kube-runtime's
 * `finalizer()`), and the {@link Reconcile} event handed to the plugin.
 *
 * @module
 */

import { Action, Outcome } from "./action.js";
import type { Context } from "./context.js";
import { ReconcileError, messageOf } from "./error.js";
import type { Manifest } from "./manifest.js";
import { hasFinalizer, isDeleting, type KubeObject } from "./objects.js";
import type { Request } from "./request.js";

/** Settings of a plugin that reads them as plain JSON (or takes none). */
export type Settings = Readonly<Record<string, unknown>>;

/**
 * What a reconcile is asked to do with its key, as kube-runtime's `finalizer::Event` says it,
 * plus the key whose object is gone.
 */
export type Reconcile<T> =
  /** The object exists and is not being deleted (and holds the declared finalizer, if any). */
  | { type: "apply"; object: T }
  /** The object is being deleted; a declared finalizer holds it until this cleanup succeeds. */
  | { type: "cleanup"; object: T }
  /** The object no longer exists: what it owned goes by garbage collection, the rest is the plugin's to let go. */
  | { type: "gone"; namespace: string; name: string };

/**
 * A reconciler: declares what it watches and decides, per key, what should happen.
 *
 * Every call runs in a fresh instance: nothing a reconciler keeps in fields or module variables
 * survives from one call to the next.
 */
export interface Reconciler<T extends KubeObject = KubeObject, S = Settings> {
  /**
   * Describes the plugin for the operator's settings. Throwing rejects the settings: the host
   * refuses to load the plugin, printing the message. The SDK also calls it before each
   * reconcile of an existing object, to learn the finalizer it handles: keep it a pure function
   * of the settings.
   */
  manifest(settings: S): Manifest;

  /**
   * Decides what to do for one key. Throw a {@link ReconcileError} to fail it; any other
   * exception fails it with a terminal error naming the object.
   */
  reconcile(event: Reconcile<T>, ctx: Context<S>): Outcome;

  /**
   * Turns an object's JSON into `T`, throwing when it does not fit (in a reconcile a terminal
   * error naming the object, in a webhook a 400 refusal). Without it, the parsed JSON is taken
   * as `T` unchecked.
   */
  decodeObject?(json: unknown): T;

  /**
   * Turns the operator's settings (parsed JSON; undefined when none were given) into `S`,
   * throwing when they do not fit: the host then refuses the plugin at load with the message.
   * Without it, settings must be a JSON object (none: `{}`), taken as `S` unchecked.
   */
  decodeSettings?(json: unknown): S;

  /**
   * Sample objects for the component's build to reconcile, each once, before it snapshots the
   * JavaScript engine: SpiderMonkey compiles a function when it is first called, and every
   * call of the component starts from the snapshot, so code the samples ran is compiled
   * already (the TypeScript seed's reconcile: 0.78 -> 0.65 ms). The build's reconciles see no
   * settings, no cached objects and no databases, and what they return or throw is dropped;
   * but whatever they change in module-level state starts every call changed. Leave it out to
   * run nothing at build time.
   */
  warmUp?(): readonly T[];
}

/**
 * The settings as the reconciler's type: none (empty, `null`) is `undefined` to
 * `decodeSettings` and `{}` without one; anything else must parse and decode. Throws the message
 * the host prints (`invalid settings: ...`).
 */
export function parseSettings<T extends KubeObject, S>(reconciler: Reconciler<T, S>, json: string): S {
  const text = json.trim();
  let value: unknown;
  try {
    value = text === "" || text === "null" ? undefined : JSON.parse(text);
  } catch (e) {
    throw new Error(`invalid settings: ${messageOf(e)}`);
  }
  try {
    if (reconciler.decodeSettings !== undefined) return reconciler.decodeSettings(value);
  } catch (e) {
    throw new Error(`invalid settings: ${messageOf(e)}`);
  }
  if (value === undefined) return {} as S;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`invalid settings: expected a JSON object, got ${JSON.stringify(value)}`);
  }
  return value as S;
}

/** `json` decoded as the reconciler's object type; throws the decoder's message. */
export function decodeJson<T extends KubeObject, S>(reconciler: Reconciler<T, S>, json: string): T {
  const value: unknown = JSON.parse(json);
  if (reconciler.decodeObject !== undefined) return reconciler.decodeObject(value);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error("expected a JSON object");
  }
  return value as T;
}

/**
 * Runs `reconciler` for the host's `request`: decodes the object, handles the finalizer the
 * manifest declares, and asks the reconciler what is left to do.
 */
export function runReconcile<T extends KubeObject, S>(
  reconciler: Reconciler<T, S>,
  request: Request,
  ctx: Context<S>,
): Outcome {
  if (request.object === undefined) {
    return reconciler.reconcile({ type: "gone", namespace: request.namespace, name: request.name }, ctx);
  }
  let object: T;
  try {
    object = decodeJson(reconciler, request.object);
  } catch (e) {
    throw ReconcileError.terminal(`${request.key()}: object does not parse: ${messageOf(e)}`);
  }
  let manifest: Manifest;
  try {
    manifest = reconciler.manifest(ctx.settings);
  } catch (e) {
    throw ReconcileError.terminal(messageOf(e));
  }
  const name = manifest.declared.finalizer;
  if (name !== undefined) return finalizer(object, name, (event) => reconciler.reconcile(event, ctx));
  const type = isDeleting(object) ? "cleanup" : "apply";
  return reconciler.reconcile({ type, object }, ctx);
}

/**
 * kube-runtime's `finalizer()` for plugins, which reconcilers with a declared finalizer get
 * without calling it. For `object` and the finalizer `name`:
 *
 * - live without the finalizer: adds it, and nothing else (the change brings the object back;
 *   declare `Predicate.FinalizersChanged` if you filter events);
 * - live with it: `reconcile({ type: "apply" })`;
 * - being deleted with it: `reconcile({ type: "cleanup" })`, then, when that succeeded, removes
 *   the finalizer so the object can go; a failed cleanup keeps it and is retried;
 * - being deleted without it: nothing (it is not ours to clean up).
 */
export function finalizer<T extends KubeObject>(
  object: T,
  name: string,
  reconcile: (event: Reconcile<T>) => Outcome,
): Outcome {
  const ours = hasFinalizer(object, name);
  if (isDeleting(object)) {
    if (!ours) return Outcome.done();
    return reconcile({ type: "cleanup", object }).push(Action.removeFinalizer(name));
  }
  if (!ours) return Outcome.with([Action.addFinalizer(name)]);
  return reconcile({ type: "apply", object });
}
