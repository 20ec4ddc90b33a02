/**
 * Expired items: the sweep that deletes them, in batches, and the sweeper
 * that runs it every `sweepIntervalMinutes`. Reads never return an expired
 * item whether or not it was swept. Several processes may run a sweeper on
 * one schema: each sweep statement first tries a transaction-scoped advisory
 * lock, so at any moment only one of them deletes, and the others skip that
 * round. A sweep called by hand (`sweepExpiredItems()`) waits for the lock
 * instead, so its count covers everything expired when it started.
 *
 * The batch is deleted by its keys, not by `ctid`: in a store partitioned by
 * namespace (docs/scaling-out.md) a ctid names a row only within one
 * partition, and `ctid = ANY (...)` deleted the rows at those places in every
 * partition, expired or not.
 */
import { quoteIdent } from "../validate.js";

/** Rows deleted per statement: bounded transactions, locks held briefly. */
export const SWEEP_BATCH = 1000;

export function sweepSql(schema: string, wait: boolean): string {
  const lock = `pg_catalog.hashtext('langgraph-checkpoint-pg:store-sweep'), pg_catalog.hashtext(pg_catalog.concat(pg_catalog.current_database(), '.', $1::text))`;
  const got = wait ? `(SELECT true FROM (SELECT pg_catalog.pg_advisory_xact_lock(${lock})) l)` : `pg_catalog.pg_try_advisory_xact_lock(${lock})`;
  const items = `${quoteIdent(schema)}.store_items`;
  return `WITH lock AS MATERIALIZED (SELECT ${got} AS got),
          gone AS (DELETE FROM ${items} it USING (
                     SELECT ns_key, key FROM ${items} WHERE expires_at <= pg_catalog.now() AND (SELECT got FROM lock)
                      ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) x
                    WHERE it.ns_key = x.ns_key AND it.key = x.key RETURNING 1)
          SELECT (SELECT got FROM lock) AS got, (SELECT pg_catalog.count(*) FROM gone)::int AS n`;
}

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
