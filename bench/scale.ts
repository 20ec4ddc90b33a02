/**
 * Scale helpers: clone a thread many times with SQL, measure memory while
 * consuming `list`, and measure the storage of a saver's tables.
 */
import v8 from "node:v8";
import vm from "node:vm";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { BaseCheckpointSaver, CheckpointListOptions } from "@langchain/langgraph-checkpoint";
import pg from "pg";

/** The three tables both savers have, and our lineage heads (absent in the official saver's schema). */
const TABLES = ["checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_heads"] as const;

/** The tables of TABLES that exist in the saver's database (schema public). */
export async function tablesOf(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ t: string }>("SELECT t FROM unnest($1::text[]) AS t WHERE to_regclass('public.' || t) IS NOT NULL", [TABLES]);
  return rows.map((r) => r.t);
}

/**
 * Copies every row of `template` in the saver's tables `count` times, as threads
 * `${prefix}${g}` (INSERT ... SELECT ... generate_series), so the copies are
 * exactly what the saver wrote, thread id aside. Works for any saver whose
 * tables have these names and a `thread_id` column (ours and the official).
 */
export async function cloneThread(pool: pg.Pool, template: string, count: number, prefix: string, chunk = 25_000): Promise<void> {
  const tables = await tablesOf(pool);
  for (const table of tables) {
    const { rows } = await pool.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns
        WHERE table_schema = 'public' AND table_name = $1 AND is_generated = 'NEVER'
        ORDER BY ordinal_position`,
      [table],
    );
    const cols = rows.map((r) => pg.escapeIdentifier(r.column_name));
    const select = rows.map((r) => (r.column_name === "thread_id" ? `$1 || g::text` : `t.${pg.escapeIdentifier(r.column_name)}`));
    const sql = `INSERT INTO ${table} (${cols.join(", ")})
      SELECT ${select.join(", ")} FROM ${table} t CROSS JOIN generate_series($2::int, $3::int) AS g
       WHERE t.thread_id = $4`;
    for (let start = 1; start <= count; start += chunk) {
      await pool.query(sql, [prefix, start, Math.min(count, start + chunk - 1), template]);
    }
  }
  await pool.query(`ANALYZE ${tables.join(", ")}`);
}

let gcFn: (() => void) | undefined;
/** `global.gc`, exposing it at run time if node was not started with --expose-gc. */
export function gc(): void {
  if (!gcFn) {
    const g = (globalThis as { gc?: () => void }).gc;
    if (typeof g === "function") gcFn = g;
    else {
      v8.setFlagsFromString("--expose-gc");
      gcFn = vm.runInNewContext("gc") as () => void;
    }
  }
  gcFn();
}

export interface ListMemory {
  count: number;
  /** Peak of (heapUsed + external) above the starting point, measured after a forced GC every `every` items: memory retained by the listing. */
  peakRetainedMB: number;
  /** Peak RSS above the starting point. */
  peakRssMB: number;
  ms: number;
  /** checkpoint ids strictly descending. */
  descending: boolean;
  /** false when the time budget ran out before the iterator did. */
  complete: boolean;
}

/** Consumes `saver.list(config, options)` keeping nothing, sampling retained memory; stops after `budgetMs`. */
export async function listMemory(
  saver: BaseCheckpointSaver,
  config: RunnableConfig,
  options: CheckpointListOptions | undefined,
  budgetMs = Number.POSITIVE_INFINITY,
  every = 250,
): Promise<ListMemory> {
  const used = () => {
    const m = process.memoryUsage();
    return { js: m.heapUsed + m.external, rss: m.rss };
  };
  gc();
  gc();
  const base = used();
  let peakJs = 0;
  let peakRss = 0;
  let count = 0;
  let prev: string | undefined;
  let descending = true;
  const t0 = performance.now();
  let complete = true;
  for await (const t of saver.list(config, options)) {
    const id = t.checkpoint.id;
    if (prev !== undefined && !(id < prev)) descending = false;
    prev = id;
    if (++count % every === 0) {
      gc();
      const m = used();
      peakJs = Math.max(peakJs, m.js - base.js);
      peakRss = Math.max(peakRss, m.rss - base.rss);
    }
    if (performance.now() - t0 > budgetMs) {
      complete = false;
      break;
    }
  }
  const ms = performance.now() - t0;
  // One last sample (the iterator has not been released yet if it was cut short).
  gc();
  const m = used();
  peakJs = Math.max(peakJs, m.js - base.js);
  peakRss = Math.max(peakRss, m.rss - base.rss);
  return { count, peakRetainedMB: peakJs / 2 ** 20, peakRssMB: peakRss / 2 ** 20, ms, descending, complete };
}

export interface Storage {
  checkpoints: number;
  /** pg_total_relation_size of the saver's tables (heap + indexes + TOAST), as written. */
  bytes: number;
  bytesPerCheckpoint: number;
  perTable: Record<string, number>;
  /** Same after VACUUM FULL (live data only: no dead tuples, no free space). */
  compactBytes: number;
  compactBytesPerCheckpoint: number;
}

export async function storageOf(pool: pg.Pool): Promise<Storage> {
  const tables = await tablesOf(pool);
  const sizes = async () => {
    const perTable: Record<string, number> = {};
    for (const t of tables) {
      const { rows } = await pool.query<{ size: string }>("SELECT pg_total_relation_size($1::regclass)::text AS size", [t]);
      perTable[t] = Number(rows[0]!.size);
    }
    return perTable;
  };
  const { rows } = await pool.query<{ n: string }>("SELECT count(*)::text AS n FROM checkpoints");
  const checkpoints = Number(rows[0]!.n);
  const perTable = await sizes();
  const bytes = Object.values(perTable).reduce((a, b) => a + b, 0);
  await pool.query(`VACUUM FULL ${tables.join(", ")}`);
  const compactBytes = Object.values(await sizes()).reduce((a, b) => a + b, 0);
  return {
    checkpoints,
    bytes,
    bytesPerCheckpoint: bytes / checkpoints,
    perTable,
    compactBytes,
    compactBytesPerCheckpoint: compactBytes / checkpoints,
  };
}
