/**
 * {@link ReconcileError}: a failed reconcile, retryable or terminal, as the contract's `error`.
 *
 * @module
 */

/** A failed reconcile. Throw it from `reconcile`; the SDK answers the host with it. */
export class ReconcileError extends Error {
  private constructor(
    message: string,
    /**
     * Retryable errors back off exponentially; terminal ones are reported and not retried
     * until the object changes.
     */
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = "ReconcileError";
  }

  /** A failure worth retrying with backoff (a dependency is not ready, a read failed). */
  static retryable(message: string): ReconcileError {
    return new ReconcileError(message, true);
  }

  /** A failure retrying cannot fix (an invalid spec): reported, not retried until the object changes. */
  static terminal(message: string): ReconcileError {
    return new ReconcileError(message, false);
  }

  /** `message (retryable)` or `message (terminal)`. */
  override toString(): string {
    return `${this.message} (${this.retryable ? "retryable" : "terminal"})`;
  }
}

/** What a thrown value says: an `Error`'s message, or the value as text. */
export function messageOf(thrown: unknown): string {
  if (thrown instanceof Error) return thrown.message;
  return typeof thrown === "string" ? thrown : String(thrown);
}
