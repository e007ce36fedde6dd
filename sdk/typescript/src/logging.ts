/**
 * Logging into the host's log pipeline: `log.info("scaled", { replicas: 3 })` reaches the host's
 * `log` import, which adds the plugin's name and the key being reconciled. Under the harness the
 * lines are captured for `Harness.logs()`.
 *
 * One module-level sink rather than a logger on the context: every call runs in a fresh
 * instance, so the SDK points the sink at the host when a call starts, and helpers anywhere in a
 * plugin can log without a context at hand.
 *
 * @module
 */

/** A log record's level. */
export type Level = "trace" | "debug" | "info" | "warn" | "error";

/** Key/value fields of a log line; `undefined` values are left out. */
export type Fields = Readonly<Record<string, unknown>>;

/** Where log lines go: level, message and fields as text. */
export type LogSink = (level: Level, message: string, fields: Array<[string, string]>) => void;

let sink: LogSink | undefined;

/** Runs `body` with log lines going to `to` (the host's import, or a harness), then restores. */
export function withLogSink<R>(to: LogSink, body: () => R): R {
  const before = sink;
  sink = to;
  try {
    return body();
  } finally {
    sink = before;
  }
}

/** A field's value as text: strings as they are, objects as JSON, anything else as `String` does. */
function fieldText(value: unknown): string {
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object") {
    try {
      return JSON.stringify(value);
    } catch {
      return String(value);
    }
  }
  return String(value);
}

function emit(level: Level, message: string, fields: Fields | undefined): void {
  if (sink === undefined) return;
  const pairs: Array<[string, string]> = [];
  for (const [key, value] of Object.entries(fields ?? {})) {
    if (value !== undefined) pairs.push([key, fieldText(value)]);
  }
  sink(level, message, pairs);
}

/** Log a line at a level: `log.info("reconciling", { key: ctx.key })`. */
export const log = {
  trace: (message: string, fields?: Fields): void => emit("trace", message, fields),
  debug: (message: string, fields?: Fields): void => emit("debug", message, fields),
  info: (message: string, fields?: Fields): void => emit("info", message, fields),
  warn: (message: string, fields?: Fields): void => emit("warn", message, fields),
  error: (message: string, fields?: Fields): void => emit("error", message, fields),
} as const;
