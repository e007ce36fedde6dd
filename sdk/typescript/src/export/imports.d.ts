// The world's imports as componentize-js binds them (from `jco guest-types`); a `result`'s
// error is thrown as an error whose `payload` holds it. Only `component.ts` imports them.

declare module "wasmctrl:plugin/log@0.3.1" {
  export function log(level: import("./wire.js").Level, message: string, fields: Array<[string, string]>): void;
}

declare module "wasmctrl:plugin/cache@0.3.1" {
  type Gvk = import("./wire.js").Gvk;
  export function get(kind: Gvk, namespace: string, name: string): string | undefined;
  export function list(kind: Gvk, namespace: string, labels: string): string[];
  export function children(kind: Gvk, namespace: string, ownerUid: string): string[];
}

declare module "wasmctrl:plugin/sql@0.3.1" {
  export function execute(
    database: string,
    statements: Array<import("./wire.js").Statement>,
  ): Array<import("./wire.js").Rows>;
}
