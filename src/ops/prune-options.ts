/**
 * The options of `prune` and their checks: every one before any SQL, each
 * error naming its option. prune.ts runs with the settings they give.
 */
import pg from "pg";
import type { PGliteLike } from "../db/db.js";
import { parseDuration } from "../duration.js";
import { InvalidOptionsError } from "../errors.js";
import { guard, type HandlerErrorHandler } from "../events.js";
import { DEFAULT_KEEP_TOMBSTONES } from "../saver/tombstones.js";
import { checkSchemaName, LIMITS, LONE_SURROGATE } from "../validate.js";

/** Options of {@link prune}. Plain data (durations as `"30d"` strings or milliseconds), so a CLI can pass its flags through. */
export interface PruneOptions {
  /** A pool, client or PGlite instance the caller owns (never closed here). Give this or `connectionString`. */
  pool?: pg.Pool | pg.Client | PGliteLike;
  /** Used when no `pool` is given; the connection is closed afterwards. */
  connectionString?: string;
  /** Postgres schema holding the tables. Default `public`. */
  schema?: string;
  /**
   * Keep the newest N checkpoints (by id, the order `list()` returns) of each
   * lineage (thread and namespace); at least 1: the head always stays.
   */
  keepLast?: number;
  /** Remove checkpoints created longer ago than this (`"30d"`, `"12h"`, or milliseconds). The head always stays. */
  olderThan?: string | number;
  /** Delete whole threads (every namespace) with no activity for this long. */
  idleFor?: string | number;
  /**
   * Also delete threads idle for longer than the TTL their head was written
   * with (the saver's `ttl` option, recorded per checkpoint). Default `true`,
   * so a scheduled prune is all that enforces TTLs. Alone (`threadTtl: true`
   * and no other rule) it is a valid rule of its own.
   */
  threadTtl?: boolean;
  /** Only these threads. Default: every thread in the schema. */
  threadIds?: readonly string[];
  /** Count what would go (rows and bytes), change nothing. */
  dryRun?: boolean;
  /**
   * How long a running graph may go without writing anything: nothing younger
   * is touched. Checkpoints created within it and their parents are kept,
   * writes without a checkpoint row are left alone until this old, and a
   * thread expires only after being idle for at least this long. Set it above
   * your slowest step. `0` (or `"0"`, `"0s"`) turns the protection off. Default `"15m"`.
   */
  grace?: string | number;
  /**
   * How long a deleted thread's tombstone is kept (docs/threads.md, "Deleted threads
   * stay deleted"): while it is, a run that was still going when the thread
   * was deleted cannot write it back. Older ones are deleted at the end of
   * the run (with `threadIds`, only theirs). Keep it longer than your longest
   * run. Default `"7d"`; `0` (or `"0"`, `"0s"`) collects every tombstone.
   */
  keepTombstones?: string | number;
  /** Threads per batch (one `onProgress` call each). Default 100. On tables distributed by Citus a batch is one thread (docs/scaling-out.md). */
  batchSize?: number;
  /**
   * At most this many checkpoints (with their writes) deleted per transaction
   * that holds head locks; collection of unreferenced blobs and orphaned writes
   * (no head locks) deletes up to ten times as many rows per transaction. Default 1000.
   */
  chunkSize?: number;
  /** How long one statement may wait for a row lock before the round is retried later. Default `"500ms"`. */
  lockTimeout?: string | number;
  /**
   * Called after each batch with running totals; may be async. What it throws
   * or rejects with never breaks the prune: it goes to `onHandlerError`, or
   * (the first one) to stderr.
   */
  onProgress?: (progress: PruneProgress) => unknown;
  /** Receives every error `onProgress` throws or rejects with. */
  onHandlerError?: HandlerErrorHandler;
  /** Stop after the current batch; the result then has `aborted: true`. */
  signal?: AbortSignal;
}

/**
 * Rows deleted, or that would be for a dry run, and their bytes: `pg_column_size`
 * of each row, i.e. its stored size with TOASTed values counted compressed, as
 * on disk. An estimate (within a few bytes per row: tuple alignment depends on
 * how a row was read); the disk space itself is reused by later writes after
 * (auto)vacuum, and returned to the OS only by `VACUUM FULL` or `pg_repack`.
 */
export interface PruneCounts {
  checkpoints: number;
  writes: number;
  blobs: number;
  checkpointBytes: number;
  writeBytes: number;
  blobBytes: number;
  /** Whole threads deleted as idle (their rows are included in the counts above). */
  threadsExpired: number;
  /**
   * Threads left (partly) untouched: their head stayed busy through every
   * retry (a graph writing right then), or another prune was working on them.
   * The next run picks them up.
   */
  threadsSkipped: number;
  /** Tombstones of deleted threads collected (older than `keepTombstones`); counted at the end of the run. */
  tombstones: number;
}

/** What `onProgress` receives after each batch. */
export interface PruneProgress {
  dryRun: boolean;
  /** 1-based batch number. */
  batch: number;
  /** Threads visited so far. */
  threadsScanned: number;
  /** The last thread id of this batch (threads are visited in id order). */
  lastThreadId: string | undefined;
  /** This batch alone. */
  batchCounts: PruneCounts;
  /** Since the start. */
  totals: PruneCounts;
  /** Threads of this batch deleted as idle. */
  expiredThreadIds: string[];
  elapsedMs: number;
}

/**
 * What a dry run would delete from one thread (in {@link PruneResult.threads}).
 *
 * @example
 * ```ts
 * const { threads } = await prune({ pool, keepLast: 20, dryRun: true });
 * for (const t of threads ?? []) console.log(t.threadId, t.checkpoints, t.expired ? "(whole thread: idle)" : "");
 * ```
 */
export interface PruneThreadCounts {
  threadId: string;
  checkpoints: number;
  writes: number;
  blobs: number;
  /** checkpoint, write and blob bytes, as in {@link PruneCounts}. */
  bytes: number;
  /** The whole thread would go: idle for `idleFor` or past its TTL. */
  expired: boolean;
}

/**
 * How many checkpoints `prune` kept in the lineages it pruned (a dry run: would
 * keep), each credited to the first rule that keeps it, in this order. Threads
 * it expired whole, or skipped, are not counted.
 *
 * @example
 * ```ts
 * const { kept } = await prune({ pool, keepLast: 20, dryRun: true });
 * if (kept.grace > 0) console.log(`${kept.grace} checkpoints are younger than the grace period (15 minutes by default)`);
 * ```
 */
export interface PruneKept {
  /** Among the newest `keepLast` of their lineage. */
  keepLast: number;
  /** A lineage's head (its latest checkpoint) that `keepLast` did not already keep: it always stays. */
  head: number;
  /** Younger than `olderThan`. */
  olderThan: number;
  /** Younger than `grace`, or the parent of a checkpoint that is: a graph may still be running on them. */
  grace: number;
  /** Ancestors a kept checkpoint's delta channels are rebuilt from (LangGraph's `DeltaChannel`). */
  delta: number;
}

export interface PruneResult extends PruneCounts {
  dryRun: boolean;
  /** Checkpoints kept (a dry run: that would be), by the rule that keeps them. */
  kept: PruneKept;
  /**
   * Dry runs only: per thread with anything to delete, what would go, in
   * thread id order (one entry per such thread: a large schema makes a long list).
   */
  threads?: PruneThreadCounts[];
  /** Threads visited. */
  threadsScanned: number;
  batches: number;
  /** checkpointBytes + writeBytes + blobBytes. */
  bytes: number;
  /** Up to 100 of the skipped threads, for a report. */
  skippedThreadIds: string[];
  /** True when `signal` stopped the run early. */
  aborted: boolean;
  durationMs: number;
}

/** `grace` when none is given, as a flag says it (the CLI's summary names it). */
export const DEFAULT_GRACE = "15m";
const DEFAULTS = { grace: parseDuration(DEFAULT_GRACE, "grace"), batchSize: 100, chunkSize: 1000, lockTimeout: 500 } as const;
export interface Settings {
  schema: string;
  keepLast: number | undefined;
  olderThanMs: number | undefined;
  idleForMs: number | undefined;
  threadTtl: boolean;
  threadIds: string[] | undefined;
  dryRun: boolean;
  graceMs: number;
  keepTombstonesMs: number;
  batchSize: number;
  chunkSize: number;
  lockTimeoutMs: number;
  onProgress: ((p: PruneProgress) => void) | undefined;
  signal: AbortSignal | undefined;
}

// ---------------------------------------------------------------------------
// Options: every check before any SQL, each error naming its option.
// ---------------------------------------------------------------------------

/** A tool's `pool` or `connectionString` (exactly one), checked before any SQL (prune, compact). */
export function checkConnection(o: { pool?: unknown; connectionString?: unknown }): void {
  if (o.pool !== undefined && o.connectionString !== undefined) {
    throw new InvalidOptionsError("pool/connectionString", "give one of them, not both");
  }
  if (o.pool === undefined && o.connectionString === undefined) {
    throw new InvalidOptionsError("pool/connectionString", "neither was given; pass a pg.Pool, a pg.Client, a PGlite instance or a postgres:// URL");
  }
  if (o.pool !== undefined && (typeof o.pool !== "object" || o.pool === null || typeof (o.pool as pg.Pool).query !== "function")) {
    throw new InvalidOptionsError("pool", "expected a pg.Pool, a pg.Client or a PGlite instance");
  }
  if (o.connectionString !== undefined && (typeof o.connectionString !== "string" || o.connectionString === "")) {
    throw new InvalidOptionsError("connectionString", "expected a postgres:// URL");
  }
}

export function readOptions(options: PruneOptions): Settings {
  if (options === null || typeof options !== "object") throw new InvalidOptionsError("options", "expected { pool, keepLast?, olderThan?, idleFor?, ... }");
  const o = options;
  checkConnection(o);
  const schema = checkSchemaName(o.schema ?? "public");

  let keepLast: number | undefined;
  if (o.keepLast !== undefined) {
    if (typeof o.keepLast !== "number" || !Number.isSafeInteger(o.keepLast) || o.keepLast < 1) {
      throw new InvalidOptionsError("keepLast", `expected an integer >= 1 (the head of each lineage always stays), got ${describe(o.keepLast)}`);
    }
    keepLast = o.keepLast;
  }
  const olderThanMs = o.olderThan === undefined ? undefined : parseDuration(o.olderThan, "olderThan");
  const idleForMs = o.idleFor === undefined ? undefined : parseDuration(o.idleFor, "idleFor");
  const threadTtl = optionalBoolean(o.threadTtl, "threadTtl");
  if (keepLast === undefined && olderThanMs === undefined && idleForMs === undefined && threadTtl !== true) {
    throw new InvalidOptionsError(
      "keepLast/olderThan/idleFor/threadTtl",
      "no retention rule was given; pass keepLast, olderThan or idleFor (or threadTtl: true to enforce only the saver's ttl)",
    );
  }

  let threadIds: string[] | undefined;
  if (o.threadIds !== undefined) {
    if (!Array.isArray(o.threadIds)) throw new InvalidOptionsError("threadIds", "expected an array of thread ids");
    if (o.threadIds.length === 0) throw new InvalidOptionsError("threadIds", "is empty; omit it to prune every thread");
    o.threadIds.forEach((id: unknown, i) => checkThreadId(id, `threadIds[${i}]`));
    threadIds = [...new Set(o.threadIds)];
  }

  // Zero means "off" (grace) and "keep none" (keepTombstones), however it is written: 0, "0", "0s".
  const graceMs = o.grace === undefined ? DEFAULTS.grace : parseDuration(o.grace, "grace", { zero: true });
  const keepTombstonesMs = parseDuration(o.keepTombstones ?? DEFAULT_KEEP_TOMBSTONES, "keepTombstones", { zero: true });
  const lockTimeoutMs = o.lockTimeout === undefined ? DEFAULTS.lockTimeout : parseDuration(o.lockTimeout, "lockTimeout");
  const batchSize = optionalInt(o.batchSize, "batchSize", 1, 10_000) ?? DEFAULTS.batchSize;
  const chunkSize = optionalInt(o.chunkSize, "chunkSize", 1, 1_000_000) ?? DEFAULTS.chunkSize;
  if (o.onProgress !== undefined && typeof o.onProgress !== "function") throw new InvalidOptionsError("onProgress", "expected a function");
  if (o.onHandlerError !== undefined && typeof o.onHandlerError !== "function") throw new InvalidOptionsError("onHandlerError", "expected a function");
  if (o.signal !== undefined && (o.signal === null || typeof o.signal !== "object" || typeof o.signal.aborted !== "boolean")) {
    throw new InvalidOptionsError("signal", "expected an AbortSignal");
  }
  return {
    schema,
    keepLast,
    olderThanMs,
    idleForMs,
    threadTtl: threadTtl ?? true,
    threadIds,
    dryRun: optionalBoolean(o.dryRun, "dryRun") ?? false,
    graceMs,
    keepTombstonesMs,
    batchSize,
    chunkSize,
    lockTimeoutMs: Math.max(1, Math.round(lockTimeoutMs)),
    onProgress: guard(o.onProgress, "onProgress", o.onHandlerError),
    signal: o.signal,
  };
}

function describe(v: unknown): string {
  return typeof v === "string" ? JSON.stringify(v) : typeof v === "number" ? String(v) : typeof v;
}

function optionalBoolean(v: unknown, option: string): boolean | undefined {
  if (v !== undefined && typeof v !== "boolean") throw new InvalidOptionsError(option, `expected true or false, got ${describe(v)}`);
  return v;
}

function optionalInt(v: unknown, option: string, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min || v > max) {
    throw new InvalidOptionsError(option, `expected an integer from ${min} to ${max}, got ${describe(v)}`);
  }
  return v;
}

const encoder = new TextEncoder();

/** A thread id given as an option (`threadIds[i]`), checked as the saver checks it. */
export function checkThreadId(id: unknown, option: string): void {
  if (typeof id !== "string" || id === "") throw new InvalidOptionsError(option, `expected a non-empty string, got ${describe(id)}`);
  if (id.includes("\u0000")) throw new InvalidOptionsError(option, "must not contain NUL (\\u0000) characters");
  // Sent as UTF-8, half a character becomes U+FFFD: it would name (and prune) another thread.
  if (LONE_SURROGATE.test(id)) throw new InvalidOptionsError(option, "is not valid Unicode (a lone surrogate: half of a character)");
  if (encoder.encode(id).length > LIMITS.thread_id) throw new InvalidOptionsError(option, `is longer than ${LIMITS.thread_id} bytes (UTF-8)`);
}
