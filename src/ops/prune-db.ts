/**
 * How prune reaches the database: the caller's pool, or one of its own for a
 * connection string; each statement's failure as a typed error; a round that
 * hit a lock timeout, a deadlock or a serialization failure tried again, then
 * left for the next run (prune.ts skips it).
 */
import pg from "pg";
import { dbOf, poolDb, type Db } from "../db/db.js";
import { CheckpointerError, DatabaseOperationError } from "../errors.js";
import type { PruneOptions } from "./prune-options.js";

/** A round that hit a lock timeout, a deadlock or a serialization failure is retried this many times, then skipped. */
const ROUND_ATTEMPTS = 4;

/** The database of one prune: the caller's pool (left open), or a pool of its own on `connectionString` (closed). */
export function connect(options: PruneOptions): { db: Db; close: () => Promise<void> } {
  const p = options.pool;
  if (p === undefined) {
    const pool = new pg.Pool({ connectionString: options.connectionString, application_name: "langgraph-checkpoint-pg:prune", max: 2 });
    // An idle client dying must not crash the process; the next query reports it.
    pool.on("error", () => undefined);
    return { db: poolDb(pool), close: () => pool.end() };
  }
  return { db: dbOf(p), close: async () => undefined };
}

// 55P03 lock_not_available (lock_timeout), 40P01 deadlock, 40001 serialization failure: try the round again later.
const TRANSIENT = new Set(["55P03", "40P01", "40001"]);

/** Run one round; transient lock failures are retried, then give `undefined` (the caller skips). */
export async function attempt<T>(what: string, fn: () => Promise<T>): Promise<T | undefined> {
  for (let i = 1; ; i++) {
    try {
      return await withErrors(what, fn);
    } catch (err) {
      const state = err instanceof DatabaseOperationError ? err.sqlState : undefined;
      if (state === undefined || !TRANSIENT.has(state)) throw err;
      if (i >= ROUND_ATTEMPTS) return undefined;
      await sleep(25 * 2 ** i);
    }
  }
}

export async function withErrors<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof CheckpointerError) throw err;
    throw new DatabaseOperationError(what, err);
  }
}

export async function query<R extends Record<string, unknown>>(db: Db, text: string, values: unknown[], what: string): Promise<{ rows: R[] }> {
  return withErrors(what, () => db.query<R>(text, values));
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Are the schema's tables distributed by Citus (docs/scaling-out.md)? `distributed`: prune-sql.ts's statement, `checkpoints` its table. */
export async function isDistributed(db: Db, { distributed, checkpoints }: { distributed: string; checkpoints: string }): Promise<boolean> {
  const citus = (await query<{ citus: boolean }>(db, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') AS citus", [], "prune (looking for Citus)")).rows[0]!;
  if (!citus.citus) return false;
  return (await query<{ distributed: boolean }>(db, distributed, [checkpoints], "prune (looking for Citus)")).rows[0]!.distributed;
}
