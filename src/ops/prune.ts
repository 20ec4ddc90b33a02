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
 * - **A row a put relies on that no checkpoint names yet.** A put that sends
 *   a value already stored (an element of an earlier list: element rows are
 *   keyed by content, so `ON CONFLICT` finds the old row), or that names
 *   values it does not write under a parent that is not stored, touches those
 *   rows (bumps their `row_version`) in its statement. The collection decides
 *   on its snapshot, then deletes a row only if it can lock it unchanged
 *   (re-read after a concurrent commit; a row a put holds is skipped, never
 *   waited on): a touched row stays, and a put arriving later waits for the
 *   deletion and stores the row anew (issue #26, rows 1 and 11).
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
 * An expired thread leaves a tombstone, as `deleteThread` does (see
 * saver/tombstones.ts): it is deleted only once its deletion lock is taken
 * (tried: a thread being written is not idle), so a run still going on it
 * cannot write it back. Tombstones older than `keepTombstones` are collected
 * at the end of each run.
 *
 * Issue #6. The statements are in prune-sql.ts, next to the one function that
 * runs them, rather than in saver/sql/ (the saver's statements); the options
 * and their checks in prune-options.ts, its database plumbing (pool, typed failures, retried
 * rounds) in prune-db.ts.
 */
import type { Db, Queryable } from "../db/db.js";
import { HistoryCorruptError, InvalidOptionsError } from "../errors.js";
import { assertSchemaCurrent } from "../db/migrate.js";
import { KNOWS_ELEMENTS_SQL } from "../saver/element-names.js";
import { readOptions, type PruneCounts, type PruneOptions, type PruneResult, type PruneThreadCounts, type Settings } from "./prune-options.js";
import { addCounts, addKept, addKeptTotals, addPerThread, addRows, zero, zeroKept, type BatchOutcome, type PerThreadRow } from "./prune-counts.js";
import { buildSql, pruneLockName, type Lineage, type RoundRow, type Sql } from "./prune-sql.js";
import { attempt, connect, isDistributed, query, sleep, withErrors } from "./prune-db.js";

export type { PruneCounts, PruneKept, PruneOptions, PruneProgress, PruneResult, PruneThreadCounts } from "./prune-options.js";

/**
 * A collection round may delete this many times `chunkSize` blobs (and as many
 * writes): it holds no head lock, only the locks of rows nobody references.
 */
const COLLECT_FACTOR = 10;
/** Busy lineages are retried this many times per batch, after these pauses. */
const BUSY_BACKOFF_MS = [20, 80, 250];

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
// The run
// ---------------------------------------------------------------------------

/** What every batch of one prune works with: its statements, settings and rules. */
interface Job {
  sql: Sql;
  o: Settings;
  rules: Rules;
}

/** Parameters of the `round` statement that follow from the options. */
interface Rules {
  pruneCheckpoints: boolean;
  keepLast: number;
  keepWindowSecs: number;
  /** null: no olderThan (then what the window keeps, the grace period kept). */
  olderThanSecs: number | null;
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
    olderThanSecs: o.olderThanMs === undefined ? null : o.olderThanMs / 1000,
    graceSecs,
    expire: o.idleForMs !== undefined || o.threadTtl,
    idleSecs: o.idleForMs === undefined ? null : o.idleForMs / 1000,
    threadTtl: o.threadTtl,
  };
  const totals = zero();
  const kept = zeroKept();
  const skipped: string[] = [];
  const perThread: PruneThreadCounts[] = [];
  let threadsScanned = 0;
  let batches = 0;
  let aborted = false;
  const job: Job = { sql, o, rules };
  for await (const threads of threadBatches(db, sql, o, await isDistributed(db, sql))) {
    if (o.signal?.aborted) {
      aborted = true;
      break;
    }
    const outcome = o.dryRun ? await dryBatch(db, job, threads) : await realBatch(db, job, threads);
    batches += 1;
    threadsScanned += threads.length;
    addCounts(totals, outcome.counts);
    addKeptTotals(kept, outcome.kept);
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
  if (!aborted) totals.tombstones = await collectTombstones(db, sql, o);
  return {
    ...totals,
    dryRun: o.dryRun,
    kept,
    ...(o.dryRun ? { threads: perThread } : {}),
    threadsScanned,
    batches,
    bytes: totals.checkpointBytes + totals.writeBytes + totals.blobBytes,
    skippedThreadIds: skipped,
    aborted,
    durationMs: performance.now() - started,
  };
}

/**
 * The batches of threads, `batchSize` at a time. On tables distributed by Citus each batch is one
 * thread: its statements then route whole to the thread's node (prune-sql.ts `batch`); the listing
 * is then a multi-shard one.
 */
async function* threadBatches(db: Db, sql: Sql, o: Settings, distributed: boolean): AsyncGenerator<string[]> {
  const each = function* (ids: string[]): Generator<string[]> {
    if (distributed) for (const id of ids) yield [id];
    else yield ids;
  };
  if (o.threadIds) {
    for (let i = 0; i < o.threadIds.length; i += o.batchSize) yield* each(o.threadIds.slice(i, i + o.batchSize));
    return;
  }
  let cursor: string | undefined;
  for (;;) {
    const text = distributed ? sql.threadPageDistributed : sql.threadPage(cursor === undefined);
    const { rows } = await query<{ id: string }>(db, text, [cursor ?? null, o.batchSize], "prune (listing threads)");
    if (rows.length === 0) return;
    const ids = rows.map((r) => r.id);
    yield* each(ids);
    if (ids.length < o.batchSize) return;
    cursor = ids[ids.length - 1];
  }
}

/** A dry run reads one consistent snapshot per batch and counts what the real rounds would delete. */
async function dryBatch(db: Db, { sql, o, rules }: Job, threads: string[]): Promise<BatchOutcome> {
  return withErrors("prune (dry run)", () =>
    db.transaction(
      async (tx) => {
        await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
        const counts = zero();
        const kept = zeroKept();
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
          const row = checkWalk((await tx.query<RoundRow & { per_thread: PerThreadRow[] }>(sql.round(true), roundParams(rules, { threads: rest, lineages: null, victims: rules.pruneCheckpoints, budget: null, collect: true, collectBudget: null }))).rows[0]!, o.schema);
          addRows(counts, row);
          addKept(kept, row);
          addPerThread(perThread, row.per_thread, false);
        }
        // Byte order, as the batches come (thread_id is COLLATE "C").
        const threadsOut = [...perThread.values()].sort((a, b) => Buffer.compare(Buffer.from(a.threadId), Buffer.from(b.threadId)));
        return { counts, kept, expired, skipped: [], threads: threadsOut };
      },
      { rollback: true },
    ),
  );
}

/** Tombstones older than `keepTombstones`: deleted in chunks (counted, dry). */
async function collectTombstones(db: Db, sql: Sql, o: Settings): Promise<number> {
  const params = [o.keepTombstonesMs / 1000, o.threadIds ?? null, o.chunkSize * COLLECT_FACTOR];
  if (o.dryRun) return (await query<{ n: number }>(db, sql.tombstones(true), params.slice(0, 2), "prune (counting tombstones)")).rows[0]!.n;
  let total = 0;
  for (;;) {
    const n = (await query<{ n: number }>(db, sql.tombstones(false), params, "prune (collecting tombstones)")).rows[0]!.n;
    total += n;
    if (n < o.chunkSize * COLLECT_FACTOR) return total;
  }
}

function expireParams(rules: Rules, threads: string[]): unknown[] {
  return [threads, rules.idleSecs, rules.threadTtl, rules.graceSecs];
}

/** What one `round` statement works on, besides the rules. */
interface Round {
  threads: string[];
  /** The lineages whose checkpoints it may delete (their head rows locked); null: none. */
  lineages: Lineage[] | null;
  /** Delete checkpoints at all (else only collect). */
  victims: boolean;
  /** At most this many checkpoints deleted (null: no bound). */
  budget: number | null;
  /** Also collect unreferenced blobs and orphaned writes. */
  collect: boolean;
  /** At most this many blobs and writes collected (null: no bound). */
  collectBudget: number | null;
}

function roundParams(rules: Rules, { threads, lineages, victims, budget, collect, collectBudget }: Round): unknown[] {
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
    rules.olderThanSecs,
  ];
}

interface ClaimRow {
  thread_id: string;
  locked_ns: string[];
  head_ns: string[];
}

/** A walk over broken parent links stops the prune (its transaction rolls back): nothing is deleted on a guess. */
function checkWalk<R extends RoundRow>(row: R, schema: string): R {
  const b = row.broken;
  if (b) throw new HistoryCorruptError({ schema, threadId: b.thread_id, checkpointNs: b.checkpoint_ns, checkpointId: b.checkpoint_id, reason: b.reason, operation: "prune" });
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

async function claim(tx: Queryable, { sql, o }: Job, threads: string[], lockHeads: boolean): Promise<Claimed> {
  // Every transaction of prune claims first: its lock timeout, and that it knows element rows (migration 0008's guard).
  await tx.query("SELECT pg_catalog.set_config('lock_timeout', $1, true)", [`${o.lockTimeoutMs}ms`]);
  await tx.query(KNOWS_ELEMENTS_SQL);
  const { rows } = await tx.query<ClaimRow>(sql.claim, [threads, pruneLockName(o.schema), lockHeads]);
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
async function realBatch(db: Db, job: Job, threads: string[]): Promise<BatchOutcome> {
  const { sql, o, rules } = job;
  const counts = zero();
  const kept = zeroKept();
  const skipped = new Set<string>();
  let expired: string[] = [];

  // (1) Expiry.
  let live = threads;
  if (rules.expire) {
    const idle = await attempt("prune (finding idle threads)", () =>
      db.transaction(async (tx) => {
        const claimed = await claim(tx, job, threads, false);
        // Every thread another prune's (on Citus a statement over no thread at all would not route).
        if (claimed.threads.length === 0) return { ids: [], claimed: [] };
        const { rows } = await tx.query<{ thread_id: string }>(sql.idleThreads, expireParams(rules, claimed.threads));
        return { ids: rows.map((r) => r.thread_id), claimed: claimed.threads };
      }),
    );
    if (idle === undefined) return { counts: { ...counts, threadsSkipped: threads.length }, kept, expired, skipped: threads };
    for (const t of threads) if (!idle.claimed.includes(t)) skipped.add(t);
    live = idle.claimed;
    if (idle.ids.length > 0) {
      const gone = await attempt("prune (expiring idle threads)", () =>
        db.transaction(async (tx) => {
          // A thread whose head a put holds right now is not idle any more: it is left out.
          const claimed = await claim(tx, job, idle.ids, true);
          if (claimed.whole.length === 0) return undefined;
          // And no write in flight on it (its deletion lock), so none can come after its tombstone.
          const { locked } = (await tx.query<{ locked: string[] }>(sql.lockForExpiry, [claimed.whole])).rows[0]!;
          if (locked.length === 0) return undefined;
          return (await tx.query<RoundRow & { expired: string[] }>(sql.expire(false), expireParams(rules, locked))).rows[0]!;
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
          const claimed = await claim(tx, job, todoThreads, true);
          const mine = wanted === null ? claimed.locked : claimed.locked.filter((l) => wanted.has(key(l)));
          const got = new Set(mine.map(key));
          // A thread another prune holds is that prune's job: skipped, not retried.
          for (const t of todoThreads) if (!claimed.threads.includes(t)) skipped.add(t);
          const missed = todo === null ? claimed.busy : todo.filter((l) => !got.has(key(l)) && claimed.threads.includes(l.thread));
          const row = mine.length > 0 ? await deleteRound(tx, job, mine) : undefined;
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
      addKept(kept, r.row);
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
        const claimed = await claim(tx, job, collect, false);
        if (claimed.threads.length === 0) return { row: undefined, threads: claimed.threads };
        const row = (await tx.query<RoundResult>(sql.round(false), roundParams(rules, { threads: claimed.threads, lineages: null, victims: false, budget: null, collect: true, collectBudget: o.chunkSize * COLLECT_FACTOR }))).rows[0]!;
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
  return { counts, kept, expired, skipped: [...skipped] };
}

async function deleteRound(tx: Queryable, { sql, o, rules }: Job, lineages: Lineage[]): Promise<RoundResult> {
  const threads = [...new Set(lineages.map((l) => l.thread))];
  return checkWalk((await tx.query<RoundResult>(sql.round(false), roundParams(rules, { threads, lineages, victims: true, budget: o.chunkSize, collect: false, collectBudget: null }))).rows[0]!, o.schema);
}

function moreOf(row: RoundResult): Lineage[] {
  return row.more_threads.map((thread, i) => ({ thread, ns: row.more_ns[i]! }));
}
