/**
 * A plugin's declaration as its manifest states it, and the one reading of it into a
 * {@link Scope}, as `wasmctrl-core`'s `declaration.rs` reads it for the host: the harness and
 * the host cannot disagree about what a manifest grants or refuses.
 *
 * @module
 */

import type { Gvk } from "../gvk.js";
import { Namespaces, Scope } from "./scope.js";
import { LabelSelector, SelectorParseError } from "./selector.js";

/** What a manifest declares about the objects a plugin touches. */
export interface Declaration {
  watched: Gvk;
  /** Namespaces it is reconciled in; empty for all. */
  namespaces: readonly string[];
  /** Label selector on the reconciled kind (empty selects all). */
  labels: string;
  owns: readonly Gvk[];
  reads: ReadonlyArray<{ kind: Gvk; namespaces: readonly string[]; labels: string }>;
  writes: readonly Gvk[];
  capabilities: readonly string[];
}

/** Why a declaration grants nothing: the manifest field at fault and what is wrong with it. */
export class DeclarationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DeclarationError";
  }
}

/**
 * Checks every kind, selector and capability, and says what the plugin may touch, its
 * namespaces narrowed to `narrowed` when the operator gave any (the two lists intersect).
 * Throws a {@link DeclarationError} naming the field at fault.
 */
export function scopeOf(declared: Declaration, narrowed?: readonly string[]): Scope {
  let namespaces = Namespaces.declared(declared.namespaces);
  if (narrowed !== undefined) namespaces = namespaces.intersect(Namespaces.declared(narrowed));
  const scope = new Scope(
    checkedKind("watches.kind", declared.watched),
    namespaces,
    selector("watches.selector.labels", declared.labels),
  );
  for (const owned of declared.owns) scope.owns(checkedKind("owns", owned));
  for (const read of declared.reads) {
    const labels = selector("reads.selector.labels", read.labels);
    scope.readsKind(checkedKind("reads.kind", read.kind), read.namespaces, labels);
  }
  for (const written of declared.writes) scope.writesKind(checkedKind("writes", written));
  for (const capability of declared.capabilities) scope.capability(offered(capability));
  return scope;
}

function checkedKind(field: string, kind: Gvk): Gvk {
  if (kind.version === "" || kind.kind === "") {
    const given = `${kind.group}/${kind.version}/${kind.kind}`;
    throw new DeclarationError(`${field}: group/version/kind ${JSON.stringify(given)} needs a version and a kind`);
  }
  return kind;
}

function selector(field: string, labels: string): LabelSelector {
  try {
    return LabelSelector.parse(labels);
  } catch (e) {
    if (e instanceof SelectorParseError) throw new DeclarationError(`${field}: ${e.message}`);
    throw e;
  }
}

/** The capabilities a host offers: `sql:<database>` (names as `--sql` accepts them). */
function offered(capability: string): string {
  const database = capability.startsWith("sql:") ? capability.slice(4) : undefined;
  if (database !== undefined && database.length <= 63 && /^[a-z0-9_-]+$/.test(database)) return capability;
  throw new DeclarationError(
    `capabilities: ${JSON.stringify(capability)} is not a capability this host offers (\`sql:<database>\`, the database name in lowercase letters, digits, '-' or '_')`,
  );
}
