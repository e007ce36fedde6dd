/**
 * The {@link Action}s and the {@link Outcome} a reconcile returns, and the parts of actions.
 *
 * Objects are serialized when an action is made, as the Rust SDK does: a value JSON cannot
 * carry (a `BigInt`, a cycle) fails the reconcile there, with a terminal error, rather than at
 * the host; and changing an object after pushing its action does not change the action.
 *
 * @module
 */

import { ReconcileError, messageOf } from "./error.js";
import type { Gvk } from "./gvk.js";
import type { KubeObject } from "./objects.js";

/** Identifies an object other than the one being reconciled. */
export interface ObjectRef {
  /** `group/version`, or `v1` for the core group, as in an object's `apiVersion`. */
  apiVersion: string;
  kind: string;
  /** Empty for cluster-scoped objects (and, as a target, the reconciled object's namespace). */
  namespace: string;
  name: string;
}

/** Builds {@link ObjectRef}s. */
export const ObjectRef = {
  /** Names an object of `kind`: `ObjectRef.of(kinds.ConfigMap, "default", "web")`. */
  of(kind: Gvk, namespace: string, name: string): ObjectRef {
    return { apiVersion: kind.apiVersion(), kind: kind.kind, namespace, name };
  },
} as const;

/** How a delete treats the object's dependents, as the API's `propagationPolicy` says it. */
export type Propagation = "Background" | "Foreground" | "Orphan";

/** A Kubernetes Event (events.k8s.io/v1) about the reconciled object. */
export interface Event {
  type: "Normal" | "Warning";
  /** UpperCamelCase machine-readable reason, e.g. `Created`. */
  reason: string;
  /** Human-readable note. */
  note: string;
  /** What was done, e.g. `Reconcile`. */
  action: string;
}

/** Something the plugin wants done; the host checks each against the manifest before sending anything. */
export type Action =
  /** Server-side apply of a desired object (JSON) with the plugin's field manager. */
  | { type: "apply"; object: string }
  /** A patch of an object of a watched, owned or writable kind. */
  | { type: "patch"; target: ObjectRef; body: { type: "merge" | "json"; patch: string } }
  /** A delete of an object of a watched, owned or writable kind (one already gone is not a failure). */
  | { type: "delete"; target: ObjectRef; propagation: Propagation }
  /** The reconciled object's new `.status` (a JSON object). */
  | { type: "update-status"; status: string }
  /** Adds this finalizer to the reconciled object (no-op when present). */
  | { type: "add-finalizer"; finalizer: string }
  /** Removes this finalizer from the reconciled object (no-op when absent). */
  | { type: "remove-finalizer"; finalizer: string }
  /** Records an Event about the reconciled object. */
  | { type: "emit-event"; event: Event }
  /** The complete desired set of the reconciled object's children of one owned kind. */
  | { type: "children"; kind: Gvk; objects: string[] };

/** `value` as JSON, or the terminal error a reconcile fails with when it cannot be. */
function toJson(value: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (e) {
    throw ReconcileError.terminal(`serializing action: ${messageOf(e)}`);
  }
  if (json === undefined) throw ReconcileError.terminal("serializing action: the value is not JSON");
  return json;
}

/** Builds {@link Action}s. */
export const Action = {
  /** Server-side apply of a full desired object (it must carry apiVersion, kind and name). */
  apply(object: KubeObject): Action {
    return { type: "apply", object: toJson(object) };
  },
  /** Replaces the reconciled object's `.status`. */
  updateStatus(status: object): Action {
    return { type: "update-status", status: toJson(status) };
  },
  /** An RFC 7386 merge patch of `target`. */
  mergePatch(target: ObjectRef, patch: object): Action {
    return { type: "patch", target, body: { type: "merge", patch: toJson(patch) } };
  },
  /** An RFC 6902 JSON patch (an array of operations, `test` included) of `target`. */
  jsonPatch(target: ObjectRef, operations: readonly object[]): Action {
    return { type: "patch", target, body: { type: "json", patch: toJson(operations) } };
  },
  /** Deletes `target`, its dependents deleted in the background afterwards (kubectl's default). */
  delete(target: ObjectRef, propagation: Propagation = "Background"): Action {
    return { type: "delete", target, propagation };
  },
  /** Adds a finalizer to the reconciled object. */
  addFinalizer(name: string): Action {
    return { type: "add-finalizer", finalizer: name };
  },
  /** Removes a finalizer from the reconciled object. */
  removeFinalizer(name: string): Action {
    return { type: "remove-finalizer", finalizer: name };
  },
  /** A `Normal` Event about the reconciled object. */
  event(reason: string, note: string): Action {
    return { type: "emit-event", event: { type: "Normal", reason, note, action: "Reconcile" } };
  },
  /** A `Warning` Event about the reconciled object. */
  warning(reason: string, note: string): Action {
    return { type: "emit-event", event: { type: "Warning", reason, note, action: "Reconcile" } };
  },
  /**
   * The complete desired set of the reconciled object's children of `kind` (an owned kind): the
   * host applies each, then deletes every child of that kind the object controls that the set
   * does not name, as Metacontroller's sync hook does. An empty set deletes them all.
   */
  children<T extends KubeObject>(kind: Gvk<T>, objects: readonly T[]): Action {
    return { type: "children", kind, objects: objects.map(toJson) };
  },
} as const;

/**
 * A successful reconcile: the actions, in order, and when to look again. The host carries the
 * actions out in order; the first failure of an action that is not best effort stops the rest,
 * and any failure has the key retried with backoff.
 */
export class Outcome {
  /** Carried out in order. */
  readonly actions: Action[] = [];
  /** Positions in `actions` of those whose failure does not stop the ones after them. */
  readonly bestEffort: number[] = [];
  /** Reconcile this key again after this many milliseconds, even if nothing changes. */
  requeueAfterMs: number | undefined;

  /** Nothing to do. */
  static done(): Outcome {
    return new Outcome();
  }

  /** These actions, in order. */
  static with(actions: readonly Action[]): Outcome {
    const outcome = new Outcome();
    outcome.actions.push(...actions);
    return outcome;
  }

  /** Appends an action. */
  push(action: Action): this {
    this.actions.push(action);
    return this;
  }

  /**
   * Appends an action whose failure does not stop the ones after it (say, a cleanup that must
   * not keep the status from being written). Its failure still has the key retried.
   */
  pushBestEffort(action: Action): this {
    this.bestEffort.push(this.actions.length);
    this.actions.push(action);
    return this;
  }

  /** Asks to be reconciled again after `ms` milliseconds even if nothing changes. */
  requeueAfter(ms: number): this {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`requeueAfter(${ms}): not a duration in milliseconds`);
    this.requeueAfterMs = Math.round(ms);
    return this;
  }

  /** The objects of `kind` it applies, in order: by {@link Action.apply} and in children sets. */
  applied<T extends KubeObject>(kind: Gvk<T>): T[] {
    const out: T[] = [];
    for (const action of this.actions) {
      if (action.type === "apply") {
        const object = JSON.parse(action.object) as KubeObject;
        if (object.apiVersion === kind.apiVersion() && object.kind === kind.kind) out.push(object as T);
      } else if (action.type === "children" && action.kind.equals(kind)) {
        out.push(...action.objects.map((json) => JSON.parse(json) as T));
      }
    }
    return out;
  }

  /** The status its last status update writes; undefined when it writes none. */
  status<S = Record<string, unknown>>(): S | undefined {
    const last = this.actions.filter((a) => a.type === "update-status").pop();
    return last === undefined ? undefined : (JSON.parse(last.status) as S);
  }

  /** The Events it records, in order. */
  events(): Event[] {
    return this.actions.flatMap((a) => (a.type === "emit-event" ? [a.event] : []));
  }

  /** The objects it deletes, in order. */
  deleted(): ObjectRef[] {
    return this.actions.flatMap((a) => (a.type === "delete" ? [a.target] : []));
  }
}
