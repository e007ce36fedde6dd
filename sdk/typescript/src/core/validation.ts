/**
 * Kubernetes' rules for object names and the metadata an applied object sends, worded as
 * kube-apiserver words them: the part of `wasmctrl-core`'s `validation.rs` the host applies to a
 * plugin's actions before it sends them. The harness refuses with the host's words, so a test
 * failure reads as the host's refusal would.
 *
 * @module
 */

/** The most characters an Event's `reason` and `action` may have. */
export const EVENT_REASON_MAX = 128;
/** The most bytes all of an object's annotations (keys and values) may take. */
const ANNOTATIONS_MAX_BYTES = 256 * 1024;

/** One refused field: apimachinery's `field.Error`, printed as `<field>: <type>: <value>: <detail>`. */
export class FieldError {
  constructor(
    readonly type: "Invalid value" | "Required value" | "Too long",
    readonly field: string,
    readonly value: string | undefined,
    readonly detail: string,
  ) {}

  /** `Invalid value: "<value>": <detail>`. */
  static invalid(field: string, value: string, detail: string): FieldError {
    return new FieldError("Invalid value", field, quote(value), detail);
  }

  toString(): string {
    let body: string = this.type;
    if (this.value !== undefined) body += `: ${this.value}`;
    if (this.detail !== "") body += `: ${this.detail}`;
    return `${this.field}: ${body}`;
  }
}

/** A string as Go's `%q` prints it (JSON's escapes, close enough for what names contain). */
function quote(s: string): string {
  return JSON.stringify(s);
}

/** JSON with object keys sorted, as the host's `serde_json` prints a value. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) return v;
    const entries = Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return Object.fromEntries(entries);
  });
}

/** apimachinery's `RegexError`, its doubled spaces included (`'a',  or 'b', regex ...`). */
function regexError(msg: string, regex: string, examples: readonly string[]): string {
  return `${msg} (e.g. ${examples.map((e) => `'${e}', `).join(" or ")}regex used for validation is '${regex}')`;
}

function maxLenError(max: number): string {
  return `must be no more than ${max} characters`;
}

const DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

const isLabelChars = (s: string): boolean => /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(s);
const isSubdomainChars = (s: string): boolean => s.split(".").every(isLabelChars);
const isQualifiedChars = (s: string): boolean => /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/.test(s);

/** The UTF-8 length of `s`, as the host (and Go) count a string's size. */
export function utf8Length(s: string): number {
  let bytes = 0;
  for (const ch of s) {
    const code = ch.codePointAt(0) ?? 0;
    bytes += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
  }
  return bytes;
}

/** An RFC 1123 label (namespace names): apimachinery's `IsDNS1123Label`. */
export function dns1123Label(value: string): string[] {
  const errors: string[] = [];
  if (utf8Length(value) > 63) errors.push(maxLenError(63));
  if (!isLabelChars(value)) {
    errors.push(
      isSubdomainChars(value)
        ? "must not contain dots"
        : regexError(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            DNS1123_LABEL_FMT,
            ["my-name", "123-abc"],
          ),
    );
  }
  return errors;
}

/** An RFC 1123 subdomain (most object names): apimachinery's `IsDNS1123Subdomain`. */
export function dns1123Subdomain(value: string): string[] {
  const errors: string[] = [];
  if (utf8Length(value) > 253) errors.push(maxLenError(253));
  if (!isSubdomainChars(value)) {
    errors.push(
      regexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        DNS1123_SUBDOMAIN_FMT,
        ["example.com"],
      ),
    );
  }
  return errors;
}

/** An RFC 1035 label (Service names): apimachinery's `IsDNS1035Label`. */
function dns1035Label(value: string): string[] {
  const errors: string[] = [];
  if (utf8Length(value) > 63) errors.push(maxLenError(63));
  if (!(isLabelChars(value) && /^[a-z]/.test(value))) {
    errors.push(
      regexError(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
        DNS1035_LABEL_FMT,
        ["my-name", "abc-123"],
      ),
    );
  }
  return errors;
}

/** `[prefix/]name` (label and annotation keys, finalizers): apimachinery's `IsQualifiedName`. */
export function qualifiedName(value: string): string[] {
  const regex = regexError(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, ["MyName", "my.name", "123-abc"]);
  const errors: string[] = [];
  const parts = value.split("/");
  if (parts.length > 2) {
    return [
      `a qualified name ${regex} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  }
  const name = parts[parts.length - 1] ?? "";
  if (parts.length === 2) {
    const prefix = parts[0] ?? "";
    if (prefix === "") errors.push("prefix part must be non-empty");
    else errors.push(...dns1123Subdomain(prefix).map((m) => `prefix part ${m}`));
  }
  if (name === "") errors.push("name part must be non-empty");
  else if (utf8Length(name) > 63) errors.push(`name part ${maxLenError(63)}`);
  if (!isQualifiedChars(name)) errors.push(`name part ${regex}`);
  return errors;
}

/** A label value (empty, or a qualified name's name part): apimachinery's `IsValidLabelValue`. */
function labelValue(value: string): string[] {
  const errors: string[] = [];
  if (utf8Length(value) > 63) errors.push(maxLenError(63));
  if (value !== "" && !isQualifiedChars(value)) {
    errors.push(
      regexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
        ["MyValue", "my_value", "12345"],
      ),
    );
  }
  return errors;
}

/** Which grammar a kind's object names follow (kube's `ValidateNameFunc` per strategy). */
export type NameRule = "subdomain" | "label" | "dns1035-label" | "path-segment";

/** The rule kube-apiserver applies to names of `kind` in `group`. */
export function nameRule(group: string, kind: string): NameRule {
  if (group === "" && kind === "Namespace") return "label";
  if (group === "" && kind === "Service") return "dns1035-label";
  if ((group === "" && kind === "Event") || group === "rbac.authorization.k8s.io") return "path-segment";
  return "subdomain";
}

/** What is wrong with `name` under `rule`. */
function checkName(rule: NameRule, name: string): string[] {
  switch (rule) {
    case "path-segment":
      if (name === "." || name === "..") return [`may not be '${name}'`];
      return ["/", "%"].filter((bad) => name.includes(bad)).map((bad) => `may not contain '${bad}'`);
    case "subdomain":
      return dns1123Subdomain(name);
    case "label":
      return dns1123Label(name);
    case "dns1035-label":
      return dns1035Label(name);
  }
}

type Json = Record<string, unknown>;

function stringOf(meta: Json, key: string): string {
  const value = meta[key];
  return typeof value === "string" ? value : "";
}

function stringMap(meta: Json, key: string): Array<[string, string]> {
  const map = meta[key];
  if (map === null || typeof map !== "object" || Array.isArray(map)) return [];
  return Object.entries(map as Json).map(([k, v]) => [k, typeof v === "string" ? v : ""]);
}

function asObject(value: unknown): Json {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Json) : {};
}

/**
 * The metadata of an object sent whole (server-side apply, a plugin's child) before the server
 * settles its namespace: its name by the kind's rule, labels, annotations, owner references and
 * finalizers.
 */
export function sentMeta(metadata: unknown, rule: NameRule): FieldError[] {
  const meta = asObject(metadata);
  const errors: FieldError[] = [];
  const name = stringOf(meta, "name");
  if (name === "") {
    errors.push(new FieldError("Required value", "metadata.name", undefined, "name or generateName is required"));
  } else {
    errors.push(...checkName(rule, name).map((m) => FieldError.invalid("metadata.name", name, m)));
  }
  errors.push(...labels(meta), ...annotations(meta), ...ownerReferences(meta), ...finalizers(meta));
  return errors;
}

function labels(meta: Json): FieldError[] {
  return stringMap(meta, "labels").flatMap(([k, v]) => [
    ...qualifiedName(k).map((m) => FieldError.invalid("metadata.labels", k, m)),
    ...labelValue(v).map((m) => FieldError.invalid("metadata.labels", v, m)),
  ]);
}

function annotations(meta: Json): FieldError[] {
  const entries = stringMap(meta, "annotations");
  const errors = entries.flatMap(([k]) =>
    qualifiedName(k.toLowerCase()).map((m) => FieldError.invalid("metadata.annotations", k, m)),
  );
  const size = entries.reduce((sum, [k, v]) => sum + utf8Length(k) + utf8Length(v), 0);
  if (size > ANNOTATIONS_MAX_BYTES) {
    errors.push(
      new FieldError("Too long", "metadata.annotations", undefined, `may not be more than ${ANNOTATIONS_MAX_BYTES} bytes`),
    );
  }
  return errors;
}

/** `metadata.ownerReferences`: the fields kube requires, no core Event owner, one controller. */
function ownerReferences(meta: Json): FieldError[] {
  const FIELD = "metadata.ownerReferences";
  const refs = meta["ownerReferences"];
  if (!Array.isArray(refs)) return [];
  const errors: FieldError[] = [];
  let controller: string | undefined;
  for (const item of refs) {
    const r = asObject(item);
    const apiVersion = stringOf(r, "apiVersion");
    const parts = apiVersion.split("/");
    const version = parts.length <= 2 ? (parts[parts.length - 1] ?? "") : "";
    const group = parts.length === 2 ? (parts[0] ?? "") : "";
    const kind = stringOf(r, "kind");
    const required: Array<[string, string, string]> = [
      ["apiVersion", version, "version"],
      ["kind", kind, "kind"],
      ["name", stringOf(r, "name"), "name"],
      ["uid", stringOf(r, "uid"), "uid"],
    ];
    for (const [key, value, what] of required) {
      if (value !== "") continue;
      const shown = key === "apiVersion" ? apiVersion : value;
      errors.push(FieldError.invalid(`${FIELD}.${key}`, shown, `${what} must not be empty`));
    }
    if (group === "" && version === "v1" && kind === "Event") {
      errors.push(new FieldError("Invalid value", FIELD, canonical(r), "/v1, Kind=Event is disallowed from being an owner"));
    }
    if (r["controller"] === true) {
      const self = `${kind}/${stringOf(r, "name")}`;
      if (controller === undefined) controller = self;
      else {
        errors.push(
          new FieldError(
            "Invalid value",
            FIELD,
            canonical(refs),
            `Only one reference can have Controller set to true. Found "true" in references for ${controller} and ${self}`,
          ),
        );
      }
    }
  }
  return errors;
}

/** `metadata.finalizers`: qualified names, not both `orphan` and `foregroundDeletion`. */
function finalizers(meta: Json): FieldError[] {
  const FIELD = "metadata.finalizers";
  const list = meta["finalizers"];
  if (!Array.isArray(list)) return [];
  const names = list.filter((f): f is string => typeof f === "string");
  const errors = names.flatMap((f) => qualifiedName(f).map((m) => FieldError.invalid(FIELD, f, m)));
  if (names.includes("orphan") && names.includes("foregroundDeletion")) {
    errors.push(
      new FieldError(
        "Invalid value",
        FIELD,
        `[]string{${names.map(quote).join(", ")}}`,
        "finalizer orphan and foregroundDeletion cannot be both set",
      ),
    );
  }
  return errors;
}
