/**
 * Retention: prune old checkpoints, expire idle threads, and collect the
 * writes and blobs nothing needs any more, while graphs keep running.
 *
 * What is never removed, and why it holds:
 * - **A lineage's head.** It is in every keep set, and the delete re-checks that
 *   no `checkpoint_heads` row points at what it deletes.
 * - **What a remaining checkpoint needs to rebuild its values.** A blob goes
 *   only when no remaining checkpoint's `channel_versions` names it (blobs
 *   written by ancestors included), decided in the statement that deletes it.
 *   A put commits its new blobs with its row, so it never leaves a blob that
 *   looks unreferenced; the blobs it inherits are named by its parent.
 * - **What delta channels need.** LangGraph rebuilds a `DeltaChannel` that a
 *   checkpoint does not store by walking its parents up to the nearest one that
 *   stores a value (the seed), replaying every ancestor's writes on the way
 *   (`getDeltaChannelHistory`). The keep set is closed under that walk: for
 *   every kept checkpoint, the ancestors up to each seed stay, with their
 *   writes and blobs. A checkpoint's delta channels are the keys of its
 *   `counters_since_delta_snapshot` metadata.
 * - **Pending writes** (an interrupted run, the successful tasks of a failed
 *   step): the writes of a checkpoint that remains are never deleted; writes
 *   whose checkpoint row does not exist (yet: async durability stores them
 *   before the put commits) go only once older than the grace period.
 * - **A running graph's next put.** A put names its parent and copies the
 *   parent's versions of unchanged channels. A delete round holds the head row
 *   lock of each lineage it prunes (`FOR UPDATE`, the lock every put takes
 *   first) and decides on a snapshot taken after it got the locks: a put that
 *   committed first is seen, a later one waits, then finds its parent (the
 *   head, always kept) and the parent's blobs in place. A round deletes at most
 *   `chunkSize` checkpoints; a busy head is skipped (`SKIP LOCKED`) and retried,
 *   never waited on. Blob and orphan collection takes no head lock: it never
 *   deletes a checkpoint, so every parent it sees keeps its blobs.
 * - **A put whose parent is not the head** (a branch-mode fork, a writer whose
 *   head another writer displaced): the grace period keeps checkpoints younger
 *   than it and their parents, so a step shorter than the grace period finds
 *   its parent. The one gap: a fork from a checkpoint older than that, while a
 *   prune deletes it. Closing it needs the put to lock its parent row and
 *   refuse a parent that is gone (a saver change, not a prune one).
 * - **An idle thread that wakes up.** Idle threads are found without locks,
 *   then deleted under the head locks of just those threads, re-checked: a
 *   thread a put is writing right now is left alone.
 * - **Another prune.** Two prunes never work on the same thread at once
 *   (a transaction-scoped advisory lock per thread, tried, never waited on).
 *
 * Issue #6. The statements are built here, next to the one function that
 * runs them, rather than in queries.ts (the saver's statements).
 */
import pg from "pg";
import { dbOf, poolDb, type Db, type PGliteLike, type Queryable } from "../db/db.js";
import { parseDuration } from "../duration.js";
import {
  CheckpointerError,
  DatabaseOperationError,
  HistoryCorruptError,
  InvalidOptionsError,
} from "../errors.js";
import { guard, type HandlerErrorHandler } from "../events.js";
import { assertSchemaCurrent } from "../db/migrate.js";
import { checkSchemaName, LIMITS, LONE_SURROGATE, quoteIdent } from "../validate.js";

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
   * your slowest step. `0` turns the protection off. Default `"15m"`.
   */
  grace?: string | number;
  /** Threads per batch (one `onProgress` call each). Default 100. */
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

export interface PruneResult extends PruneCounts {
  dryRun: boolean;
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

const DEFAULTS = { grace: 15 * 60_000, batchSize: 100, chunkSize: 1000, lockTimeout: 500 } as const;
/** A round that hit a lock timeout, a deadlock or a serialization failure is retried this many times, then skipped. */
const ROUND_ATTEMPTS = 4;
/**
 * A collection round may delete this many times `chunkSize` blobs (and as many
 * writes): it holds no head lock, only the locks of rows nobody references.
 */
const COLLECT_FACTOR = 10;
/** Busy lineages are retried this many times per batch, after these pauses. */
const BUSY_BACKOFF_MS = [20, 80, 250];

interface Settings {
  schema: string;
  keepLast: number | undefined;
  olderThanMs: number | undefined;
  idleForMs: number | undefined;
  threadTtl: boolean;
  threadIds: string[] | undefined;
  dryRun: boolean;
  graceMs: number;
  batchSize: number;
  chunkSize: number;
  lockTimeoutMs: number;
  onProgress: ((p: PruneProgress) => void) | undefined;
  signal: AbortSignal | undefined;
}

/**
 * Apply retention rules to the checkpoint tables: keep the last N checkpoints
 * of each lineage (`keepLast`) and/or drop those older than a duration
 * (`olderThan`); delete threads idle longer than `idleFor` or than their own
 * TTL (the saver's `ttl`); always delete the writes of removed checkpoints,
 * blobs no remaining checkpoint references, and writes orphaned by runs that
 * were rejected or crashed. With both `keepLast` and `olderThan`, a checkpoint
 * goes only when both let it go (outside the last N and older than the age).
 *
 * Safe while graphs run and while other prunes run: work happens per batch of
 * threads in short transactions; see the top of src/ops/prune.ts for how each
 * "never remove" rule is guaranteed. Bad options throw
 * {@link InvalidOptionsError} before any SQL runs.
 *
 * @example
 * ```ts
 * import pg from "pg";
 * import { prune } from "langgraph-checkpoint-pg";
 *
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const preview = await prune({ pool, keepLast: 20, olderThan: "30d", dryRun: true });
 * console.log(`would delete ${preview.checkpoints} checkpoints, ${preview.bytes} bytes`);
 * const done = await prune({
 *   pool,
 *   keepLast: 20,
 *   olderThan: "30d",
 *   idleFor: "180d",
 *   onProgress: (p) => console.log(`batch ${p.batch}: ${p.totals.checkpoints} checkpoints so far`),
 * });
 * console.log(`${done.threadsExpired} idle threads deleted in ${Math.round(done.durationMs)} ms`);
 * await pool.end();
 * ```
 */
export async function prune(options: PruneOptions): Promise<PruneResult> {
  const settings = readOptions(options);
  const started = performance.now();
  const { db, close } = connect(options);
  try {
    await assertSchemaCurrent(db, settings.schema, "prune");
    return await run(db, settings, started);
  } finally {
    await close();
  }
}

// ---------------------------------------------------------------------------
// Options: every check before any SQL, each error naming its option.
// ---------------------------------------------------------------------------

function readOptions(options: PruneOptions): Settings {
  if (options === null || typeof options !== "object") throw new InvalidOptionsError("options", "expected { pool, keepLast?, olderThan?, idleFor?, ... }");
  const o = options;
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

  const graceMs = o.grace === 0 || o.grace === "0" ? 0 : o.grace === undefined ? DEFAULTS.grace : parseDuration(o.grace, "grace");
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

function checkThreadId(id: unknown, option: string): void {
  if (typeof id !== "string" || id === "") throw new InvalidOptionsError(option, `expected a non-empty string, got ${describe(id)}`);
  if (id.includes("\u0000")) throw new InvalidOptionsError(option, "must not contain NUL (\\u0000) characters");
  // Sent as UTF-8, half a character becomes U+FFFD: it would name (and prune) another thread.
  if (LONE_SURROGATE.test(id)) throw new InvalidOptionsError(option, "is not valid Unicode (a lone surrogate: half of a character)");
  if (encoder.encode(id).length > LIMITS.thread_id) throw new InvalidOptionsError(option, `is longer than ${LIMITS.thread_id} bytes (UTF-8)`);
}

function connect(options: PruneOptions): { db: Db; close: () => Promise<void> } {
  const p = options.pool;
  if (p === undefined) {
    const pool = new pg.Pool({ connectionString: options.connectionString, application_name: "langgraph-checkpoint-pg:prune", max: 2 });
    // An idle client dying must not crash the process; the next query reports it.
    pool.on("error", () => undefined);
    return { db: poolDb(pool), close: () => pool.end() };
  }
  return { db: dbOf(p), close: async () => undefined };
}


// ---------------------------------------------------------------------------
// SQL
// ---------------------------------------------------------------------------

/** One lineage: a thread and a namespace. */
interface Lineage {
  thread: string;
  ns: string;
}

function buildSql(schema: string) {
  const s = quoteIdent(schema);
  const cp = `${s}.checkpoints`;
  const wr = `${s}.checkpoint_writes`;
  const bl = `${s}.checkpoint_blobs`;
  const hd = `${s}.checkpoint_heads`;

  /** Checkpoint `c` stores a value for channel `ch` (what ends a delta walk: the seed). */
  const stores = (c: string, ch: string) => `EXISTS (
      SELECT 1 FROM ${bl} b
       WHERE b.thread_id = ${c}.thread_id AND b.checkpoint_ns = ${c}.checkpoint_ns AND b.channel = ${ch}
         AND b.version = ${c}.checkpoint -> 'channel_versions' ->> ${ch} AND b.type <> 'empty')`;

  /**
   * The delta channels LangGraph rebuilds for checkpoint `c` by walking its
   * ancestors (langgraph channels/base.js `deltaChannelsToReplay`): its delta
   * channels (the keys of `counters_since_delta_snapshot`, which LangGraph
   * writes for every delta channel not snapshotted at that checkpoint) that it
   * does not store; one without a version only on branches that predate
   * `delta_writes_versioned` (where such a channel can still hold writes).
   */
  const needs = (c: string) => `ARRAY(
      SELECT d.ch FROM pg_catalog.jsonb_object_keys(CASE WHEN pg_catalog.jsonb_typeof(${c}.metadata -> 'counters_since_delta_snapshot') = 'object'
                                             THEN ${c}.metadata -> 'counters_since_delta_snapshot' ELSE '{}'::jsonb END) AS d(ch)
       WHERE (${c}.checkpoint -> 'channel_versions' ? d.ch OR ${c}.metadata ->> 'delta_writes_versioned' IS DISTINCT FROM 'true')
         AND NOT ${stores(c, "d.ch")}
       ORDER BY 1)`;

  /** Checkpoints before format v4 read their pending sends from their parent's writes (see queries.ts, read kind 3). */
  const legacy = (c: string) =>
    `${c}.parent_checkpoint_id IS NOT NULL AND pg_catalog.jsonb_typeof(${c}.checkpoint -> 'v') = 'number' AND (${c}.checkpoint ->> 'v')::numeric < 4`;

  const sameCheckpoint = (a: string, b: string) =>
    `${a}.thread_id = ${b}.thread_id AND ${a}.checkpoint_ns = ${b}.checkpoint_ns AND ${a}.checkpoint_id = ${b}.checkpoint_id`;

  /** Keyset page of distinct thread ids over the three tables (loose index scans on each primary key). */
  const threadPage = (first: boolean) => {
    const next = (table: string, alias: string) => `${alias} AS (
  SELECT (SELECT thread_id FROM ${table} WHERE ${first ? "$1::text IS NULL" : "thread_id > $1"} ORDER BY thread_id LIMIT 1) AS id
  UNION ALL
  SELECT (SELECT thread_id FROM ${table} WHERE thread_id > ${alias}.id ORDER BY thread_id LIMIT 1) FROM ${alias} WHERE ${alias}.id IS NOT NULL
)`;
    return `/* langgraph-checkpoint-pg prune: threads */
WITH RECURSIVE ${next(cp, "a")}, ${next(wr, "b")}, ${next(bl, "c")}
SELECT id FROM (
  (SELECT id FROM a WHERE id IS NOT NULL LIMIT $2)
  UNION (SELECT id FROM b WHERE id IS NOT NULL LIMIT $2)
  UNION (SELECT id FROM c WHERE id IS NOT NULL LIMIT $2)
) t ORDER BY id LIMIT $2`;
  };

  /**
   * Claim threads for this transaction: an advisory lock per thread (another
   * prune holding one skips it, never waits), then, when $3, the head row of
   * each of their lineages, FOR UPDATE SKIP LOCKED: a head a put is writing
   * right now is skipped, never waited on. A put that started later waits for
   * this transaction. $1 threads, $2 lock key (per schema), $3 lock heads.
   * Per claimed thread: the namespaces whose head is locked, and all heads seen.
   */
  const claim = `/* langgraph-checkpoint-pg prune: claim */
WITH t AS MATERIALIZED (
  SELECT x.thread_id FROM pg_catalog.unnest($1::text[]) AS x(thread_id)
   WHERE pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtext($2::text), pg_catalog.hashtext(x.thread_id))
), seen AS MATERIALIZED (
  SELECT h.thread_id, h.checkpoint_ns FROM ${hd} h JOIN t ON h.thread_id = t.thread_id
), locked AS MATERIALIZED (
  SELECT h.thread_id, h.checkpoint_ns FROM ${hd} h JOIN t ON h.thread_id = t.thread_id
   WHERE $3::boolean
     FOR UPDATE OF h SKIP LOCKED
)
SELECT t.thread_id,
       ARRAY(SELECT l.checkpoint_ns FROM locked l WHERE l.thread_id = t.thread_id) AS locked_ns,
       ARRAY(SELECT v.checkpoint_ns FROM seen v WHERE v.thread_id = t.thread_id) AS head_ns
  FROM t`;

  /**
   * Threads idle for longer than `$2` seconds, or than their TTL when `$3`
   * (the head of the root namespace decides; any head if it has none), and
   * never sooner than the grace period `$4`. Activity: the newest checkpoint of
   * any namespace, or the newest write (a resume stores writes only).
   */
  const idle = `
WITH t AS MATERIALIZED (SELECT x.thread_id FROM pg_catalog.unnest($1::text[]) AS x(thread_id)),
act AS MATERIALIZED (
  SELECT t.thread_id,
         greatest((SELECT pg_catalog.max(c.created_at) FROM ${cp} c WHERE c.thread_id = t.thread_id),
                  (SELECT pg_catalog.max(w.created_at) FROM ${wr} w WHERE w.thread_id = t.thread_id)) AS last_active,
         (SELECT c.ttl_seconds FROM ${hd} h JOIN ${cp} c ON ${sameCheckpoint("c", "h")} WHERE h.thread_id = t.thread_id
           ORDER BY (h.checkpoint_ns = '') DESC, c.ttl_seconds DESC NULLS LAST LIMIT 1) AS ttl
    FROM t
), expired AS MATERIALIZED (
  SELECT a.thread_id FROM act a
   WHERE a.last_active < pg_catalog.now() - pg_catalog.make_interval(secs => $4::float8)
     AND (($2::float8 IS NOT NULL AND a.last_active < pg_catalog.now() - pg_catalog.make_interval(secs => $2::float8))
       OR ($3::boolean AND a.ttl IS NOT NULL AND a.last_active < pg_catalog.now() - pg_catalog.make_interval(secs => a.ttl)))
)`;

  /** The idle threads among $1, found without taking any lock. */
  const idleThreads = `/* langgraph-checkpoint-pg prune: idle */${idle}
SELECT thread_id FROM expired`;

  /** Dry runs: the counts of `gone_c`, `gone_w` and `gone_b` per thread, as JSON (threads with something to delete). */
  const perThread = `,
       (SELECT coalesce(pg_catalog.json_agg(p ORDER BY p.thread_id), '[]') FROM (
          SELECT g.thread_id, pg_catalog.sum(g.c)::int AS checkpoints, pg_catalog.sum(g.cb)::bigint AS checkpoint_bytes, pg_catalog.sum(g.w)::int AS writes,
                 pg_catalog.sum(g.wb)::bigint AS write_bytes, pg_catalog.sum(g.b)::int AS blobs, pg_catalog.sum(g.bb)::bigint AS blob_bytes
            FROM (SELECT thread_id, 1 AS c, bytes AS cb, 0 AS w, 0 AS wb, 0 AS b, 0 AS bb FROM gone_c
                  UNION ALL SELECT thread_id, 0, 0, 1, bytes, 0, 0 FROM gone_w
                  UNION ALL SELECT thread_id, 0, 0, 0, 0, 1, bytes FROM gone_b) g
           GROUP BY g.thread_id) p) AS per_thread`;

  /** Deletes the idle threads among $1 whole, like `deleteThread` (the dry variant only sizes them). */
  const expire = (dry: boolean) => `/* langgraph-checkpoint-pg prune: expire */${idle},
sized_c AS MATERIALIZED (SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, pg_catalog.pg_column_size(c.*) AS bytes FROM expired e JOIN ${cp} c ON c.thread_id = e.thread_id),
sized_w AS MATERIALIZED (SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, pg_catalog.pg_column_size(w.*) AS bytes
                           FROM expired e JOIN ${wr} w ON w.thread_id = e.thread_id),
sized_b AS MATERIALIZED (SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, pg_catalog.pg_column_size(b.*) AS bytes
                           FROM expired e JOIN ${bl} b ON b.thread_id = e.thread_id), ${
    dry
      ? `gone_c AS (SELECT thread_id, bytes FROM sized_c), gone_w AS (SELECT thread_id, bytes FROM sized_w), gone_b AS (SELECT thread_id, bytes FROM sized_b)`
      : `gone_c AS (DELETE FROM ${cp} c USING sized_c x WHERE ${sameCheckpoint("c", "x")} RETURNING x.bytes),
gone_h AS (DELETE FROM ${hd} h USING expired e WHERE h.thread_id = e.thread_id),
gone_w AS (DELETE FROM ${wr} w USING sized_w x WHERE ${sameCheckpoint("w", "x")} AND w.task_id = x.task_id AND w.idx = x.idx RETURNING x.bytes),
gone_b AS (DELETE FROM ${bl} b USING sized_b x
            WHERE b.thread_id = x.thread_id AND b.checkpoint_ns = x.checkpoint_ns AND b.channel = x.channel AND b.version = x.version
           RETURNING x.bytes)`
  }
SELECT ARRAY(SELECT thread_id FROM expired) AS expired,
       (SELECT pg_catalog.count(*) FROM gone_c)::int AS checkpoints, (SELECT coalesce(pg_catalog.sum(bytes), 0) FROM gone_c)::bigint AS checkpoint_bytes,
       (SELECT pg_catalog.count(*) FROM gone_w)::int AS writes, (SELECT coalesce(pg_catalog.sum(bytes), 0) FROM gone_w)::bigint AS write_bytes,
       (SELECT pg_catalog.count(*) FROM gone_b)::int AS blobs, (SELECT coalesce(pg_catalog.sum(bytes), 0) FROM gone_b)::bigint AS blob_bytes${dry ? perThread : ""}`;

  /**
   * One round over a batch of threads, two jobs selected by flags:
   * - victims ($4): in the lineages given by $2/$3 (NULL: every lineage with a
   *   head), delete up to $8 checkpoints (NULL: all) outside the keep set,
   *   oldest id first, with their writes. The keep set: the head; the newest
   *   $5 by id; those created within the last $6 seconds (`olderThan`, or the
   *   grace period); the parents of those created within the grace period $7;
   *   and, closed under LangGraph's delta walk, the ancestors up to each seed.
   * - collection ($9): in threads $1, up to $10 blobs no remaining checkpoint
   *   names, and up to $10 writes without a checkpoint row older than $7
   *   seconds (except a remaining pre-v4 checkpoint's parent's writes).
   * "Remaining" excludes this round's victims, so a dry run (both jobs, no
   * limits, one statement) counts exactly what the real rounds delete.
   */
  const round = (dry: boolean) => `/* langgraph-checkpoint-pg prune: round */
WITH RECURSIVE
th AS MATERIALIZED (SELECT x.thread_id FROM pg_catalog.unnest($1::text[]) AS x(thread_id)),
lin AS MATERIALIZED (
  SELECT h.thread_id, h.checkpoint_ns, h.checkpoint_id AS head_id
    FROM ${hd} h JOIN th ON h.thread_id = th.thread_id
   WHERE $4::boolean
     AND ($2::text[] IS NULL OR EXISTS (SELECT 1 FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS l(t, n) WHERE l.t = h.thread_id AND l.n = h.checkpoint_ns))
),
base AS (
  SELECT l.thread_id, l.checkpoint_ns, l.head_id AS checkpoint_id FROM lin l
  UNION
  SELECT n.thread_id, n.checkpoint_ns, n.checkpoint_id FROM lin l CROSS JOIN LATERAL (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id FROM ${cp} c
     WHERE c.thread_id = l.thread_id AND c.checkpoint_ns = l.checkpoint_ns
     ORDER BY c.checkpoint_id DESC LIMIT $5::int) n
  UNION
  SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id FROM lin l JOIN ${cp} c ON c.thread_id = l.thread_id AND c.checkpoint_ns = l.checkpoint_ns
   WHERE c.created_at >= pg_catalog.now() - pg_catalog.make_interval(secs => $6::float8)
  UNION
  SELECT c.thread_id, c.checkpoint_ns, c.parent_checkpoint_id FROM lin l JOIN ${cp} c ON c.thread_id = l.thread_id AND c.checkpoint_ns = l.checkpoint_ns
   WHERE c.created_at >= pg_catalog.now() - pg_catalog.make_interval(secs => $7::float8) AND c.parent_checkpoint_id IS NOT NULL
),
walk (thread_id, checkpoint_ns, checkpoint_id, parent_id, still) AS (
  SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, ${needs("c")}
    FROM base k JOIN ${cp} c ON ${sameCheckpoint("c", "k")}
  UNION
  SELECT p.thread_id, p.checkpoint_ns, p.checkpoint_id, p.parent_checkpoint_id,
         ARRAY(SELECT x.ch FROM (SELECT pg_catalog.unnest(w.still) UNION SELECT pg_catalog.unnest(${needs("p")})) AS x(ch)
                WHERE NOT ${stores("p", "x.ch")} ORDER BY 1)
    FROM walk w JOIN ${cp} p ON p.thread_id = w.thread_id AND p.checkpoint_ns = w.checkpoint_ns AND p.checkpoint_id = w.parent_id
   WHERE pg_catalog.cardinality(w.still) > 0
),
kept AS MATERIALIZED (SELECT DISTINCT thread_id, checkpoint_ns, checkpoint_id FROM walk),
-- A walk that needed a parent and found none, or went around a cycle. A cycle has a step to a
-- parent with a greater id (LangGraph's ids grow with time): only from those, follow the parents,
-- bounded by the lineage's size, and see whether the start comes back.
suspect AS MATERIALIZED (
  SELECT DISTINCT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.parent_id FROM walk w
   WHERE pg_catalog.cardinality(w.still) > 0 AND w.parent_id >= w.checkpoint_id
),
around (thread_id, checkpoint_ns, start_id, at_id, hops) AS (
  SELECT s.thread_id, s.checkpoint_ns, s.checkpoint_id, s.parent_id, 1 FROM suspect s
  UNION ALL
  SELECT a.thread_id, a.checkpoint_ns, a.start_id, c.parent_checkpoint_id, a.hops + 1
    FROM around a JOIN ${cp} c ON c.thread_id = a.thread_id AND c.checkpoint_ns = a.checkpoint_ns AND c.checkpoint_id = a.at_id
   WHERE a.at_id <> a.start_id AND c.parent_checkpoint_id IS NOT NULL
     AND a.hops <= (SELECT pg_catalog.count(*) FROM ${cp} x WHERE x.thread_id = a.thread_id AND x.checkpoint_ns = a.checkpoint_ns)
),
broken AS MATERIALIZED (
  SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, 'missing-parent' AS reason FROM walk w
   WHERE pg_catalog.cardinality(w.still) > 0 AND w.parent_id IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM ${cp} p WHERE p.thread_id = w.thread_id AND p.checkpoint_ns = w.checkpoint_ns AND p.checkpoint_id = w.parent_id)
  UNION ALL
  SELECT a.thread_id, a.checkpoint_ns, a.start_id, 'cycle' FROM around a
   WHERE a.at_id = a.start_id OR a.hops > (SELECT pg_catalog.count(*) FROM ${cp} x WHERE x.thread_id = a.thread_id AND x.checkpoint_ns = a.checkpoint_ns)
   LIMIT 1
),
victims AS MATERIALIZED (
  SELECT v.thread_id, v.checkpoint_ns, v.checkpoint_id, v.bytes,
         pg_catalog.row_number() OVER (ORDER BY v.thread_id, v.checkpoint_ns, v.checkpoint_id) AS rn
    FROM lin l CROSS JOIN LATERAL (
      SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, pg_catalog.pg_column_size(c.*) AS bytes FROM ${cp} c
       WHERE c.thread_id = l.thread_id AND c.checkpoint_ns = l.checkpoint_ns AND c.checkpoint_id <> l.head_id
         AND NOT EXISTS (SELECT 1 FROM kept k WHERE ${sameCheckpoint("k", "c")})
       ORDER BY c.checkpoint_id
       LIMIT $8::int + 1) v
),
todo AS MATERIALIZED (SELECT thread_id, checkpoint_ns, checkpoint_id, bytes FROM victims WHERE $8::int IS NULL OR rn <= $8::int),
more AS MATERIALIZED (SELECT DISTINCT thread_id, checkpoint_ns FROM victims WHERE rn > $8::int),
needed_writes AS MATERIALIZED (
  SELECT c.thread_id, c.checkpoint_ns, c.parent_checkpoint_id AS checkpoint_id
    FROM kept k JOIN ${cp} c ON ${sameCheckpoint("c", "k")} WHERE ${legacy("c")}
  UNION
  SELECT c.thread_id, c.checkpoint_ns, c.parent_checkpoint_id
    FROM th JOIN ${cp} c ON c.thread_id = th.thread_id
   WHERE $9::boolean AND ${legacy("c")} AND NOT EXISTS (SELECT 1 FROM todo t WHERE ${sameCheckpoint("t", "c")})
),
victim_writes AS MATERIALIZED (
  SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, pg_catalog.pg_column_size(w.*) AS bytes
    FROM todo t JOIN ${wr} w ON ${sameCheckpoint("w", "t")}
   WHERE NOT EXISTS (SELECT 1 FROM needed_writes n WHERE ${sameCheckpoint("n", "w")})
),
orphan_writes AS MATERIALIZED (
  SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, pg_catalog.pg_column_size(w.*) AS bytes
    FROM th JOIN ${wr} w ON w.thread_id = th.thread_id
   WHERE $9::boolean AND w.created_at < pg_catalog.now() - pg_catalog.make_interval(secs => $7::float8)
     AND NOT EXISTS (SELECT 1 FROM ${cp} c WHERE ${sameCheckpoint("c", "w")})
     AND NOT EXISTS (SELECT 1 FROM needed_writes n WHERE ${sameCheckpoint("n", "w")})
   LIMIT $10::int
),
refs AS MATERIALIZED (
  SELECT c.thread_id, c.checkpoint_ns, v.key AS channel, v.value AS version
    FROM th JOIN ${cp} c ON c.thread_id = th.thread_id
   CROSS JOIN LATERAL pg_catalog.jsonb_each_text(CASE WHEN pg_catalog.jsonb_typeof(c.checkpoint -> 'channel_versions') = 'object'
                                           THEN c.checkpoint -> 'channel_versions' ELSE '{}'::jsonb END) AS v
   WHERE $9::boolean AND NOT EXISTS (SELECT 1 FROM todo t WHERE ${sameCheckpoint("t", "c")})
),
unreferenced AS MATERIALIZED (
  SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, pg_catalog.pg_column_size(b.*) AS bytes
    FROM th JOIN ${bl} b ON b.thread_id = th.thread_id
   WHERE $9::boolean
     AND NOT EXISTS (SELECT 1 FROM refs r WHERE r.thread_id = b.thread_id AND r.checkpoint_ns = b.checkpoint_ns
                                            AND r.channel = b.channel AND r.version = b.version)
   LIMIT $10::int
), ${
    dry
      ? `gone_c AS (SELECT thread_id, bytes FROM todo),
gone_w AS (SELECT thread_id, bytes FROM victim_writes UNION ALL SELECT thread_id, bytes FROM orphan_writes),
gone_b AS (SELECT thread_id, bytes FROM unreferenced)`
      : `gone_c AS (DELETE FROM ${cp} c USING todo t WHERE ${sameCheckpoint("c", "t")}
                AND NOT EXISTS (SELECT 1 FROM ${hd} h WHERE ${sameCheckpoint("h", "c")}) RETURNING t.bytes),
gone_w AS (DELETE FROM ${wr} w USING (SELECT * FROM victim_writes UNION ALL SELECT * FROM orphan_writes) g
            WHERE ${sameCheckpoint("w", "g")} AND w.task_id = g.task_id AND w.idx = g.idx RETURNING g.bytes),
gone_b AS (DELETE FROM ${bl} b USING unreferenced u
            WHERE b.thread_id = u.thread_id AND b.checkpoint_ns = u.checkpoint_ns AND b.channel = u.channel AND b.version = u.version
           RETURNING u.bytes)`
  }
SELECT (SELECT pg_catalog.count(*) FROM gone_c)::int AS checkpoints, (SELECT coalesce(pg_catalog.sum(bytes), 0) FROM gone_c)::bigint AS checkpoint_bytes,
       (SELECT pg_catalog.count(*) FROM gone_w)::int AS writes, (SELECT coalesce(pg_catalog.sum(bytes), 0) FROM gone_w)::bigint AS write_bytes,
       (SELECT pg_catalog.count(*) FROM gone_b)::int AS blobs, (SELECT coalesce(pg_catalog.sum(bytes), 0) FROM gone_b)::bigint AS blob_bytes,
       ARRAY(SELECT thread_id FROM more) AS more_threads, ARRAY(SELECT checkpoint_ns FROM more) AS more_ns,
       ($10::int IS NOT NULL AND ((SELECT pg_catalog.count(*) FROM orphan_writes) >= $10::int OR (SELECT pg_catalog.count(*) FROM unreferenced) >= $10::int)) AS more_garbage,
       (SELECT pg_catalog.row_to_json(b) FROM (SELECT thread_id, checkpoint_ns, checkpoint_id, reason FROM broken LIMIT 1) b) AS broken${dry ? perThread : ""}`;

  return { threadPage, claim, idleThreads, expire, round };
}

type Sql = ReturnType<typeof buildSql>;

interface RoundRow {
  /** Set when a keep-set walk met broken parent links (see `broken` in the round statement). */
  broken?: { thread_id: string; checkpoint_ns: string; checkpoint_id: string; reason: "cycle" | "missing-parent" } | null;
  checkpoints: number;
  checkpoint_bytes: string | number;
  writes: number;
  write_bytes: string | number;
  blobs: number;
  blob_bytes: string | number;
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

function zero(): PruneCounts {
  return { checkpoints: 0, writes: 0, blobs: 0, checkpointBytes: 0, writeBytes: 0, blobBytes: 0, threadsExpired: 0, threadsSkipped: 0 };
}

function addRows(into: PruneCounts, row: RoundRow): void {
  into.checkpoints += row.checkpoints;
  into.writes += row.writes;
  into.blobs += row.blobs;
  into.checkpointBytes += Number(row.checkpoint_bytes);
  into.writeBytes += Number(row.write_bytes);
  into.blobBytes += Number(row.blob_bytes);
}

function addCounts(into: PruneCounts, from: PruneCounts): void {
  for (const k of Object.keys(into) as (keyof PruneCounts)[]) into[k] += from[k];
}

interface BatchOutcome {
  counts: PruneCounts;
  expired: string[];
  skipped: string[];
  /** Dry runs: per thread. */
  threads?: PruneThreadCounts[];
}

interface PerThreadRow {
  thread_id: string;
  checkpoints: number;
  checkpoint_bytes: number | string;
  writes: number;
  write_bytes: number | string;
  blobs: number;
  blob_bytes: number | string;
}

/** Adds a dry statement's per-thread counts (`per_thread`, JSON) into `into`. */
function addPerThread(into: Map<string, PruneThreadCounts>, rows: PerThreadRow[] | string, expired: boolean): void {
  for (const r of typeof rows === "string" ? (JSON.parse(rows) as PerThreadRow[]) : rows) {
    const t = into.get(r.thread_id) ?? { threadId: r.thread_id, checkpoints: 0, writes: 0, blobs: 0, bytes: 0, expired };
    t.checkpoints += r.checkpoints;
    t.writes += r.writes;
    t.blobs += r.blobs;
    t.bytes += Number(r.checkpoint_bytes) + Number(r.write_bytes) + Number(r.blob_bytes);
    into.set(r.thread_id, t);
  }
}

/** Parameters of the `round` statement that follow from the options. */
interface Rules {
  pruneCheckpoints: boolean;
  keepLast: number;
  keepWindowSecs: number;
  graceSecs: number;
  expire: boolean;
  idleSecs: number | null;
  threadTtl: boolean;
}

async function run(db: Db, o: Settings, started: number): Promise<PruneResult> {
  const sql = buildSql(o.schema);
  const graceSecs = o.graceMs / 1000;
  const rules: Rules = {
    pruneCheckpoints: o.keepLast !== undefined || o.olderThanMs !== undefined,
    keepLast: o.keepLast ?? 0,
    // Kept for their age: younger than olderThan (if given) or than the grace period.
    keepWindowSecs: Math.max(o.olderThanMs === undefined ? 0 : o.olderThanMs / 1000, graceSecs),
    graceSecs,
    expire: o.idleForMs !== undefined || o.threadTtl,
    idleSecs: o.idleForMs === undefined ? null : o.idleForMs / 1000,
    threadTtl: o.threadTtl,
  };
  const totals = zero();
  const skipped: string[] = [];
  const perThread: PruneThreadCounts[] = [];
  let threadsScanned = 0;
  let batches = 0;
  let aborted = false;
  for await (const threads of threadBatches(db, sql, o)) {
    if (o.signal?.aborted) {
      aborted = true;
      break;
    }
    const outcome = o.dryRun ? await dryBatch(db, sql, rules, threads) : await realBatch(db, sql, o, rules, threads);
    batches += 1;
    threadsScanned += threads.length;
    addCounts(totals, outcome.counts);
    if (outcome.threads) perThread.push(...outcome.threads);
    for (const id of outcome.skipped) if (skipped.length < 100) skipped.push(id);
    o.onProgress?.({
      dryRun: o.dryRun,
      batch: batches,
      threadsScanned,
      lastThreadId: threads[threads.length - 1],
      batchCounts: outcome.counts,
      totals: { ...totals },
      expiredThreadIds: outcome.expired,
      elapsedMs: performance.now() - started,
    });
  }
  return {
    ...totals,
    dryRun: o.dryRun,
    ...(o.dryRun ? { threads: perThread } : {}),
    threadsScanned,
    batches,
    bytes: totals.checkpointBytes + totals.writeBytes + totals.blobBytes,
    skippedThreadIds: skipped,
    aborted,
    durationMs: performance.now() - started,
  };
}

async function* threadBatches(db: Db, sql: Sql, o: Settings): AsyncGenerator<string[]> {
  if (o.threadIds) {
    for (let i = 0; i < o.threadIds.length; i += o.batchSize) yield o.threadIds.slice(i, i + o.batchSize);
    return;
  }
  let cursor: string | undefined;
  for (;;) {
    const text = sql.threadPage(cursor === undefined);
    const { rows } = await query<{ id: string }>(db, text, [cursor ?? null, o.batchSize], "prune (listing threads)");
    if (rows.length === 0) return;
    const ids = rows.map((r) => r.id);
    yield ids;
    if (ids.length < o.batchSize) return;
    cursor = ids[ids.length - 1];
  }
}

/** A dry run reads one consistent snapshot per batch and counts what the real rounds would delete. */
async function dryBatch(db: Db, sql: Sql, rules: Rules, threads: string[]): Promise<BatchOutcome> {
  return withErrors("prune (dry run)", () =>
    db.transaction(
      async (tx) => {
        await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
        const counts = zero();
        const perThread = new Map<string, PruneThreadCounts>();
        let expired: string[] = [];
        if (rules.expire) {
          const row = (await tx.query<RoundRow & { expired: string[]; per_thread: PerThreadRow[] }>(sql.expire(true), expireParams(rules, threads))).rows[0]!;
          expired = row.expired;
          addRows(counts, row);
          addPerThread(perThread, row.per_thread, true);
          counts.threadsExpired = expired.length;
        }
        const gone = new Set(expired);
        const rest = threads.filter((t) => !gone.has(t));
        if (rest.length > 0) {
          const row = checkWalk((await tx.query<RoundRow & { per_thread: PerThreadRow[] }>(sql.round(true), roundParams(rules, rest, null, rules.pruneCheckpoints, null, true, null))).rows[0]!);
          addRows(counts, row);
          addPerThread(perThread, row.per_thread, false);
        }
        // Byte order, as the batches come (thread_id is COLLATE "C").
        const threadsOut = [...perThread.values()].sort((a, b) => Buffer.compare(Buffer.from(a.threadId), Buffer.from(b.threadId)));
        return { counts, expired, skipped: [], threads: threadsOut };
      },
      { rollback: true },
    ),
  );
}

function expireParams(rules: Rules, threads: string[]): unknown[] {
  return [threads, rules.idleSecs, rules.threadTtl, rules.graceSecs];
}

function roundParams(
  rules: Rules,
  threads: string[],
  lineages: Lineage[] | null,
  victims: boolean,
  budget: number | null,
  collect: boolean,
  collectBudget: number | null,
): unknown[] {
  return [
    threads,
    lineages ? lineages.map((l) => l.thread) : null,
    lineages ? lineages.map((l) => l.ns) : null,
    victims && rules.pruneCheckpoints,
    rules.keepLast,
    rules.keepWindowSecs,
    rules.graceSecs,
    budget,
    collect,
    collectBudget,
  ];
}

interface ClaimRow {
  thread_id: string;
  locked_ns: string[];
  head_ns: string[];
}

/** A walk over broken parent links stops the prune (its transaction rolls back): nothing is deleted on a guess. */
function checkWalk<R extends RoundRow>(row: R): R {
  const b = row.broken;
  if (b) throw new HistoryCorruptError({ threadId: b.thread_id, checkpointNs: b.checkpoint_ns, checkpointId: b.checkpoint_id, reason: b.reason, operation: "prune" });
  return row;
}

interface RoundResult extends RoundRow {
  more_threads: string[];
  more_ns: string[];
  more_garbage: boolean;
}

interface Claimed {
  /** Threads this transaction holds the advisory lock of. */
  threads: string[];
  /** Lineages whose head row this transaction locked. */
  locked: Lineage[];
  /** Lineages with a head this transaction could not lock (a put was writing it). */
  busy: Lineage[];
  /** Threads all of whose heads are locked (none busy). */
  whole: string[];
}

async function claim(tx: Queryable, sql: Sql, o: Settings, threads: string[], lockHeads: boolean): Promise<Claimed> {
  await tx.query("SELECT pg_catalog.set_config('lock_timeout', $1, true)", [`${o.lockTimeoutMs}ms`]);
  const { rows } = await tx.query<ClaimRow>(sql.claim, [threads, `langgraph-checkpoint-pg:prune:${o.schema}`, lockHeads]);
  const out: Claimed = { threads: [], locked: [], busy: [], whole: [] };
  for (const r of rows) {
    out.threads.push(r.thread_id);
    const locked = new Set(r.locked_ns);
    for (const ns of r.locked_ns) out.locked.push({ thread: r.thread_id, ns });
    for (const ns of r.head_ns) if (lockHeads && !locked.has(ns)) out.busy.push({ thread: r.thread_id, ns });
    if (!lockHeads || r.locked_ns.length === r.head_ns.length) out.whole.push(r.thread_id);
  }
  return out;
}

const key = (l: Lineage) => `${l.thread}\u0000${l.ns}`;

/**
 * One batch, for real, as a series of short transactions:
 * (1) find the idle threads without locks, then lock the heads of only those
 *     and delete them whole (re-checked under the locks);
 * (2) delete rounds: lock the heads of the other threads (skipping busy ones),
 *     delete up to `chunkSize` checkpoints, commit; again until no lineage has
 *     victims left; busy lineages get a few more chances;
 * (3) collect unreferenced blobs and orphaned writes, without head locks.
 */
async function realBatch(db: Db, sql: Sql, o: Settings, rules: Rules, threads: string[]): Promise<BatchOutcome> {
  const counts = zero();
  const skipped = new Set<string>();
  let expired: string[] = [];

  // (1) Expiry.
  let live = threads;
  if (rules.expire) {
    const idle = await attempt("prune (finding idle threads)", () =>
      db.transaction(async (tx) => {
        const claimed = await claim(tx, sql, o, threads, false);
        const { rows } = await tx.query<{ thread_id: string }>(sql.idleThreads, expireParams(rules, claimed.threads));
        return { ids: rows.map((r) => r.thread_id), claimed: claimed.threads };
      }),
    );
    if (idle === undefined) return { counts: { ...counts, threadsSkipped: threads.length }, expired, skipped: threads };
    for (const t of threads) if (!idle.claimed.includes(t)) skipped.add(t);
    live = idle.claimed;
    if (idle.ids.length > 0) {
      const gone = await attempt("prune (expiring idle threads)", () =>
        db.transaction(async (tx) => {
          // A thread whose head a put holds right now is not idle any more: it is left out.
          const claimed = await claim(tx, sql, o, idle.ids, true);
          if (claimed.whole.length === 0) return undefined;
          return (await tx.query<RoundRow & { expired: string[] }>(sql.expire(false), expireParams(rules, claimed.whole))).rows[0]!;
        }),
      );
      if (gone) {
        addRows(counts, gone);
        counts.threadsExpired = gone.expired.length;
        expired = gone.expired;
        const goneSet = new Set(expired);
        live = live.filter((t) => !goneSet.has(t));
      }
    }
  }

  // (2) Delete rounds. `todo` null: every lineage of the threads; otherwise those lineages only.
  const drain = async (threadIds: string[], only: Lineage[] | null): Promise<Lineage[]> => {
    let todo = only;
    let todoThreads = threadIds;
    const busy = new Map<string, Lineage>();
    while (todoThreads.length > 0) {
      const wanted = todo === null ? null : new Set(todo.map(key));
      const r = await attempt("prune", () =>
        db.transaction(async (tx) => {
          const claimed = await claim(tx, sql, o, todoThreads, true);
          const mine = wanted === null ? claimed.locked : claimed.locked.filter((l) => wanted.has(key(l)));
          const got = new Set(mine.map(key));
          // A thread another prune holds is that prune's job: skipped, not retried.
          for (const t of todoThreads) if (!claimed.threads.includes(t)) skipped.add(t);
          const missed = todo === null ? claimed.busy : todo.filter((l) => !got.has(key(l)) && claimed.threads.includes(l.thread));
          const row = mine.length > 0 ? await deleteRound(tx, sql, rules, o, mine) : undefined;
          return { row, missed };
        }),
      );
      if (r === undefined) {
        // Lock timeouts every time: leave these threads to the next run.
        for (const t of todoThreads) skipped.add(t);
        break;
      }
      for (const l of r.missed) busy.set(key(l), l);
      if (!r.row) break;
      addRows(counts, r.row);
      todo = moreOf(r.row);
      todoThreads = [...new Set(todo.map((l) => l.thread))];
    }
    return [...busy.values()];
  };
  if (rules.pruneCheckpoints && live.length > 0) {
    let busy = await drain(live, null);
    for (const pause of BUSY_BACKOFF_MS) {
      if (busy.length === 0) break;
      await sleep(pause);
      busy = await drain([...new Set(busy.map((l) => l.thread))], busy);
    }
    for (const l of busy) skipped.add(l.thread);
  }

  // (3) Collection: no head locks needed (see the file comment); the advisory lock keeps other prunes away.
  let collect = live;
  while (collect.length > 0) {
    const r = await attempt("prune (collecting blobs and writes)", () =>
      db.transaction(async (tx) => {
        const claimed = await claim(tx, sql, o, collect, false);
        if (claimed.threads.length === 0) return { row: undefined, threads: claimed.threads };
        const row = (await tx.query<RoundResult>(sql.round(false), roundParams(rules, claimed.threads, null, false, null, true, o.chunkSize * COLLECT_FACTOR))).rows[0]!;
        return { row, threads: claimed.threads };
      }),
    );
    if (r === undefined) {
      for (const t of collect) skipped.add(t);
      break;
    }
    for (const t of collect) if (!r.threads.includes(t)) skipped.add(t);
    if (!r.row) break;
    addRows(counts, r.row);
    if (!r.row.more_garbage) break;
    collect = r.threads;
  }
  counts.threadsSkipped = skipped.size;
  return { counts, expired, skipped: [...skipped] };
}

async function deleteRound(tx: Queryable, sql: Sql, rules: Rules, o: Settings, lineages: Lineage[]): Promise<RoundResult> {
  const threads = [...new Set(lineages.map((l) => l.thread))];
  return checkWalk((await tx.query<RoundResult>(sql.round(false), roundParams(rules, threads, lineages, true, o.chunkSize, false, null))).rows[0]!);
}

function moreOf(row: RoundResult): Lineage[] {
  return row.more_threads.map((thread, i) => ({ thread, ns: row.more_ns[i]! }));
}

// 55P03 lock_not_available (lock_timeout), 40P01 deadlock, 40001 serialization failure: try the round again later.
const TRANSIENT = new Set(["55P03", "40P01", "40001"]);

/** Run one round; transient lock failures are retried, then give `undefined` (the caller skips). */
async function attempt<T>(what: string, fn: () => Promise<T>): Promise<T | undefined> {
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

async function withErrors<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof CheckpointerError) throw err;
    throw new DatabaseOperationError(what, err);
  }
}

async function query<R extends Record<string, unknown>>(db: Db, text: string, values: unknown[], what: string): Promise<{ rows: R[] }> {
  return withErrors(what, () => db.query<R>(text, values));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
