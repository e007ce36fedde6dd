/**
 * What a plugin may touch ({@link Scope}): a port of `wasmctrl-core`'s rules, which the host
 * applies to every cache read and action. The harness applies the same rules, so a plugin that
 * passes its tests is not refused by the host.
 *
 * - The watched kind is readable and writable in the plugin's effective namespaces (the
 *   manifest's, narrowed by the operator), reads limited to the watched label selector.
 * - Owned kinds are readable in the effective namespaces; they are written only in the
 *   namespace of the object being reconciled (owner references cannot cross namespaces).
 * - `reads` kinds are readable in the namespaces their declaration names, or the effective
 *   namespaces when it names none, limited to their label selector. They are never writable.
 * - `writes` kinds are writable in the effective namespaces.
 * - An empty namespace on an object means a cluster-scoped object, in scope for every declared
 *   kind; on a write target it means the reconciled object's namespace; on a list, every
 *   namespace the plugin may read (results filtered to those).
 *
 * @module
 */

import type { Gvk } from "../gvk.js";
import { LabelSelector, type Labels } from "./selector.js";

/** A set of namespaces: every namespace, or only some (possibly none). */
export class Namespaces {
  private constructor(private readonly only: ReadonlySet<string> | undefined) {}

  /** Every namespace. */
  static all(): Namespaces {
    return new Namespaces(undefined);
  }

  /** Only these (possibly none: never read as "all"). */
  static only(names: Iterable<string>): Namespaces {
    return new Namespaces(new Set(names));
  }

  /** A manifest's list: empty means every namespace. */
  static declared(list: readonly string[]): Namespaces {
    return list.length === 0 ? Namespaces.all() : Namespaces.only(list);
  }

  /** Whether objects in `namespace` are in the set; the empty namespace always is. */
  contains(namespace: string): boolean {
    return this.only === undefined || namespace === "" || this.only.has(namespace);
  }

  /** The namespaces in both sets. */
  intersect(other: Namespaces): Namespaces {
    if (this.only === undefined) return other;
    if (other.only === undefined) return this;
    const theirs = other.only;
    return Namespaces.only([...this.only].filter((n) => theirs.has(n)));
  }

  /** Whether both are the same set. */
  equals(other: Namespaces): boolean {
    return this.toString() === other.toString();
  }

  /** `all namespaces`, or `[a, b]` sorted, as the host prints them. */
  toString(): string {
    if (this.only === undefined) return "all namespaces";
    return `[${[...this.only].sort().join(", ")}]`;
  }
}

/** What a plugin asks to do with an object, named as the contract names it. */
export type Verb =
  | "get"
  | "list"
  | "apply"
  | "patch"
  | "delete"
  | "update-status"
  | "add-finalizer"
  | "remove-finalizer"
  | "emit-event";

/** Something a plugin asked for that its declaration does not allow; words it as the host does. */
export class Refusal extends Error {
  constructor(
    readonly verb: Verb,
    readonly kind: Gvk,
    readonly namespace: string,
    readonly objectName: string,
    readonly reason: string,
  ) {
    super(`${verb} ${kind.toString()} ${objectLabel(namespace, objectName)} refused: ${reason}`);
    this.name = "Refusal";
  }
}

function objectLabel(namespace: string, name: string): string {
  if (namespace === "" && name === "") return "in every namespace";
  if (name === "") return `in namespace ${namespace}`;
  if (namespace === "") return name;
  return `${namespace}/${name}`;
}

/** One declared way to read a kind. */
interface Grant {
  namespaces: Namespaces;
  selector: LabelSelector;
}

/** How a kind may be written: in the effective namespaces, or only beside the reconciled object. */
type Write = "namespaces" | "owned";

const keyOfKind = (kind: Gvk): string => `${kind.group}/${kind.version}/${kind.kind}`;

/** Which objects of one kind a read may see; from {@link Scope.checkRead}. */
export class Reads {
  constructor(private readonly grants: readonly Grant[]) {}

  /** Whether an object in `namespace` with these labels is visible. */
  admits(namespace: string, labels: Labels): boolean {
    return this.grants.some((g) => g.namespaces.contains(namespace) && g.selector.matches(labels));
  }

  /**
   * Refuses a list whose selector no visible object could match: it asks for labels outside
   * the declared ones. Returns the reason, or undefined when the list may go on.
   */
  selectorRefusal(requested: LabelSelector): string | undefined {
    if (this.grants.every((g) => g.selector.disjoint(requested))) {
      const declared = this.grants.map((g) => g.selector.toString()).join(" or ");
      return `the selector ${requested.toString()} asks for labels outside the declared selector (${declared})`;
    }
    return undefined;
  }
}

/** Everything a plugin may touch; built from its manifest by {@link Declaration.scope}. */
export class Scope {
  private readonly reads = new Map<string, Grant[]>();
  private readonly writes = new Map<string, Write>();
  private readonly capabilities = new Set<string>();

  constructor(
    readonly watched: Gvk,
    readonly namespaces: Namespaces,
    selector: LabelSelector,
  ) {
    this.grantRead(watched, namespaces, selector);
    this.writes.set(keyOfKind(watched), "namespaces");
  }

  /** Children of `kind` are created beside the reconciled object. */
  owns(kind: Gvk): this {
    this.grantRead(kind, this.namespaces, LabelSelector.parse(""));
    const key = keyOfKind(kind);
    if (!this.writes.has(key)) this.writes.set(key, "owned");
    return this;
  }

  /** `kind` is read in `namespaces` (empty: the plugin's own) where labels match `selector`. */
  readsKind(kind: Gvk, namespaces: readonly string[], selector: LabelSelector): this {
    const where = namespaces.length === 0 ? this.namespaces : Namespaces.declared(namespaces);
    this.grantRead(kind, where, selector);
    return this;
  }

  /** `kind` may be patched, applied and deleted in the plugin's namespaces without owning it. */
  writesKind(kind: Gvk): this {
    this.writes.set(keyOfKind(kind), "namespaces");
    return this;
  }

  /** The plugin uses a named capability of the host (`sql:<database>`). */
  capability(name: string): this {
    this.capabilities.add(name);
    return this;
  }

  /** Whether the plugin declared capability `name`. */
  hasCapability(name: string): boolean {
    return this.capabilities.has(name);
  }

  /** Whether a key of the reconciled kind in `namespace` is the plugin's to reconcile. */
  reconcilesIn(namespace: string): boolean {
    return this.namespaces.contains(namespace);
  }

  /** Whether `kind` is owned: its objects are children of the reconciled object. */
  isOwned(kind: Gvk): boolean {
    return this.writes.get(keyOfKind(kind)) === "owned";
  }

  private grantRead(kind: Gvk, namespaces: Namespaces, selector: LabelSelector): void {
    const key = keyOfKind(kind);
    const grants = this.reads.get(key) ?? [];
    if (!grants.some((g) => g.namespaces.equals(namespaces) && g.selector.equals(selector))) {
      grants.push({ namespaces, selector });
    }
    this.reads.set(key, grants);
  }

  /**
   * May the plugin `verb` (get or list) objects of `kind` in `namespace`? For a list, an empty
   * namespace asks for every namespace it may read. Returns which objects it may see; throws
   * the {@link Refusal} otherwise.
   */
  checkRead(verb: "get" | "list", kind: Gvk, namespace: string, name: string): Reads {
    const refuse = (reason: string): Refusal => new Refusal(verb, kind, namespace, name, reason);
    const declared = this.reads.get(keyOfKind(kind));
    if (declared === undefined) {
      throw refuse("the kind is not declared in the manifest (watches, owns or reads)");
    }
    const listingAll = verb === "list" && namespace === "";
    const grants = declared.filter((g) => listingAll || g.namespaces.contains(namespace));
    if (grants.length === 0) {
      const where = declared.map((g) => g.namespaces.toString()).join(", ");
      throw refuse(`namespace ${namespace} is outside the namespaces declared for this kind (${where})`);
    }
    return new Reads(grants);
  }

  /**
   * May the plugin `verb` the object `namespace/name` of `kind` while reconciling an object in
   * `reconciled`? An empty `namespace` means the reconciled object's (or a cluster-scoped one).
   * Throws the {@link Refusal} when it may not.
   */
  checkWrite(verb: Verb, kind: Gvk, namespace: string, name: string, reconciled: string): void {
    const refuse = (reason: string): Refusal => new Refusal(verb, kind, namespace, name, reason);
    const write = this.writes.get(keyOfKind(kind));
    if (write === undefined) {
      throw refuse("the kind is not declared in the manifest as watched, owned or writable");
    }
    if (namespace === "" || namespace === reconciled) return;
    if (write === "owned" && reconciled !== "") {
      throw refuse(`owned objects live in their owner's namespace (${reconciled})`);
    }
    if (!this.namespaces.contains(namespace)) {
      throw refuse(`namespace ${namespace} is outside the plugin's namespaces ${this.namespaces.toString()}`);
    }
  }

  /** May the plugin `verb` (status, finalizers, events) the object it reconciles? */
  checkReconciled(verb: Verb, namespace: string, name: string): void {
    this.checkWrite(verb, this.watched, namespace, name, "");
  }
}
