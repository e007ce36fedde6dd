/**
 * SQL through the host's `sql` capability: statements with bound values and host-quoted
 * identifiers, run on a database the operator granted and the manifest declares
 * (`Manifest.capability("sql:<name>")`), through the `Database` that `ctx.sql("<name>")` returns.
 *
 * ```ts
 * ctx.sql("students").execute(
 *   new Statement("INSERT INTO {0} (id, age) VALUES ($1, $2)").identifier(spec.table).bind(key).bind(spec.age),
 * );
 * ```
 *
 * @module
 */

import { ReconcileError } from "./error.js";

/** A value forced to SQL's floating point, even when it is a whole number: `bind(float(2))`. */
export class Float {
  constructor(readonly value: number) {}
}

/** Wraps `value` to be sent as a float. */
export function float(value: number): Float {
  return new Float(value);
}

/**
 * A parameter or column value. Integers travel as `bigint` (SQL's 64-bit integers do not fit a
 * `number`), floats as `number`. Binding a `number` that is a safe integer sends an integer;
 * wrap it in {@link float} to send a float.
 */
export type SqlValue = null | boolean | bigint | number | string | Float;

/** A column value as the host returns it: integers as `bigint`, floats as `number`. */
export type Column = null | boolean | bigint | number | string;

/**
 * One statement: values written `$1`, `$2`, ... and bound, never spliced; identifiers written
 * `{0}`, `{1}`, ... and quoted by the host (`{{` and `}}` for literal braces).
 */
export class Statement {
  readonly identifiers: string[] = [];
  readonly params: SqlValue[] = [];

  constructor(readonly query: string) {}

  /** The next identifier (`{0}`, then `{1}`, ...): the host checks and quotes it. */
  identifier(name: string): this {
    this.identifiers.push(name);
    return this;
  }

  /** The next parameter (`$1`, then `$2`, ...); `undefined` binds NULL. */
  bind(value: SqlValue | undefined): this {
    this.params.push(value === undefined ? null : value);
    return this;
  }
}

/** What one statement returned. */
export class Rows {
  constructor(
    /** Column names of the result (empty for statements that return no rows). */
    readonly columns: string[],
    /** The rows, each with one value per column. */
    readonly rows: Column[][],
    /** Rows inserted, updated, deleted or returned. */
    readonly affected: number,
  ) {}

  /** The value of `column` in row `row`; undefined when either does not exist. */
  get(row: number, column: string): Column | undefined {
    const index = this.columns.indexOf(column);
    return index < 0 ? undefined : this.rows[row]?.[index];
  }
}

/** Why a SQL call failed. */
export class SqlError extends Error {
  constructor(
    message: string,
    /** The SQLSTATE code when the database reported one (`23505` for a unique violation). */
    readonly sqlstate: string | undefined,
    /** Whether retrying later could succeed (unreachable, timed out, serialization failure). */
    readonly transient: boolean,
  ) {
    super(message);
    this.name = "SqlError";
  }

  /** The message with its SQLSTATE, for logs and reconcile errors. */
  describe(): string {
    return this.sqlstate === undefined ? this.message : `${this.message} (SQLSTATE ${this.sqlstate})`;
  }

  /**
   * As a reconcile error: retried when the database said it was transient, terminal otherwise
   * (bad SQL, a violated constraint: the same input fails the same way). An uncaught SqlError
   * fails a reconcile this way.
   */
  toReconcileError(): ReconcileError {
    const message = `sql: ${this.describe()}`;
    return this.transient ? ReconcileError.retryable(message) : ReconcileError.terminal(message);
  }
}
