/**
 * The base of every error this package throws: {@link CheckpointerError}
 * with a stable `code`. Its own module so that the error modules
 * (src/errors.ts, src/errors/database.ts) build on it without importing
 * each other.
 */
import type { SuggestedCommand } from "../hint.js";

/** Stable error codes. Match on these, never on messages. */
export type CheckpointerErrorCode =
  | "INVALID_INPUT"
  | "INVALID_OPTIONS"
  | "SCHEMA_NOT_MIGRATED"
  | "SCHEMA_TOO_NEW"
  | "MIGRATION_FAILED"
  | "CHECKPOINT_CONFLICT"
  | "CHECKPOINT_PARENT_MISSING"
  | "THREAD_DELETED"
  | "THREAD_COPY_REFUSED"
  | "SERIALIZATION_FAILED"
  | "DESERIALIZATION_FAILED"
  | "DATABASE_ERROR"
  | "DATA_DIR_LOCKED"
  | "UPCASTER_MISSING"
  | "STATE_VERSION_TOO_NEW"
  | "ADOPTION_REQUIRED"
  | "ADOPTION_ROLLED_BACK"
  | "HISTORY_CORRUPT"
  | "UNSAFE_SCHEMA"
  | "DATABASE_URL_MISSING"
  | "VECTOR_EXTENSION_MISSING"
  | "STORE_INDEX_MISMATCH"
  | "PARTITIONS_MISMATCH";

/**
 * Base class of every error thrown by this package.
 *
 * @example
 * ```ts
 * try { await saver.getTuple(config); }
 * catch (err) { if (err instanceof CheckpointerError && err.retryable) retry(); else throw err; }
 * ```
 */
export class CheckpointerError extends Error {
  /** Stable, machine-readable code. */
  readonly code: CheckpointerErrorCode;
  /** True when repeating the same operation later may succeed. */
  readonly retryable: boolean;
  /**
   * The CLI commands the message suggests (src/hint.ts), as data: the CLI
   * prints them with the connection flags of the command that failed.
   */
  readonly suggested: readonly SuggestedCommand[];

  constructor(code: CheckpointerErrorCode, message: string, options?: { cause?: unknown; retryable?: boolean; suggested?: readonly SuggestedCommand[] }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options?.retryable ?? false;
    this.suggested = options?.suggested ?? [];
  }
}
