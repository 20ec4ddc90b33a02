/**
 * Run leases (linear mode): a failed put or putWrites ends its run, but the
 * lineage's head still has tasks left, which would keep new input out until
 * the lease runs out; `RunLeases` gives the lineage back to other runs.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { CheckpointConflictError, SchemaNotMigratedError, ThreadDeletedError } from "../errors.js";
import { emit } from "../events.js";
import { readConfig } from "../validate.js";
import type { SaverContext } from "./context.js";

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
