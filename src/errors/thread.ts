/** What a thread's write or read met: a conflict, a missing parent, a deleted thread, a corrupt history, a copy or import refused, a state version it cannot read. */
import { CheckpointerError } from "./base.js";
import { suggest, type SuggestedCommand } from "../hint.js";

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
 * Importing a thread that already has rows in the target. Nothing was written.
 * (Code `INVALID_INPUT`: the input conflicts with what is stored.)
 *
 * @example
 * ```ts
 * try { await importThread({ pool, records }); } catch (e) { if (e instanceof ThreadExistsError) console.log(e.threadId); }
 * ```
 */
export class ThreadExistsError extends CheckpointerError {
  readonly threadId: string;
  /** The target schema (the one the suggested `threads delete` acts on). */
  readonly schema: string;
  constructor(threadId: string, schema: string, options?: { cause?: unknown }) {
    const remove: SuggestedCommand = { words: ["threads", "delete", threadId], schema };
    super(
      "INVALID_INPUT",
      `Thread ${JSON.stringify(threadId)} already exists in the target schema "${schema}"; nothing was imported. ` +
        `Delete it first (${suggest(remove)} or \`saver.deleteThread(id)\`), ` +
        "or skip existing threads (`import --skip-existing`, `ifExists: \"skip\"`).",
      { ...options, suggested: [remove] },
    );
    this.threadId = threadId;
    this.schema = schema;
  }
}

/**
 * A checkpoint cannot be brought to the saver's `stateVersion`: an upcaster in
 * the chain is missing, or the checkpoint is newer than the code (a rolled-back
 * deploy). Nothing is loaded silently.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof StateVersionError) console.error(e.threadId, e.storedVersion, e.missingUpcaster); }
 * ```
 */
export class StateVersionError extends CheckpointerError {
  readonly threadId: string;
  readonly checkpointNs: string;
  readonly checkpointId: string;
  readonly storedVersion: number;
  readonly stateVersion: number;
  /** The `upcasters` key that is missing (undefined when the checkpoint is too new). */
  readonly missingUpcaster: number | undefined;
  constructor(info: { threadId: string; checkpointNs: string; checkpointId: string; storedVersion: number; stateVersion: number; missingUpcaster?: number }) {
    const where = `checkpoint ${info.checkpointId} of thread ${JSON.stringify(info.threadId)} (namespace ${JSON.stringify(info.checkpointNs)})`;
    super(
      info.missingUpcaster === undefined ? "STATE_VERSION_TOO_NEW" : "UPCASTER_MISSING",
      info.missingUpcaster === undefined
        ? `${where} was written with state version ${info.storedVersion}, newer than this code's stateVersion ${info.stateVersion}; ` +
            "deploy the newer code (or add a downcast) instead of loading it incompletely"
        : `${where} has state version ${info.storedVersion}, the saver's stateVersion is ${info.stateVersion}, ` +
            `and upcasters[${info.missingUpcaster}] (version ${info.missingUpcaster} -> ${info.missingUpcaster + 1}) is missing`,
    );
    this.threadId = info.threadId;
    this.checkpointNs = info.checkpointNs;
    this.checkpointId = info.checkpointId;
    this.storedVersion = info.storedVersion;
    this.stateVersion = info.stateVersion;
    this.missingUpcaster = info.missingUpcaster;
  }
}
