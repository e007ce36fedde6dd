/**
 * Kubernetes label selectors in their string form (`app=nginx,tier in (web,api),!canary`).
 *
 * A port of `wasmctrl-core`'s `selector.rs`, the one parser the host uses for manifests and the
 * cache's `list` import: the harness must accept and refuse exactly the selectors the host does,
 * and word its refusals the same way.
 *
 * @module
 */

/** One requirement of a selector. */
type Requirement =
  | { op: "in"; key: string; values: string[] }
  | { op: "notin"; key: string; values: string[] }
  | { op: "exists"; key: string }
  | { op: "doesnotexist"; key: string };

/** An object's labels as they come in JSON: a map of strings, or nothing. */
export type Labels = Readonly<Record<string, unknown>> | null | undefined;

/** A selector string that does not parse. */
export class SelectorParseError extends Error {
  constructor(selector: string, reason: string) {
    super(`invalid label selector ${JSON.stringify(selector)}: ${reason}`);
    this.name = "SelectorParseError";
  }
}

/** A parsed label selector; the empty selector matches everything. */
export class LabelSelector {
  private constructor(private readonly requirements: readonly Requirement[]) {}

  /** Parses the string form; `""` selects everything. Throws {@link SelectorParseError}. */
  static parse(selector: string): LabelSelector {
    const fail = (reason: string): never => {
      throw new SelectorParseError(selector, reason);
    };
    const requirements: Requirement[] = [];
    const terms = splitTerms(selector);
    if (typeof terms === "string") return fail(terms);
    for (const raw of terms) {
      const term = raw.trim();
      if (term === "") return fail("empty requirement");
      const parsed = parseTerm(term);
      if (typeof parsed === "string") return fail(parsed);
      requirements.push(parsed);
    }
    return new LabelSelector(requirements);
  }

  /** True when it has no requirements. */
  isEmpty(): boolean {
    return this.requirements.length === 0;
  }

  /** Whether `labels` satisfy every requirement. */
  matches(labels: Labels): boolean {
    const label = (key: string): string | undefined => {
      const value = labels?.[key];
      return typeof value === "string" ? value : undefined;
    };
    return this.requirements.every((r) => {
      const value = label(r.key);
      switch (r.op) {
        case "in":
          return value !== undefined && r.values.includes(value);
        case "notin":
          return value === undefined || !r.values.includes(value);
        case "exists":
          return value !== undefined;
        case "doesnotexist":
          return value === undefined;
      }
    });
  }

  /**
   * Whether no labels at all can satisfy both selectors (`app=a` and `app=b`, `x` and `!x`):
   * requirements on different keys never conflict, so it is decided key by key.
   */
  disjoint(other: LabelSelector): boolean {
    const all = [...this.requirements, ...other.requirements];
    const keys = new Set(all.map((r) => r.key));
    return [...keys].some((key) => keyConflicts(all.filter((r) => r.key === key)));
  }

  /** The canonical string form, as the host prints it. */
  toString(): string {
    return this.requirements.map(requirementText).join(",");
  }

  /** Whether both select by the same requirements, in the same order. */
  equals(other: LabelSelector): boolean {
    return this.toString() === other.toString();
  }
}

/** Whether the requirements on one key exclude every value. */
function keyConflicts(onKey: readonly Requirement[]): boolean {
  const mustExist = onKey.some((r) => r.op === "in" || r.op === "exists");
  const mustNot = onKey.some((r) => r.op === "doesnotexist");
  if (mustExist && mustNot) return true;
  // Values every `in` allows and no `notin` forbids; unconstrained without an `in`.
  let allowed: string[] | undefined;
  for (const r of onKey) {
    if (r.op === "in") {
      const values = r.values;
      allowed = allowed === undefined ? [...values] : allowed.filter((v) => values.includes(v));
    }
  }
  if (allowed === undefined) return false;
  for (const r of onKey) {
    if (r.op === "notin") allowed = allowed.filter((v) => !r.values.includes(v));
  }
  return allowed.length === 0;
}

function requirementText(r: Requirement): string {
  switch (r.op) {
    case "in":
      return r.values.length === 1 ? `${r.key}=${r.values[0]}` : `${r.key} in (${r.values.join(",")})`;
    case "notin":
      return r.values.length === 1
        ? `${r.key}!=${r.values[0]}`
        : `${r.key} notin (${r.values.join(",")})`;
    case "exists":
      return r.key;
    case "doesnotexist":
      return `!${r.key}`;
  }
}

/** Splits on commas outside a parenthesised value set; a string is the reason it cannot. */
function splitTerms(selector: string): string[] | string {
  if (selector.trim() === "") return [];
  let depth = 0;
  let start = 0;
  const terms: string[] = [];
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === "(") depth += 1;
    else if (c === ")") depth -= 1;
    else if (c === "," && depth === 0) {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
    if (depth < 0 || depth > 1) return "unbalanced parentheses";
  }
  if (depth !== 0) return "unbalanced parentheses";
  terms.push(selector.slice(start));
  return terms;
}

/** One requirement, or the reason it does not parse. */
function parseTerm(term: string): Requirement | string {
  if (term.startsWith("!")) {
    const key = labelKey(term.slice(1).trim());
    return isFailure(key) ? key.reason : { op: "doesnotexist", key };
  }
  for (const [op, negate] of [[" notin ", true], [" in ", false]] as const) {
    const at = term.indexOf(op);
    if (at < 0) continue;
    return parseSet(term.slice(0, at), term.slice(at + op.length), op, negate);
  }
  const notEqual = term.indexOf("!=");
  if (notEqual >= 0) {
    return single("notin", term.slice(0, notEqual), term.slice(notEqual + 2));
  }
  const doubled = term.indexOf("==");
  if (doubled >= 0) return single("in", term.slice(0, doubled), term.slice(doubled + 2));
  const equal = term.indexOf("=");
  if (equal >= 0) return single("in", term.slice(0, equal), term.slice(equal + 1));
  const key = labelKey(term);
  return isFailure(key) ? key.reason : { op: "exists", key };
}

function parseSet(keyText: string, setText: string, op: string, negate: boolean): Requirement | string {
  const set = setText.trim();
  if (!set.startsWith("(") || !set.endsWith(")") || set.length < 2) {
    return `\`${op}\` needs a parenthesised set, got ${JSON.stringify(set)}`;
  }
  const values: string[] = [];
  for (const raw of set.slice(1, -1).split(",")) {
    const value = labelValue(raw.trim());
    if (isFailure(value)) return value.reason;
    values.push(value);
  }
  const key = labelKey(keyText.trim());
  if (isFailure(key)) return key.reason;
  return negate ? { op: "notin", key, values } : { op: "in", key, values };
}

function single(op: "in" | "notin", keyText: string, valueText: string): Requirement | string {
  const key = labelKey(keyText.trim());
  if (isFailure(key)) return key.reason;
  const value = labelValue(valueText.trim());
  if (isFailure(value)) return value.reason;
  return { op, key, values: [value] };
}

interface Failure {
  reason: string;
}

function isFailure(x: string | Failure): x is Failure {
  return typeof x !== "string";
}

/** `[prefix/]name`: prefix a DNS subdomain, name 1-63 alphanumerics, `-`, `_`, `.`. */
function labelKey(key: string): string | Failure {
  const slash = key.lastIndexOf("/");
  let name = key;
  if (slash >= 0) {
    const prefix = key.slice(0, slash);
    const ok = prefix !== "" && prefix.length <= 253 && /^[a-z0-9.-]+$/.test(prefix);
    if (!ok) return { reason: `invalid label key prefix in ${JSON.stringify(key)}` };
    name = key.slice(slash + 1);
  }
  if (name === "" || name.length > 63 || !isLabelChars(name)) {
    return { reason: `invalid label key ${JSON.stringify(key)}` };
  }
  return key;
}

function labelValue(value: string): string | Failure {
  if (value.length > 63 || (value !== "" && !isLabelChars(value))) {
    return { reason: `invalid label value ${JSON.stringify(value)}` };
  }
  return value;
}

function isLabelChars(s: string): boolean {
  return /^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$/.test(s);
}
