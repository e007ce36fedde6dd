/**
 * What a reconcile knows and can ask of the host: {@link Context} (settings, the key, the host's
 * clock, what the previous reconcile's actions did, cache reads, SQL) and {@link Host}, the
 * services behind it: the component's imports in wasm, the harness natively.
 *
 * @module
 */

import { ReconcileError, messageOf } from "./error.js";
import type { Gvk } from "./gvk.js";
import type { Level } from "./logging.js";
import type { KubeObject } from "./objects.js";
import { rfc3339, type ActionFailure, type ActionResult, type Request } from "./request.js";
import { SqlError, type Rows, type Statement } from "./sql.js";

/**
 * The host services a plugin uses. Cache reads throw an `Error` whose message is the host's
 * answer (a refusal, for a read outside the manifest); `sql` throws a `SqlError`.
 */
export interface Host {
  /** Records a log line with key/value fields. */
  log(level: Level, message: string, fields: Array<[string, string]>): void;
  /** One object as JSON; undefined when it is not in the cache. */
  get(kind: Gvk, namespace: string, name: string): string | undefined;
  /** Objects as JSON in a namespace (empty: all) matching a label selector (empty: all). */
  list(kind: Gvk, namespace: string, labels: string): string[];
  /** Objects as JSON of a kind in a namespace (empty: all) that the object with `ownerUid` controls. */
  children(kind: Gvk, namespace: string, ownerUid: string): string[];
  /** Runs statements in one transaction on a granted database. */
  sql(database: string, statements: readonly Statement[]): Rows[];
}

/** The host's cache, read-only, limited to the kinds the manifest declares. */
export class Cache {
  constructor(private readonly host: Host) {}

  /**
   * One cached object of a declared kind: `ctx.cache.get(kinds.ConfigMap, ns, name)`;
   * undefined when it is not cached. A kind the manifest did not declare, or a failed read, is
   * a retryable {@link ReconcileError} naming the object.
   */
  get<T extends KubeObject>(kind: Gvk<T>, namespace: string, name: string): T | undefined {
    const json = this.read(() => this.host.get(kind, namespace, name));
    if (json === undefined) return undefined;
    return parse<T>(json, () => `${kind.kind} ${namespace}/${name}`);
  }

  /**
   * Cached objects of a declared kind in `namespace` (empty: every namespace it may read)
   * matching the label selector `labels` (empty: all), in namespace/name order.
   */
  list<T extends KubeObject>(kind: Gvk<T>, namespace = "", labels = ""): T[] {
    const items = this.read(() => this.host.list(kind, namespace, labels));
    return items.map((json) => parse<T>(json, () => `listing ${kind.kind}`));
  }

  /**
   * The cached objects of `kind` that `owner` controls (an owner reference with
   * `controller: true` and its uid), in its namespace, in name order: the children a previous
   * reconcile applied, found through the host's owner index. `kind` must be declared.
   */
  children<T extends KubeObject>(kind: Gvk<T>, owner: KubeObject): T[] {
    const namespace = owner.metadata?.namespace ?? "";
    const uid = owner.metadata?.uid ?? "";
    const items = this.read(() => this.host.children(kind, namespace, uid));
    return items.map((json) => parse<T>(json, () => `children of kind ${kind.kind}`));
  }

  /** The host's answer, or its failure as a retryable error. */
  private read<R>(ask: () => R): R {
    try {
      return ask();
    } catch (e) {
      throw ReconcileError.retryable(messageOf(e));
    }
  }
}

function parse<T>(json: string, what: () => string): T {
  try {
    return JSON.parse(json) as T;
  } catch (e) {
    throw ReconcileError.retryable(`${what()}: ${messageOf(e)}`);
  }
}

/** A database the operator granted and the manifest declares as `sql:<name>`. */
export class Database {
  constructor(
    private readonly host: Host,
    readonly name: string,
  ) {}

  /** Runs one statement; throws a `SqlError`. */
  execute(statement: Statement): Rows {
    const [rows] = this.transaction([statement]);
    if (rows === undefined) {
      throw new SqlError("the host returned no result for the statement", undefined, false);
    }
    return rows;
  }

  /** Runs statements in order in one transaction: all take effect or none. */
  transaction(statements: readonly Statement[]): Rows[] {
    return this.host.sql(this.name, statements);
  }
}

/**
 * Handed to `reconcile`: the operator's settings, the key, the host's clock, what the previous
 * reconcile's actions did, cache reads and SQL.
 */
export class Context<S> {
  /** Reads from the host's cache. */
  readonly cache: Cache;

  constructor(
    private readonly host: Host,
    /** The operator's settings for this plugin, as the reconciler parsed them. */
    readonly settings: S,
    private readonly request: Request,
  ) {
    this.cache = new Cache(host);
  }

  /** The key reconciled: `namespace/name`, or `name` for a cluster-scoped kind. */
  get key(): string {
    return this.request.key();
  }

  /** The namespace of the key; empty for a cluster-scoped kind. */
  get namespace(): string {
    return this.request.namespace;
  }

  /** The name of the key. */
  get name(): string {
    return this.request.name;
  }

  /** The host's current time. Read it rather than a clock: one reconcile sees one time. */
  get now(): Date {
    return new Date(this.request.now.getTime());
  }

  /** {@link now} as Kubernetes writes times: RFC 3339 in UTC, to the second. */
  nowRfc3339(): string {
    return rfc3339(this.request.now);
  }

  /** What each action of this key's previous reconcile did, in order; empty when none. */
  get previous(): readonly ActionResult[] {
    return this.request.previous;
  }

  /** The previous reconcile's failed actions: each one's position and failure. */
  failures(): Array<[number, ActionFailure]> {
    return this.request.failures();
  }

  /** A database the operator granted and the manifest declares as `sql:<database>`. */
  sql(database: string): Database {
    return new Database(this.host, database);
  }
}
