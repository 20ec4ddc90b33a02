/**
 * This saver's writes still in flight, per lineage, so that a read of a
 * lineage can wait for them; and (ThreadOrder, below) each thread's results
 * delivered in the order its operations were called.
 *
 * Why: LangGraph's `invoke` can reject while writes of the same run are still
 * queued (with the default "async" durability it chains a run's puts, and it
 * rejects on the first failed write without waiting for the others). During a
 * failover those queued writes land later, on the new primary. A retry that
 * read the head before they landed would start from an older checkpoint and
 * fork the thread; the fork's head would miss what the late writes stored,
 * messages that had been acknowledged included. Reads waiting for the writes
 * this process already issued close that window.
 */
export class InFlight {
  readonly #byKey = new Map<string, Set<Promise<void>>>();

  /** The key of a config's lineage; undefined if the config has no string thread_id (such a call fails validation anyway). */
  static keyOf(config: { configurable?: Record<string, unknown> } | undefined): string | undefined {
    const threadId = config?.configurable?.thread_id;
    const ns = config?.configurable?.checkpoint_ns ?? "";
    return typeof threadId === "string" && typeof ns === "string" ? `${threadId}\u0000${ns}` : undefined;
  }

  /** Register `write` (started by the caller just now) under `key` until it settles; returns it unchanged. */
  track<T>(key: string | undefined, write: Promise<T>): Promise<T> {
    if (key === undefined) return write;
    let writes = this.#byKey.get(key);
    if (!writes) this.#byKey.set(key, (writes = new Set()));
    const set = writes;
    const settled: Promise<void> = write.then(
      () => undefined,
      () => undefined,
    );
    set.add(settled);
    void settled.then(() => {
      set.delete(settled);
      if (set.size === 0 && this.#byKey.get(key) === set) this.#byKey.delete(key);
    });
    return write;
  }

  /**
   * Resolves once the writes in flight now on any lineage of `threadId` have
   * settled (not those started later: a run that goes on writing would never
   * let it resolve). What `deleteThread` waits for: a write this process
   * issued before the deletion, still on its way to the database, lands
   * before the deletion reads what to delete, never after it.
   */
  async settledThread(threadId: string): Promise<void> {
    const prefix = `${threadId}\u0000`;
    const now: Promise<void>[] = [];
    for (const [key, writes] of this.#byKey) if (key.startsWith(prefix)) now.push(...writes);
    await Promise.all(now);
  }

  /** Whether a write under `key` is in flight now. */
  busy(key: string | undefined): boolean {
    return key !== undefined && this.#byKey.has(key);
  }

  /**
   * Resolves once no write under `key` is in flight. At once when none is;
   * after waiting, one more macrotask: a write chained behind the settled ones
   * (by promise callbacks only) has been issued by then, and is waited for too.
   * So a read that waits here must join the thread's order (ThreadOrder) only
   * afterwards (saver.ts `getTuple`): joined before, the settled writes' results
   * would be delivered after the read's, and the chained write issued too late.
   */
  async settled(key: string | undefined): Promise<void> {
    if (key === undefined || !this.#byKey.has(key)) return;
    for (;;) {
      const writes = this.#byKey.get(key);
      if (writes) {
        await Promise.all(writes);
        continue;
      }
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (!this.#byKey.has(key)) return;
    }
  }
}

/**
 * Per thread, the operations called on it, so their results are delivered in
 * call order (see {@link ThreadOrder.deliver}).
 */
export class ThreadOrder {
  /** Per thread: settles once the latest operation called on it, and all before it, have. */
  readonly #tails = new Map<string, Promise<void>>();

  /**
   * Deliver the successful results of one thread's operations in the order
   * they were called, as MemorySaver's are; the statements still run
   * concurrently. The parallel tasks of a step (e.g. subgraphs started by
   * `Send`, each with its own namespace) then reach their interrupts in task
   * order, and LangGraph reports the interrupts of a step in the order the
   * tasks got there (LangGraph's test "resume multiple interrupts"). Without
   * it, whichever statement Postgres happened to answer first would decide.
   *
   * A failure is delivered at once: LangGraph stops the run on it, and the
   * sooner it does, the fewer steps run on past a write that was lost (a
   * retry then waits for what is still in flight, see `InFlight`).
   */
  deliver<T>(config: { configurable?: Record<string, unknown> } | undefined, op: Promise<T>): Promise<T> {
    const threadId: unknown = config?.configurable?.thread_id;
    if (typeof threadId !== "string") return op;
    const tails = this.#tails;
    const before = tails.get(threadId);
    // Settles (never rejects) once this operation and every earlier one on the thread have.
    const turn: Promise<void> = (before === undefined ? op : before.then(() => op)).then(noop, noop);
    tails.set(threadId, turn);
    void turn.then(() => {
      if (tails.get(threadId) === turn) tails.delete(threadId);
    });
    // Usually nothing is in flight on the thread: then the operation itself, no wait.
    if (before === undefined) return op;
    return op.then((value) => before.then(() => value));
  }
}

function noop(): void {}
