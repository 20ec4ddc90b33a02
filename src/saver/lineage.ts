/**
 * What a put does to its lineage, and run leases. `runPut` sends an encoded
 * put (sql/put.ts `put`, then `putChecked` for what that one leaves) and
 * turns its answer into the outcome: stored (perhaps as a fork, reported by
 * a `fork` event), a conflict, or a parent that is not stored. `RunLeases`
 * gives a lineage back to other runs when a run fails in linear mode.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import type { ChannelVersions } from "@langchain/langgraph-checkpoint";
import { CheckpointConflictError, CheckpointParentMissingError, DatabaseOperationError, SchemaNotMigratedError, ThreadDeletedError } from "../errors.js";
import { emit } from "../events.js";
import { readConfig } from "../validate.js";
import type { SaverContext } from "./context.js";
import { lineageKey } from "./elements.js";
import { putValues } from "./params.js";
import type { RefusalReason } from "./tombstones.js";
import { sharedFailure, type TakenWrites } from "./threads.js";
import { MAX_STATEMENT_BYTES } from "./encode.js";
import { carriedValues, type EncodedPut } from "./write.js";

/**
 * Bound on re-runs of a put that lost the race to create its lineage's head
 * row (the re-run sees the winner's head; only a thread deleted and re-created
 * in between each time could need another).
 */
const MAX_PUT_ATTEMPTS = 10;

/** A row of the put statements (sql/put.ts `put`, `putChecked`). */
interface PutRow {
  /** Why the thread's tombstone refused the put (tombstones.ts); null: not refused. */
  refused: RefusalReason | null;
  head_id: string | null;
  ok: boolean;
  parent_known: boolean;
  late: boolean;
  moved: number;
  inserted: number;
  blobs: number;
  missing: [string, string][] | null;
}

/**
 * Store an encoded put and report what it did to its lineage; `started` is
 * when the put was called (`performance.now()`), for the events' durations.
 * `take` hands it the lineage's writes waiting to go out (threads.ts): its
 * first statement carries them (`putWithWrites`).
 */
export async function runPut(
  ctx: SaverContext,
  put: EncodedPut,
  started: number,
  sendAll?: () => Promise<EncodedPut>,
  take?: (maxBytes: number) => TakenWrites | undefined,
): Promise<RunnableConfig> {
  const { allowFork } = put;
  let { params } = put;
  const { threadId, checkpointNs: ns, checkpointId: id } = params;
  const parentId = params.parentId ?? undefined;
  let values = putValues(params);

  // The head row is locked FOR UPDATE; a concurrent put that moved it while we
  // waited is seen (the locked row is re-read). The one case the move fails
  // is two first puts of a lineage racing to create its head row: the loser
  // wrote nothing and runs again, now seeing the winner's head.
  // Puts whose parent is stored take one statement. One that names a parent
  // that is not stored, or a root put into a lineage that has a head, writes
  // nothing there and takes a second, checking statement (see putChecked).
  let checked = false;
  for (let attempt = 1; ; attempt++) {
    let row: PutRow | undefined;
    if (!checked) {
      type FastRow = Omit<PutRow, "parent_known" | "late" | "missing"> & { fast: boolean; writes_refused?: RefusalReason | null };
      // Taken now, with the statement about to leave: writes called while the put was being encoded go too.
      const carried = attempt === 1 ? take?.(MAX_STATEMENT_BYTES - put.bytes) : undefined;
      let fast: FastRow;
      if (carried === undefined) fast = (await ctx.query<FastRow>("put", values, "put")).rows[0]!;
      else {
        let withWrites: FastRow | undefined;
        try {
          withWrites = (await ctx.query<FastRow>("putWithWrites", carriedValues(params, carried.rows), "put")).rows[0]!;
        } catch (err) {
          // Lost connection, timeout...: what the put and each write would have met alone, so theirs.
          if (sharedFailure(err)) {
            carried.failed(err);
            throw err;
          }
          // Else each its own outcome: the writes on their own, the put's statement again without them.
          void carried.alone();
        }
        if (withWrites === undefined) fast = (await ctx.query<FastRow>("put", values, "put")).rows[0]!;
        else {
          fast = withWrites;
          // Stored before the put's own outcome is looked at: it is the put's alone. Refused writes are
          // sent again on their own, so each call gets its own refusal (and its retry, saver.ts).
          if (fast.writes_refused === null) carried.stored();
          else void carried.alone();
        }
      }
      if (fast.refused) throw new ThreadDeletedError({ threadId, checkpointNs: ns, checkpointId: id, operation: "put", reason: fast.refused });
      if (fast.fast) {
        row = Object.assign(fast, { parent_known: true, late: false, missing: null });
      } else {
        checked = true;
        // Elements left out as the parent's must be sent now: the parent is not stored (elements.ts).
        if (put.reliesOnParent && sendAll) {
          put = await sendAll();
          params = put.params;
        }
        values = putValues(params, referencedValues(put.channelVersions, params.channels, params.versions));
      }
    }
    row ??= (await ctx.query<PutRow>("putChecked", values, "put")).rows[0]!;
    if (row.refused) throw new ThreadDeletedError({ threadId, checkpointNs: ns, checkpointId: id, operation: "put", reason: row.refused });
    if (row.ok && row.moved === 0 && !row.late) {
      if (attempt < MAX_PUT_ATTEMPTS) continue;
      throw new DatabaseOperationError("put", new Error(`the head of lineage ${JSON.stringify(ns)} kept changing under ${MAX_PUT_ATTEMPTS} attempts`), { retryable: true });
    }
    let head = row.head_id ?? undefined;
    if (!row.ok && !row.parent_known) {
      const missing = (row.missing ?? []).map(([channel, version]) => ({ channel, version }));
      emit(ctx.onEvent, {
        type: "parentMissing",
        threadId,
        checkpointNs: ns,
        checkpointId: id,
        parentCheckpointId: parentId!,
        missing,
        durationMs: performance.now() - started,
      });
      throw new CheckpointParentMissingError({ threadId, checkpointNs: ns, checkpointId: id, parentCheckpointId: parentId!, missing });
    }
    if (!row.ok) {
      if (head === undefined) head = (await ctx.query<{ checkpoint_id: string }>("headId", [threadId, ns], "put")).rows[0]?.checkpoint_id;
      const reason = head === parentId ? "run-in-progress" : "head-moved";
      emit(ctx.onEvent, {
        type: "conflict",
        threadId,
        checkpointNs: ns,
        checkpointId: id,
        expectedParent: parentId,
        actualHead: head,
        reason,
        durationMs: performance.now() - started,
      });
      throw new CheckpointConflictError({ threadId, checkpointNs: ns, expectedParent: parentId, actualHead: head, reason });
    }
    if (head !== undefined && head !== parentId && head !== id && !row.late) {
      emit(ctx.onEvent, {
        type: "fork",
        threadId,
        checkpointNs: ns,
        checkpointId: id,
        parentCheckpointId: parentId,
        displacedHead: head,
        deliberate: allowFork,
      });
    }
    if (put.elements) ctx.elements?.rememberCheckpoint(lineageKey(threadId, ns), id, parentId ?? null, put.elements.lists, put.elements.whole);
    emit(ctx.onEvent, {
      type: "put",
      threadId,
      checkpointNs: ns,
      checkpointId: id,
      parentCheckpointId: parentId,
      blobs: row.blobs,
      durationMs: performance.now() - started,
    });
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } };
  }
}

/** The (channels, versions) a checkpoint refers to that this put does not write. */
function referencedValues(channelVersions: ChannelVersions | undefined, channels: string[], versions: string[]): { channels: string[]; versions: string[] } {
  const refChannels: string[] = [];
  const refVersions: string[] = [];
  for (const [channel, version] of Object.entries(channelVersions ?? {})) {
    const v = String(version);
    const i = channels.indexOf(channel);
    if (i < 0 || versions[i] !== v) {
      refChannels.push(channel);
      refVersions.push(v);
    }
  }
  return { channels: refChannels, versions: refVersions };
}

/** A run lease to release after a failed put or putWrites (linear mode). */
interface PendingRelease {
  threadId: string;
  checkpointNs: string;
  /** The checkpoints the failed run may have left as the head. */
  heads: string[];
  failedAt: number;
  attempt: number;
}

/** Run leases of a saver's failed runs, released now or retried in the background until `stop()`. */
export class RunLeases {
  /** Lease releases waiting to be retried; stop() clears them. */
  readonly #timers = new Set<NodeJS.Timeout>();
  #stopped = false;

  constructor(private readonly ctx: SaverContext) {}

  /**
   * Linear mode: a failed put or putWrites ends its run (LangGraph stops the
   * invocation), but the lineage's head still has tasks left, which would keep
   * new input out for `runLeaseMs`. Release the lease of the head this run
   * left (one of `ids`), if it is still the head: now, or, when that fails
   * (the database is what failed), again in the background until it works or
   * the lease ran out. A conflict means another run holds the lineage: nothing
   * to release.
   */
  async afterRunFailure(err: unknown, config: RunnableConfig, ids: unknown[]): Promise<void> {
    if (this.ctx.lineage !== "linear" || err instanceof CheckpointConflictError || err instanceof SchemaNotMigratedError || err instanceof ThreadDeletedError) return;
    let key: ReturnType<typeof readConfig>;
    try {
      key = readConfig(config, "put");
    } catch {
      return;
    }
    const heads = ids.filter((id): id is string => typeof id === "string" && id !== "");
    if (key.threadId === undefined || heads.length === 0) return;
    const lease = { threadId: key.threadId, checkpointNs: key.checkpointNs ?? "", heads, failedAt: Date.now(), attempt: 0 };
    if (!(await this.#release(lease))) this.#retry(lease);
  }

  /** Stop the background retries (the saver is closing). */
  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  /** One attempt; true when done (released, or nothing left to release). */
  async #release(lease: PendingRelease): Promise<boolean> {
    lease.attempt++;
    try {
      const { rows } = await this.ctx.run<{ checkpoint_id: string }>(
        this.ctx.queries.releaseLease,
        [lease.threadId, lease.checkpointNs, lease.heads],
        "releasing a run lease",
      );
      if (rows.length > 0) {
        emit(this.ctx.onEvent, {
          type: "leaseReleased",
          threadId: lease.threadId,
          checkpointNs: lease.checkpointNs,
          checkpointId: rows[0]!.checkpoint_id,
          attempts: lease.attempt,
        });
      }
      return true;
    } catch {
      return false;
    }
  }

  #retry(lease: PendingRelease): void {
    // Until the lease would have run out anyway; backing off from 250 ms to 5 s.
    if (this.#stopped || Date.now() - lease.failedAt > this.ctx.leaseSeconds * 1000) return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      void this.#release(lease).then((done) => done || this.#retry(lease));
    }, Math.min(5000, 250 * 2 ** Math.min(lease.attempt, 5)));
    timer.unref();
    this.#timers.add(timer);
  }
}
