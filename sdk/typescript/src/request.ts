/**
 * The host's {@link Request} for one reconcile, and what the previous reconcile's actions did
 * ({@link ActionResult}).
 *
 * @module
 */

import type { ObjectRef } from "./action.js";
import { keyOf, type KubeObject } from "./objects.js";

/** Why an action failed. */
export interface ActionFailure {
  /**
   * The object the failed request was about: the action's target, the reconciled object for
   * status, finalizer and event actions, and for a set of children the child that failed.
   */
  target: ObjectRef;
  /** The HTTP status code the API server answered (422, 409, 403, ...); 0 when none. */
  code: number;
  /** The API server's `Status.reason` (`Invalid`, `Conflict`, ...), or the host's own. */
  reason: string;
  /** What the server (or the host) said. */
  message: string;
}

/** What the host did with one action. */
export type ActionStatus =
  /** The request was sent and the API server accepted it. */
  | { type: "applied" }
  /** No request was needed: the cache showed the action's effect already in place. */
  | { type: "unchanged" }
  /** The request failed. */
  | { type: "failed"; failure: ActionFailure }
  /** Not attempted: an earlier action that was not best effort failed. */
  | { type: "skipped" };

/** What became of one action of the previous reconcile. */
export interface ActionResult {
  /** The action's position in that reconcile's actions. */
  index: number;
  status: ActionStatus;
}

/** The Unix epoch, the clock of a request nobody set one for. */
const EPOCH = new Date(0);

/**
 * One reconcile as the host asks for it: the key, the cached object and the host's clock. The
 * SDK turns it into a `Reconcile` event and a `Context`; tests build one to run a plugin on
 * (`Harness.run`).
 */
export class Request {
  constructor(
    /** Namespace of the object; empty for cluster-scoped kinds. */
    readonly namespace: string,
    /** Name of the object. */
    readonly name: string,
    /** The cached object as JSON (without `managedFields`); undefined once it no longer exists. */
    readonly object: string | undefined,
    /** The object exists and has a `deletionTimestamp`: finalizers are holding it. */
    readonly deleting: boolean,
    /** The host's current time. */
    readonly now: Date = EPOCH,
    /** What each action of this key's previous reconcile did, in order. */
    readonly previous: readonly ActionResult[] = [],
  ) {}

  /** A request for an object that exists, as the host would send it. */
  static forObject(object: KubeObject): Request {
    const meta = object.metadata ?? {};
    const deleting = meta.deletionTimestamp !== undefined && meta.deletionTimestamp !== null;
    return new Request(meta.namespace ?? "", meta.name ?? "", JSON.stringify(object), deleting);
  }

  /** A request for an object that no longer exists. */
  static forDeleted(namespace: string, name: string): Request {
    return new Request(namespace, name, undefined, false);
  }

  /** The same request, as if the previous reconcile's actions had done `previous`. */
  after(previous: readonly ActionResult[]): Request {
    return new Request(this.namespace, this.name, this.object, this.deleting, this.now, previous);
  }

  /** The same request at another time. */
  at(now: Date): Request {
    return new Request(this.namespace, this.name, this.object, this.deleting, now, this.previous);
  }

  /** `namespace/name`, or `name` for cluster-scoped objects. */
  key(): string {
    return keyOf(this.namespace, this.name);
  }

  /** The previous reconcile's failed actions: each one's position and failure. */
  failures(): Array<[number, ActionFailure]> {
    return this.previous.flatMap((r): Array<[number, ActionFailure]> =>
      r.status.type === "failed" ? [[r.index, r.status.failure]] : [],
    );
  }
}

/** `now` as Kubernetes writes times (`metav1.Time`): RFC 3339 in UTC, to the second. */
export function rfc3339(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, "Z");
}
