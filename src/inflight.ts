/**
 * This saver's writes still in flight, per lineage, so that a read of a
 * lineage can wait for them.
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
   * Resolves once no write under `key` is in flight. At once when none is;
   * after waiting, one more macrotask: a write chained behind the settled ones
   * (by promise callbacks only) has been issued by then, and is waited for too.
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
