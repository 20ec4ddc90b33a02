/**
 * Tombstones: a deleted thread stays deleted. Every delete path (the saver's
 * `deleteThread`, `prune`'s expiry, the CLI's `threads delete`, the adoption
 * bridge) leaves a row in `checkpoint_tombstones`, and every write (`put`,
 * `putWrites`, the bridge's copies of an official saver's writes) passes a
 * gate first: a put `checkpointer_put_gate` (migration 0009), pending writes
 * and the bridge `checkpointer_thread_gate` (0007). This file is their SQL,
 * shared by those statements, and the rule.
 *
 * ## The rule
 *
 * A tombstone holds the thread id, when it was deleted, and `M`, the greatest
 * checkpoint id (byte order) the thread held then, in any namespace, counting
 * the checkpoints its pending writes name (and `M` of earlier deletions). On a
 * thread with a tombstone, a write is refused, with `ThreadDeletedError` and
 * nothing written, when
 * - (`history`) it names a checkpoint id <= `M` that is not stored now: a
 *   put's own id, its parent's or an enclosing graph's checkpoint it names
 *   (`metadata.parents`, each in its namespace); a putWrites' checkpoint; or
 * - (`thread`) no lineage of the thread has a head (nothing has started it
 *   again since the deletion), unless it is a put that starts a lineage: one
 *   without a parent, but for a subgraph's input checkpoint (`source`
 *   "input", naming its enclosing graphs' checkpoints in `metadata.parents`;
 *   see below).
 *
 * Puts check both rules in `checkpointer_put_gate` (migration 0009), writes
 * in `checkpointer_thread_gate` (0007). A refused put also takes along what
 * was stored under its checkpoint while the put was on its way: the
 * namespaces of checkpoints that name it in `metadata.parents` (subgraphs of
 * its tasks: task ids, and so those namespaces, derive from the checkpoint
 * they ran from) and the pending writes keyed to it.
 *
 * Why this catches a run that was in flight: LangGraph ids are uuid6, ordered
 * by the clock of the process that made them, and a run's writes after the
 * deletion either name a checkpoint it made before (<= `M` when stored, or,
 * if it was never stored, the parent of one that names it is), or a
 * checkpoint it made after, which it never got to store (its first put after
 * the deletion is refused, and LangGraph chains puts: it makes no later one).
 * Those later writes (async durability's next steps, exit durability's final
 * writes, a subgraph's input checkpoint) meet a thread with no head. A new
 * conversation starts with a root put, whose ids are newer than `M`; its
 * writes then find its head. With "exit" durability LangGraph stores a
 * subgraph's last checkpoint (never its input checkpoint: `source` "loop")
 * before the root checkpoint it names (issue 37: refusing it lost a new
 * conversation's interrupt); it starts a lineage, and if the run it belongs
 * to was deleted, the root put that follows is refused and takes it along.
 * A stored id is never refused, so a copy (`copyThread`, an import) onto a
 * deleted thread id is continued normally.
 *
 * Limits, said plainly:
 * - Clock skew: a new conversation whose ids come from a clock behind the one
 *   that wrote `M` by more than the time since the deletion is refused
 *   (`history`) until that time has passed.
 * - While a new conversation runs on the id, a deleted run still going may
 *   store writes of checkpoints it never stored (nothing reads them; prune
 *   collects them after its grace period).
 * - An official saver's instance during an adoption (the bridge): it sends a
 *   run's writes without waiting for their checkpoint's put, so its writes
 *   are refused only when they name the deleted history (its puts by both
 *   rules of the writes' gate).
 * - Exit durability on a thread that held nothing stored when it was deleted:
 *   the run's puts are indistinguishable from a new conversation's.
 * - A process that stops between an "exit" run's subgraph checkpoint and its
 *   root put leaves that subgraph checkpoint stored, without the root that
 *   names it (nothing reads it through the root; prune collects it).
 * - A tombstone is collected by prune after `keepTombstones` (default 7 days):
 *   a run still going after that is no longer refused.
 *
 * ## Why it is airtight against a concurrent deletion
 *
 * A statement reads with the snapshot taken when it started, so a check in
 * the write's own statement would miss a deletion that committed while the
 * write waited (for the head row's lock, say). The gate first takes a
 * shared advisory lock of the thread ({@link deleteLockName}); a deletion takes
 * it exclusively, before it reads what to delete. Then either the write got
 * its lock first (the deletion waits for it to commit, and deletes what it
 * wrote) or after the deletion committed; the gate, a VOLATILE function,
 * reads the tombstone with a snapshot taken after its lock, so it sees it.
 * The write statements call the gate before they lock any row (a deletion
 * holds the advisory lock while it waits for row locks: the other order would
 * deadlock).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { ThreadDeletedError } from "../errors.js";
import { emit } from "../events.js";
import { KNOWS_ELEMENTS_SQL } from "./element-names.js";
import type { SaverContext } from "./context.js";
import type { Threads } from "./threads.js";

/** Tombstones are collected by prune once older than this, unless told otherwise (`keepTombstones`). */
export const DEFAULT_KEEP_TOMBSTONES = "7d";

/**
 * The saver's `deleteThread`: two statements in one transaction, the thread's
 * deletion lock first (waiting for its writes in flight to commit; later ones
 * wait for this, then find the tombstone), then the tombstone and every row,
 * in a snapshot that sees what those writes stored.
 */
export async function deleteThread(ctx: SaverContext, threadId: string): Promise<void> {
  const started = performance.now();
  const counts = await ctx.db.transaction(async (tx) => {
    await tx.query(KNOWS_ELEMENTS_SQL); // element rows go too (migration 0008's guard)
    await tx.query(ctx.queries.lockThreadForDelete, [threadId]);
    return (await tx.query<{ checkpoints: number; writes: number; blobs: number }>(ctx.queries.deleteThread, [threadId])).rows[0]!;
  });
  ctx.elements?.forgetThread(threadId);
  emit(ctx.onEvent, { type: "deleteThread", threadId, ...counts, durationMs: performance.now() - started });
}

/**
 * A write refused because its thread was deleted and has not started again
 * (`reason: "thread"`) may be a new conversation's, sent before the put that
 * starts it committed: wait once for the saver's puts in flight on the
 * thread's root lineage (and, for writes, on their own: threads.ts), then say
 * whether to try again (one was in flight, or a put of the thread settled
 * since the call began: `since`, from `threads.putsDone`). A put in the root
 * namespace is never such a case (LangGraph puts a checkpoint only once its
 * parent's put is done).
 */
export async function waitForRestart(threads: Threads, err: unknown, config: RunnableConfig, isWrite: boolean, since: number): Promise<boolean> {
  if (!(err instanceof ThreadDeletedError) || err.reason !== "thread") return false;
  if (!isWrite && err.checkpointNs === "") return false;
  return threads.putsSettled(err.threadId, since, isWrite ? config : undefined);
}
