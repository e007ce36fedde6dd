/**
 * The check of one action a plugin returns, as the host makes it before anything is sent: is the
 * target in the plugin's {@link Scope}, is the action well-formed, and would the API server accept
 * the metadata it sends. A port of `wasmctrl-core`'s `action.rs`, run by the harness on the
 * actions a test's reconcile returns.
 *
 * @module
 */

import { Gvk } from "../gvk.js";
import type { Scope, Verb } from "./scope.js";
import { EVENT_REASON_MAX, nameRule, qualifiedName, sentMeta, utf8Length } from "./validation.js";

/** An action the host would not carry out as written, or that the API server would refuse. */
export class MalformedAction extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MalformedAction";
  }
}

/** The object a patch or delete names. */
export interface Target {
  apiVersion: string;
  kind: string;
  /** Empty for the reconciled object's namespace (or a cluster-scoped object). */
  namespace: string;
  name: string;
}

/** One action, parsed. */
export type Act =
  | { verb: "apply"; object: unknown }
  | { verb: "children"; kind: Gvk; objects: readonly unknown[] }
  | { verb: "patch" | "delete"; target: Target }
  | { verb: "update-status"; status: unknown }
  | { verb: "add-finalizer" | "remove-finalizer"; finalizer: string }
  | { verb: "emit-event"; reason: string; action: string };

/** The key being reconciled, and whether its object still exists. */
export interface Reconciled {
  namespace: string;
  name: string;
  exists: boolean;
}

/**
 * The positions of an outcome's best-effort actions, sorted, once each; throws when one names
 * no action of the outcome's `actions`.
 */
export function bestEffort(positions: readonly number[], actions: number): number[] {
  for (const position of positions) {
    if (!(Number.isInteger(position) && position >= 0 && position < actions)) {
      throw new MalformedAction(`best-effort position ${position} names no action (the outcome has ${actions})`);
    }
  }
  return [...new Set(positions)].sort((a, b) => a - b);
}

/**
 * Checks one action of a reconcile of `reconciled`; throws a `Refusal` or a
 * {@link MalformedAction}.
 */
export function checkAction(scope: Scope, reconciled: Reconciled, act: Act): void {
  switch (act.verb) {
    case "apply":
      checkApplied(scope, "apply", reconciled, act.object);
      return;
    case "children":
      checkChildren(scope, reconciled, act.kind, act.objects);
      return;
    case "patch":
    case "delete": {
      const { apiVersion, kind, namespace, name } = act.target;
      if (apiVersion === "" || kind === "" || name === "") {
        throw new MalformedAction("target needs apiVersion, kind and name");
      }
      scope.checkWrite(act.verb, Gvk.of(apiVersion, kind), namespace, name, reconciled.namespace);
      return;
    }
    case "update-status":
      checkOnReconciled(scope, act.verb, reconciled);
      if (act.status === null || typeof act.status !== "object" || Array.isArray(act.status)) {
        throw new MalformedAction("status must be a JSON object");
      }
      return;
    case "add-finalizer":
    case "remove-finalizer":
      checkOnReconciled(scope, act.verb, reconciled);
      if (qualifiedName(act.finalizer).length > 0) {
        throw new MalformedAction(`${JSON.stringify(act.finalizer)} is not a qualified finalizer name`);
      }
      return;
    case "emit-event":
      checkOnReconciled(scope, act.verb, reconciled);
      // What the API server would refuse (the host cuts the note to its limit instead).
      for (const [field, value] of [["reason", act.reason], ["action", act.action]] as const) {
        if (value.length === 0 || utf8Length(value) > EVENT_REASON_MAX) {
          throw new MalformedAction(`event ${field} must be 1-${EVENT_REASON_MAX} characters`);
        }
      }
      return;
  }
}

/** Status, finalizers, events and children act on the reconciled object, which must exist. */
function checkOnReconciled(scope: Scope, verb: Verb, reconciled: Reconciled): void {
  if (!reconciled.exists) {
    const key = reconciled.namespace === "" ? reconciled.name : `${reconciled.namespace}/${reconciled.name}`;
    throw new MalformedAction(`${key} no longer exists`);
  }
  scope.checkReconciled(verb, reconciled.namespace, reconciled.name);
}

/** Which object an applied object names: its kind, namespace (maybe empty) and name. */
function objectId(object: unknown): { kind: Gvk; namespace: string; name: string } {
  const o = (object ?? {}) as Record<string, unknown>;
  const meta = (typeof o["metadata"] === "object" && o["metadata"] !== null ? o["metadata"] : {}) as Record<
    string,
    unknown
  >;
  const field = (value: unknown, name: string): string => {
    if (typeof value !== "string" || value === "") throw new MalformedAction(`object has no ${name}`);
    return value;
  };
  const apiVersion = field(o["apiVersion"], "apiVersion");
  const kind = field(o["kind"], "kind");
  const name = field(meta["name"], "metadata.name");
  const namespace = typeof meta["namespace"] === "string" ? meta["namespace"] : "";
  return { kind: Gvk.of(apiVersion, kind), namespace, name };
}

/** An object sent whole: in scope, with metadata the API server accepts. */
function checkApplied(
  scope: Scope,
  verb: Verb,
  reconciled: Reconciled,
  object: unknown,
): { kind: Gvk; namespace: string; name: string } {
  const id = objectId(object);
  scope.checkWrite(verb, id.kind, id.namespace, id.name, reconciled.namespace);
  const metadata = (object as Record<string, unknown>)["metadata"];
  const refused = sentMeta(metadata, nameRule(id.kind.group, id.kind.kind));
  if (refused.length > 0) {
    const errors = refused.map((e) => e.toString()).join("; ");
    throw new MalformedAction(`the API server would refuse ${id.kind.kind} ${id.name}: ${errors}`);
  }
  return id;
}

function checkChildren(scope: Scope, reconciled: Reconciled, kind: Gvk, objects: readonly unknown[]): void {
  checkOnReconciled(scope, "apply", reconciled);
  if (!scope.isOwned(kind)) {
    throw new MalformedAction(`${kind.kind} is not an owned kind: declare it with \`owns\` to return its children`);
  }
  const names = new Set<string>();
  for (const object of objects) {
    const child = checkApplied(scope, "apply", reconciled, object);
    if (!child.kind.equals(kind)) {
      throw new MalformedAction(`child ${child.name} is a ${child.kind.kind}, not a ${kind.kind}`);
    }
    const namespace = child.namespace === "" ? reconciled.namespace : child.namespace;
    const key = JSON.stringify([namespace, child.name]);
    if (names.has(key)) throw new MalformedAction(`child ${child.name} appears twice`);
    names.add(key);
  }
}
