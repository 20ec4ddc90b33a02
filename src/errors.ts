/**
 * Typed errors. Every error this package throws is a {@link CheckpointerError}
 * with a stable `code`; database failures keep the driver error as `cause`
 * (with its SQLSTATE) but never copy parameters or payloads into messages.
 * This file is where the package and its users import them from: the base
 * class lives in errors/base.ts, database failures and their classification
 * in errors/database.ts, the migrations' errors in errors/schema.ts, the
 * store's in errors/store.ts.
 */
import { CheckpointerError } from "./errors/base.js";
import { suggest, type SuggestedCommand } from "./hint.js";

export { CheckpointerError, type CheckpointerErrorCode } from "./errors/base.js";
export { DatabaseOperationError, UnconfirmedCommitError, classify, describeFailure, failureText, isRetryable, sqlStateOf, type FailureClass } from "./errors/database.js";
// The migration errors and the store's live in errors/schema.ts and errors/store.ts; users import them from here.
export {
  AdoptionRequiredError,
  AdoptionRolledBackError,
  MigrationError,
  PartitionsMismatchError,
  SchemaNotMigratedError,
  SchemaTooNewError,
  UnsafeSchemaError,
  migrationNumber,
  type OfficialTables,
} from "./errors/schema.js";
export { StoreAdoptionRequiredError, StoreIndexMismatchError, VectorExtensionMissingError, type VectorIndexShape } from "./errors/store.js";

/**
 * Bad input to a saver method or function, detected before any SQL runs.
 * `field` names the offending input, e.g. `config.configurable.thread_id`.
 *
 * @example
 * ```ts
 * await saver.getTuple({ configurable: { thread_id: 42 } }); // throws InvalidInputError, field "config.configurable.thread_id"
 * ```
 */
export class InvalidInputError extends CheckpointerError {
  readonly field: string;
  constructor(field: string, problem: string) {
    super("INVALID_INPUT", `Invalid ${field}: ${problem}`);
    this.field = field;
  }
}

/**
 * A value, or everything one statement would carry, is larger than the saver
 * accepts: a single serialized value above `maxValueBytes`, or a whole `put` /
 * `putWrites` above what Postgres takes in one message (1 GiB, less 1 MiB
 * kept for keys and framing). Found after serialization and before any SQL;
 * nothing was written. Not retryable: the same input fails the same way.
 * `largest` names the biggest parts (channels, writes), largest first.
 *
 * @example
 * ```ts
 * try { await saver.put(config, checkpoint, metadata, versions); }
 * catch (e) { if (e instanceof PayloadTooLargeError) console.error(e.largest.map((p) => `${p.name}: ${p.bytes}`)); }
 * ```
 */
export class PayloadTooLargeError extends InvalidInputError {
  /** Serialized size of the value, or of the whole statement's payload. */
  readonly bytes: number;
  /** The limit it exceeded. */
  readonly limit: number;
  /** The largest parts, largest first (at most 5). */
  readonly largest: { name: string; bytes: number }[];
  constructor(field: string, problem: string, info: { bytes: number; limit: number; largest: { name: string; bytes: number }[] }) {
    super(field, problem);
    this.bytes = info.bytes;
    this.limit = info.limit;
    this.largest = info.largest;
  }
}

/**
 * Bad options passed to a constructor or a plain function (`migrate`, `prune`, ...).
 *
 * @example
 * ```ts
 * new PostgresSaver(pool, { schema: "" }); // throws InvalidOptionsError, option "schema"
 * ```
 */
export class InvalidOptionsError extends CheckpointerError {
  readonly option: string;
  constructor(option: string, problem: string) {
    super("INVALID_OPTIONS", `Invalid option ${option}: ${problem}`);
    this.option = option;
  }
}

export type ConflictReason = "head-moved" | "run-in-progress";

/**
 * A `put` in `lineage: "linear"` mode whose parent is not the lineage's
 * current head: another writer got there first. Nothing was written.
 * Retryable: re-run the invocation from the new head (see `withConflictRetry`).
 *
 * @example
 * ```ts
 * try { await graph.invoke(input, config); }
 * catch (e) { if (e instanceof CheckpointConflictError) console.log(e.actualHead); }
 * ```
 */
export class CheckpointConflictError extends CheckpointerError {
  readonly threadId: string;
  readonly checkpointNs: string;
  /** The parent the rejected put named (undefined for a root put). */
  readonly expectedParent: string | undefined;
  /** The head the lineage had when the put was rejected (undefined if none). */
  readonly actualHead: string | undefined;
  /**
   * `head-moved`: another writer advanced the lineage first.
   * `run-in-progress`: the head is right, but another run has unfinished steps
   * on it; a new run (input or state update) must wait for it.
   * (A parent that is not stored is not a conflict: see {@link CheckpointParentMissingError}.)
   */
  readonly reason: ConflictReason;
  constructor(info: {
    threadId: string;
    checkpointNs: string;
    expectedParent: string | undefined;
    actualHead: string | undefined;
    reason?: ConflictReason;
  }) {
    const reason = info.reason ?? "head-moved";
    super(
      "CHECKPOINT_CONFLICT",
      `Checkpoint conflict on thread ${JSON.stringify(info.threadId)} namespace ${JSON.stringify(info.checkpointNs)}: ` +
        (reason === "run-in-progress"
          ? `another run has unfinished steps on the head ${info.actualHead}. `
          : `the put expected parent ${info.expectedParent ?? "(none: a root)"} but the head is ${info.actualHead ?? "(none)"}. `) +
        "Nothing was written. Retry when the other run is done.",
      { retryable: true },
    );
    this.reason = reason;
    this.threadId = info.threadId;
    this.checkpointNs = info.checkpointNs;
    this.expectedParent = info.expectedParent;
    this.actualHead = info.actualHead;
  }
}

/**
 * A walk over a thread's parent links found them broken: a cycle (a
 * checkpoint is its own ancestor) or, where the walk needs it, a parent that
 * does not exist. Only a corrupted or hand-edited row does this; the walk
 * stops (it never runs on), and nothing was changed. Not retryable.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof HistoryCorruptError) console.error(e.threadId, e.checkpointId, e.reason); }
 * ```
 */
export class HistoryCorruptError extends CheckpointerError {
  readonly threadId: string;
  readonly checkpointNs: string;
  /** Where the walk stopped: a checkpoint on the cycle, or the one whose parent is missing. */
  readonly checkpointId: string;
  readonly reason: "cycle" | "missing-parent";
  constructor(info: { schema: string; threadId: string; checkpointNs: string; checkpointId: string; reason: "cycle" | "missing-parent"; operation: string }) {
    const rows: SuggestedCommand = { words: ["export", info.threadId], schema: info.schema };
    super(
      "HISTORY_CORRUPT",
      `${info.operation}: the parent links of thread ${JSON.stringify(info.threadId)} namespace ${JSON.stringify(info.checkpointNs)} are broken at checkpoint ` +
        `${JSON.stringify(info.checkpointId)}: ${info.reason === "cycle" ? "they form a cycle" : "its parent does not exist"}. ` +
        `A row was changed by hand or corrupted; see its rows with ${suggest(rows)}.`,
      { suggested: [rows] },
    );
    this.threadId = info.threadId;
    this.checkpointNs = info.checkpointNs;
    this.checkpointId = info.checkpointId;
    this.reason = info.reason;
  }
}

/**
 * A `put` named a parent checkpoint that is not stored, and the checkpoint
 * cannot stand without it. Nothing was written. Not retryable:
 * `withConflictRetry` rethrows it at once.
 *
 * - Branch mode accepts an unknown parent as long as every channel value the
 *   new checkpoint refers to (`channel_versions`) is written by the put or
 *   already stored; `missing` lists the ones that are gone (the thread was
 *   deleted, or pruned, under a running graph).
 * - Linear mode needs the parent to be the lineage's head, so an unknown
 *   parent is refused even when no value is missing (`missing` may be empty).
 *
 * @example
 * ```ts
 * try { await graph.invoke(null, config); }
 * catch (e) { if (e instanceof CheckpointParentMissingError) console.log(e.parentCheckpointId, e.missing); }
 * ```
 */
export class CheckpointParentMissingError extends CheckpointerError {
  readonly threadId: string;
  readonly checkpointNs: string;
  /** The id of the checkpoint that was refused. */
  readonly checkpointId: string;
  /** The parent the put named, which is not stored. */
  readonly parentCheckpointId: string;
  /** The channel values the checkpoint refers to that are not stored, as `{ channel, version }`. */
  readonly missing: ReadonlyArray<{ channel: string; version: string }>;
  constructor(info: {
    threadId: string;
    checkpointNs: string;
    checkpointId: string;
    parentCheckpointId: string;
    missing: ReadonlyArray<{ channel: string; version: string }>;
  }) {
    const shown = info.missing.slice(0, 10).map((m) => `${JSON.stringify(m.channel)}@${m.version}`);
    if (info.missing.length > shown.length) shown.push(`and ${info.missing.length - shown.length} more`);
    super(
      "CHECKPOINT_PARENT_MISSING",
      `Checkpoint ${info.checkpointId} on thread ${JSON.stringify(info.threadId)} namespace ${JSON.stringify(info.checkpointNs)} ` +
        `names parent ${info.parentCheckpointId}, which is not stored` +
        (info.missing.length > 0
          ? `, and refers to channel values that are not stored either: ${shown.join(", ")} (the thread was deleted or pruned under the run?). `
          : "; linear lineage needs the parent to be the head. ") +
        "Nothing was written.",
    );
    this.threadId = info.threadId;
    this.checkpointNs = info.checkpointNs;
    this.checkpointId = info.checkpointId;
    this.parentCheckpointId = info.parentCheckpointId;
    this.missing = info.missing;
  }
}

/**
 * A `put` or `putWrites` on a deleted thread that continues its deleted
 * history: a run that was still in flight when the thread was deleted
 * (`deleteThread`, `prune`'s expiry, the CLI), writing after it. Nothing was
 * written, and the thread stays deleted. Not retryable: `withRetry` and
 * `withConflictRetry` rethrow it at once. A new conversation on the same
 * thread id (a run that starts from no checkpoint) is not refused. The rule is
 * in docs/threads.md ("Deleted threads stay deleted").
 *
 * - `history`: the write names a checkpoint of the deleted history (its
 *   parent, its own id, or the checkpoint of the writes) that is not stored.
 * - `thread`: nothing has started the thread again since it was deleted, and
 *   the write does not start a conversation (it has a parent, or is a
 *   subgraph's checkpoint, or is pending writes).
 *
 * @example
 * ```ts
 * try { await graph.invoke(input, config); }
 * catch (e) { if (e instanceof ThreadDeletedError) console.log(`thread ${e.threadId} was deleted during the run`); }
 * ```
 */
export class ThreadDeletedError extends CheckpointerError {
  readonly threadId: string;
  readonly checkpointNs: string;
  /** The checkpoint the refused put stores, or the refused writes belong to. */
  readonly checkpointId: string;
  readonly operation: "put" | "putWrites";
  readonly reason: "history" | "thread";
  constructor(info: { threadId: string; checkpointNs: string; checkpointId: string; operation: "put" | "putWrites"; reason: "history" | "thread" }) {
    super(
      "THREAD_DELETED",
      `${info.operation} on thread ${JSON.stringify(info.threadId)} namespace ${JSON.stringify(info.checkpointNs)} (checkpoint ${info.checkpointId}) refused: ` +
        (info.reason === "history"
          ? "the thread was deleted, and this continues its deleted history. "
          : "the thread was deleted, and no new conversation has started on it since. ") +
        "Nothing was written; a run that starts anew (from no checkpoint) may use the thread id.",
    );
    this.threadId = info.threadId;
    this.checkpointNs = info.checkpointNs;
    this.checkpointId = info.checkpointId;
    this.operation = info.operation;
    this.reason = info.reason;
  }
}

/**
 * `copyThread` (or the CLI's `threads copy`) refused, and wrote nothing:
 * - `source-missing`: the source thread holds no checkpoint;
 * - `target-exists`: the target thread holds rows (pass `overwrite: true`, or
 *   `--overwrite`, to replace them);
 * - `checkpoint-missing`: `upTo` names no checkpoint of the source's root namespace;
 * - `needs-serializer`: the source holds values encrypted for their rows
 *   (`EncryptedSerializer`) and the saver copying it has not that serializer
 *   (the CLI: `--module`), so the copy could not be read.
 * Not retryable.
 *
 * @example
 * ```ts
 * try { await saver.copyThread("chat-1", "chat-2"); }
 * catch (e) { if (e instanceof ThreadCopyError && e.reason === "target-exists") await saver.copyThread("chat-1", "chat-2", { overwrite: true }); }
 * ```
 */
export type ThreadCopyRefusal = "source-missing" | "target-exists" | "checkpoint-missing" | "needs-serializer";

export class ThreadCopyError extends CheckpointerError {
  readonly fromThreadId: string;
  readonly toThreadId: string;
  readonly reason: ThreadCopyRefusal;
  constructor(info: { fromThreadId: string; toThreadId: string; upTo?: string; reason: ThreadCopyRefusal }) {
    const what = {
      "source-missing": `thread ${JSON.stringify(info.fromThreadId)} holds no checkpoint`,
      "target-exists": `thread ${JSON.stringify(info.toThreadId)} exists (pass overwrite: true, or --overwrite, to replace it)`,
      "checkpoint-missing": `thread ${JSON.stringify(info.fromThreadId)} has no checkpoint ${JSON.stringify(info.upTo)} in its root namespace`,
      "needs-serializer": `thread ${JSON.stringify(info.fromThreadId)} holds values encrypted for their rows; copy it with the saver's serializer (the CLI: --module)`,
    }[info.reason];
    super("THREAD_COPY_REFUSED", `copyThread ${JSON.stringify(info.fromThreadId)} -> ${JSON.stringify(info.toThreadId)} refused: ${what}. Nothing was written.`);
    this.fromThreadId = info.fromThreadId;
    this.toThreadId = info.toThreadId;
    this.reason = info.reason;
  }
}

/**
 * A value could not be encoded (a function as the whole value, nesting deeper
 * than the serializer allows; in strict mode anything that would not come back
 * exactly, such as a class instance). Nothing was written.
 *
 * @example
 * ```ts
 * await new MsgpackSerializer({ strict: true }).dumpsTyped({ link: new URL("https://x.dev") });
 * // throws SerializationError, path "$.link"
 * ```
 */
export class SerializationError extends CheckpointerError {
  /** The saver input that held the value, e.g. `put checkpoint.channel_values["messages"]` (set by the saver). */
  readonly field: string | undefined;
  /** Where inside the value, e.g. `$.items[2].link`, when the serializer could tell. */
  readonly path: string | undefined;
  constructor(message: string, options?: { cause?: unknown; field?: string; path?: string }) {
    super("SERIALIZATION_FAILED", options?.field === undefined ? message : `${options.field}: ${message}`, { cause: options?.cause });
    this.field = options?.field;
    this.path = options?.path;
  }
}

/**
 * Stored bytes could not be decoded into an allowed value (corrupt data, an
 * unknown type tag or extension, a type outside the allowlist).
 *
 * @example
 * ```ts
 * await serde.loadsTyped("msgpack", new Uint8Array([0xc1])); // throws DeserializationError
 * ```
 */
export class DeserializationError extends CheckpointerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("DESERIALIZATION_FAILED", message, options);
  }
}
