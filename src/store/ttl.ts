/**
 * Expired items: the sweeper that deletes them, in batches, every
 * `sweepIntervalMinutes` (its statements, and how several processes share
 * the work, are in sql/maintenance.ts). Reads never return an expired item
 * whether or not it was swept.
 */

/** Rows deleted per statement: bounded transactions, locks held briefly. */
export const SWEEP_BATCH = 1000;

/** Runs `sweep` every `minutes` until stopped; never keeps the process alive, never throws. */
export class Sweeper {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> | undefined;

  start(minutes: number, sweep: () => Promise<unknown>, onError: (err: unknown) => void): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => {
      if (this.#running) return;
      this.#running = sweep()
        .catch(onError)
        .finally(() => (this.#running = undefined));
    }, minutes * 60_000);
    this.#timer.unref();
  }

  get started(): boolean {
    return this.#timer !== undefined;
  }

  /** Stop, and wait for a sweep in progress. */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }
}
