/**
 * The statements of `prune` (prune.ts runs them): the dry-run count, the
 * delete round under the lineages' head locks, idle-thread expiry, and blob
 * and orphan-write collection, each one statement. Built per schema, once;
 * our columns are named through `COL` (db/names.ts), the columns of a row
 * prune.ts reads keep fixed names (`AS thread_id`).
 */
import { quoteIdent } from "../validate.js";
import { CHECKPOINT_BLOBS, CHECKPOINT_HEADS, CHECKPOINT_TOMBSTONES, CHECKPOINT_WRITES, CHECKPOINTS, COL } from "../db/names.js";
import { ELEMENTS_CHANNEL, REFS_TYPE } from "../saver/element-names.js";
import { hashesSql, refsAreaSql } from "../saver/element-names.js";
import { tryLockForDelete, upsertTombstones } from "../saver/sql/gate.js";

/** One lineage: a thread and a namespace. */
export interface Lineage {
  thread: string;
  ns: string;
}

/**
 * The name of the per-thread advisory lock prune holds while it works on a
 * thread (with the thread id: `pg_advisory_xact_lock(hashtext(name), hashtext(thread))`).
 * compact.ts takes it too, so prune never decides on a thread's element rows
 * while a compact is changing them, and so does copy.ts on its source.
 */
export function pruneLockName(schema: string): string {
  return `langgraph-checkpoint-pg:prune:${schema}`;
}

/** The rules a checkpoint can be kept by, in the order the summary credits them (the first that keeps it). */
const KEPT = { keepLast: 1, head: 2, olderThan: 3, grace: 4 } as const;

export function buildSql(schema: string) {
  const s = quoteIdent(schema);
  const cp = `${s}.${CHECKPOINTS.table}`;
  const wr = `${s}.${CHECKPOINT_WRITES.table}`;
  const bl = `${s}.${CHECKPOINT_BLOBS.table}`;
  const hd = `${s}.${CHECKPOINT_HEADS.table}`;
  const tb = `${s}.${CHECKPOINT_TOMBSTONES.table}`;
  /**
   * The batch's rows of a table (threads $1). The statements over a batch read each table through
   * this, filtered on the batch's threads and not only joined to them, and their deletes filter
   * the same way ({@link inBatch}): Citus, given one thread, routes such a statement whole to the
   * thread's node (it runs a recursive CTE, a correlated subquery, `FOR UPDATE` only there). One
   * server flattens the subquery: the same plan, the filter once more in its index conditions.
   */
  const batch = (table: string) => `(SELECT * FROM ${table} WHERE ${COL.threadId} = ANY ($1::text[]))`;
  const inBatch = (alias: string) => `${alias}.${COL.threadId} = ANY ($1::text[])`;

  /** Checkpoint `c` stores a value for channel `ch` (what ends a delta walk: the seed). */
  const stores = (c: string, ch: string) => `EXISTS (
      SELECT 1 FROM ${batch(bl)} b
       WHERE b.${COL.threadId} = ${c}.${COL.threadId} AND b.${COL.checkpointNs} = ${c}.${COL.checkpointNs} AND b.${COL.channel} = ${ch}
         AND b.${COL.version} = ${c}.${COL.checkpoint} -> 'channel_versions' ->> ${ch} AND b.${COL.type} <> 'empty')`;

  /**
   * The delta channels LangGraph rebuilds for checkpoint `c` by walking its
   * ancestors (langgraph channels/base.js `deltaChannelsToReplay`): its delta
   * channels (the keys of `counters_since_delta_snapshot`, which LangGraph
   * writes for every delta channel not snapshotted at that checkpoint) that it
   * does not store; one without a version only on branches that predate
   * `delta_writes_versioned` (where such a channel can still hold writes).
   */
  const needs = (c: string) => `ARRAY(
      SELECT d.ch FROM pg_catalog.jsonb_object_keys(CASE WHEN pg_catalog.jsonb_typeof(${c}.${COL.metadata} -> 'counters_since_delta_snapshot') = 'object'
                                             THEN ${c}.${COL.metadata} -> 'counters_since_delta_snapshot' ELSE '{}'::jsonb END) AS d(ch)
       WHERE (${c}.${COL.checkpoint} -> 'channel_versions' ? d.ch OR ${c}.${COL.metadata} ->> 'delta_writes_versioned' IS DISTINCT FROM 'true')
         AND NOT ${stores(c, "d.ch")}
       ORDER BY 1)`;

  /** Checkpoints before format v4 read their pending sends from their parent's writes (see saver/sql/read.ts, read kind 3). */
  const legacy = (c: string) =>
    `${c}.${COL.parentCheckpointId} IS NOT NULL AND pg_catalog.jsonb_typeof(${c}.${COL.checkpoint} -> 'v') = 'number' AND (${c}.${COL.checkpoint} ->> 'v')::numeric < 4`;

  /** The hashes in the refs areas of `source` (thread, namespace, and `area`: a refs area or NULL), each once per lineage, as `h`. */
  const elementRefs = (source: string) => `
  SELECT DISTINCT x.${COL.threadId}, x.${COL.checkpointNs}, i.h FROM (${source}) x ${hashesSql("x.area", "i")}
`;
  const sameWrite = (a: string, b: string) => `${sameCheckpoint(a, b)} AND ${a}.${COL.taskId} = ${b}.${COL.taskId} AND ${a}.${COL.idx} = ${b}.${COL.idx}`;

  const sameCheckpoint = (a: string, b: string) =>
    `${a}.${COL.threadId} = ${b}.${COL.threadId} AND ${a}.${COL.checkpointNs} = ${b}.${COL.checkpointNs} AND ${a}.${COL.checkpointId} = ${b}.${COL.checkpointId}`;

  /** Keyset page of distinct thread ids over the three tables (loose index scans on each primary key). */
  const threadPage = (first: boolean) => {
    const next = (table: string, alias: string) => `${alias} AS (
  SELECT (SELECT ${COL.threadId} FROM ${table} WHERE ${first ? "$1::text IS NULL" : `${COL.threadId} > $1`} ORDER BY ${COL.threadId} LIMIT 1) AS id
  UNION ALL
  SELECT (SELECT ${COL.threadId} FROM ${table} WHERE ${COL.threadId} > ${alias}.id ORDER BY ${COL.threadId} LIMIT 1) FROM ${alias} WHERE ${alias}.id IS NOT NULL
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
   * {@link threadPage} on tables distributed by Citus, where a recursive CTE over every thread does
   * not run: the first $2 distinct thread ids after $1 (NULL: from the start) of each table, each
   * subquery a multi-shard query. It reads every key of the page's threads, where one server's loose
   * index scan reads one per thread.
   */
  const threadPageDistributed = `/* langgraph-checkpoint-pg prune: threads (distributed) */
SELECT id FROM (
  (SELECT DISTINCT ${COL.threadId} AS id FROM ${cp} WHERE $1::text IS NULL OR ${COL.threadId} > $1 ORDER BY 1 LIMIT $2)
  UNION (SELECT DISTINCT ${COL.threadId} FROM ${wr} WHERE $1::text IS NULL OR ${COL.threadId} > $1 ORDER BY 1 LIMIT $2)
  UNION (SELECT DISTINCT ${COL.threadId} FROM ${bl} WHERE $1::text IS NULL OR ${COL.threadId} > $1 ORDER BY 1 LIMIT $2)
) t ORDER BY id LIMIT $2`;

  /** $1 the checkpoints table (schema-qualified, `checkpoints` below): distributed by Citus? Only where Citus is installed (prune-db.ts `isDistributed`). */
  const distributed = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1::regclass) AS distributed`;

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
  SELECT x.${COL.threadId} FROM pg_catalog.unnest($1::text[]) AS x(${COL.threadId})
   WHERE pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtext($2::text), pg_catalog.hashtext(x.${COL.threadId}))
), seen AS MATERIALIZED (
  SELECT h.${COL.threadId}, h.${COL.checkpointNs} FROM ${batch(hd)} h JOIN t ON h.${COL.threadId} = t.${COL.threadId}
), locked AS MATERIALIZED (
  SELECT h.${COL.threadId}, h.${COL.checkpointNs} FROM ${batch(hd)} h JOIN t ON h.${COL.threadId} = t.${COL.threadId}
   WHERE $3::boolean
     FOR UPDATE OF h SKIP LOCKED
)
SELECT t.${COL.threadId} AS thread_id,
       ARRAY(SELECT l.${COL.checkpointNs} FROM locked l WHERE l.${COL.threadId} = t.${COL.threadId}) AS locked_ns,
       ARRAY(SELECT v.${COL.checkpointNs} FROM seen v WHERE v.${COL.threadId} = t.${COL.threadId}) AS head_ns
  FROM t`;

  /**
   * Threads idle for longer than `$2` seconds, or than their TTL when `$3`
   * (the head of the root namespace decides; any head if it has none), and
   * never sooner than the grace period `$4`. Activity: the newest checkpoint of
   * any namespace, or the newest write (a resume stores writes only).
   */
  const idle = `
WITH t AS MATERIALIZED (SELECT x.${COL.threadId} FROM pg_catalog.unnest($1::text[]) AS x(${COL.threadId})),
act AS MATERIALIZED (
  SELECT t.${COL.threadId},
         greatest((SELECT pg_catalog.max(c.${COL.createdAt}) FROM ${batch(cp)} c WHERE c.${COL.threadId} = t.${COL.threadId}),
                  (SELECT pg_catalog.max(w.${COL.createdAt}) FROM ${batch(wr)} w WHERE w.${COL.threadId} = t.${COL.threadId})) AS last_active,
         (SELECT c.${COL.ttlSeconds} FROM ${batch(hd)} h JOIN ${batch(cp)} c ON ${sameCheckpoint("c", "h")} WHERE h.${COL.threadId} = t.${COL.threadId}
           ORDER BY (h.${COL.checkpointNs} = '') DESC, c.${COL.ttlSeconds} DESC NULLS LAST LIMIT 1) AS ttl
    FROM t
), expired AS MATERIALIZED (
  SELECT a.${COL.threadId} FROM act a
   WHERE a.last_active < pg_catalog.now() - pg_catalog.make_interval(secs => $4::float8)
     AND (($2::float8 IS NOT NULL AND a.last_active < pg_catalog.now() - pg_catalog.make_interval(secs => $2::float8))
       OR ($3::boolean AND a.ttl IS NOT NULL AND a.last_active < pg_catalog.now() - pg_catalog.make_interval(secs => a.ttl)))
)`;

  /** The idle threads among $1, found without taking any lock. */
  const idleThreads = `/* langgraph-checkpoint-pg prune: idle */${idle}
SELECT ${COL.threadId} AS thread_id FROM expired`;

  /** Dry runs: the counts of `gone_c`, `gone_w` and `gone_b` per thread, as JSON (threads with something to delete). */
  const perThread = `,
       (SELECT coalesce(pg_catalog.json_agg(p ORDER BY p.thread_id), '[]') FROM (
          SELECT g.${COL.threadId} AS thread_id, pg_catalog.sum(g.c)::int AS checkpoints, pg_catalog.sum(g.cb)::bigint AS checkpoint_bytes, pg_catalog.sum(g.w)::int AS writes,
                 pg_catalog.sum(g.wb)::bigint AS write_bytes, pg_catalog.sum(g.b)::int AS blobs, pg_catalog.sum(g.bb)::bigint AS blob_bytes
            FROM (SELECT ${COL.threadId}, 1 AS c, bytes AS cb, 0 AS w, 0 AS wb, 0 AS b, 0 AS bb FROM gone_c
                  UNION ALL SELECT ${COL.threadId}, 0, 0, 1, bytes, 0, 0 FROM gone_w
                  UNION ALL SELECT ${COL.threadId}, 0, 0, 0, 0, 1, bytes FROM gone_b) g
           GROUP BY g.${COL.threadId}) p) AS per_thread`;

  /**
   * Of the threads $1, those whose deletion lock (saver/tombstones.ts) this
   * transaction could take: no write is in flight on them, and none can start
   * until it commits. Tried, never waited on (the transaction holds head
   * locks; a write waiting for one of them holds its thread's lock). Run
   * before `expire`, so that its snapshot sees what writes committed first.
   */
  const lockForExpiry = `/* langgraph-checkpoint-pg prune: lock for expiry */
SELECT ARRAY(SELECT x.t FROM pg_catalog.unnest($1::text[]) AS x(t) WHERE ${tryLockForDelete(schema, "x.t")}) AS locked`;

  /**
   * Deletes the idle threads among $1 whole, like `deleteThread`, leaving their
   * tombstones (the dry variant only sizes them). $1 are threads whose deletion
   * lock this transaction holds (`lockForExpiry`).
   */
  const expire = (dry: boolean) => `/* langgraph-checkpoint-pg prune: expire */${idle},
sized_c AS MATERIALIZED (SELECT c.${COL.threadId}, c.${COL.checkpointNs}, c.${COL.checkpointId}, pg_catalog.pg_column_size(c.*) AS bytes FROM expired e JOIN ${batch(cp)} c ON c.${COL.threadId} = e.${COL.threadId}),
sized_w AS MATERIALIZED (SELECT w.${COL.threadId}, w.${COL.checkpointNs}, w.${COL.checkpointId}, w.${COL.taskId}, w.${COL.idx}, pg_catalog.pg_column_size(w.*) AS bytes
                           FROM expired e JOIN ${batch(wr)} w ON w.${COL.threadId} = e.${COL.threadId}),
sized_b AS MATERIALIZED (SELECT b.${COL.threadId}, b.${COL.checkpointNs}, b.${COL.channel}, b.${COL.version}, pg_catalog.pg_column_size(b.*) AS bytes
                           FROM expired e JOIN ${batch(bl)} b ON b.${COL.threadId} = e.${COL.threadId}), ${
    dry
      ? `gone_c AS (SELECT ${COL.threadId}, bytes FROM sized_c), gone_w AS (SELECT ${COL.threadId}, bytes FROM sized_w), gone_b AS (SELECT ${COL.threadId}, bytes FROM sized_b)`
      : `tomb AS (${upsertTombstones(
          schema,
          `SELECT e.${COL.threadId}, GREATEST((SELECT pg_catalog.max(c.${COL.checkpointId}) FROM ${batch(cp)} c WHERE c.${COL.threadId} = e.${COL.threadId}),
                                     (SELECT pg_catalog.max(w.${COL.checkpointId}) FROM ${batch(wr)} w WHERE w.${COL.threadId} = e.${COL.threadId}))
     FROM expired e`,
        )}),
gone_c AS (DELETE FROM ${cp} c USING sized_c x WHERE ${inBatch("c")} AND ${sameCheckpoint("c", "x")} RETURNING x.bytes),
gone_h AS (DELETE FROM ${hd} h USING expired e WHERE ${inBatch("h")} AND h.${COL.threadId} = e.${COL.threadId}),
gone_w AS (DELETE FROM ${wr} w USING sized_w x WHERE ${inBatch("w")} AND ${sameCheckpoint("w", "x")} AND w.${COL.taskId} = x.${COL.taskId} AND w.${COL.idx} = x.${COL.idx} RETURNING x.bytes),
gone_b AS (DELETE FROM ${bl} b USING sized_b x
            WHERE ${inBatch("b")} AND b.${COL.threadId} = x.${COL.threadId} AND b.${COL.checkpointNs} = x.${COL.checkpointNs} AND b.${COL.channel} = x.${COL.channel} AND b.${COL.version} = x.${COL.version}
           RETURNING x.bytes)`
  }
SELECT ARRAY(SELECT ${COL.threadId} FROM expired) AS expired,
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
   * limits, one statement) counts exactly what the real rounds delete. It
   * also returns, by rule, how many checkpoints the keep set kept (`kept`;
   * $11: the `olderThan` seconds, telling that rule from the grace period).
   */
  const round = (dry: boolean) => `/* langgraph-checkpoint-pg prune: round */
WITH RECURSIVE
th AS MATERIALIZED (SELECT x.${COL.threadId} FROM pg_catalog.unnest($1::text[]) AS x(${COL.threadId})),
lin AS MATERIALIZED (
  SELECT h.${COL.threadId}, h.${COL.checkpointNs}, h.${COL.checkpointId} AS head_id
    FROM ${batch(hd)} h JOIN th ON h.${COL.threadId} = th.${COL.threadId}
   WHERE $4::boolean
     AND ($2::text[] IS NULL OR EXISTS (SELECT 1 FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS l(t, n) WHERE l.t = h.${COL.threadId} AND l.n = h.${COL.checkpointNs}))
),
-- The keep set's seeds, each with the rule that keeps it (the summary counts them, first rule first):
-- ${KEPT.keepLast} the newest $5, ${KEPT.head} the head, ${KEPT.olderThan} younger than olderThan ($11), ${KEPT.grace} younger than the grace period
-- (the window $6 is the larger of the two) or the parent of one younger than it ($7).
base AS (
  SELECT l.${COL.threadId}, l.${COL.checkpointNs}, l.head_id AS ${COL.checkpointId}, ${KEPT.head} AS why FROM lin l
  UNION ALL
  SELECT n.${COL.threadId}, n.${COL.checkpointNs}, n.${COL.checkpointId}, ${KEPT.keepLast} FROM lin l CROSS JOIN LATERAL (
    SELECT c.${COL.threadId}, c.${COL.checkpointNs}, c.${COL.checkpointId} FROM ${batch(cp)} c
     WHERE c.${COL.threadId} = l.${COL.threadId} AND c.${COL.checkpointNs} = l.${COL.checkpointNs}
     ORDER BY c.${COL.checkpointId} DESC LIMIT $5::int) n
  UNION ALL
  SELECT c.${COL.threadId}, c.${COL.checkpointNs}, c.${COL.checkpointId},
         CASE WHEN c.${COL.createdAt} >= pg_catalog.now() - pg_catalog.make_interval(secs => $11::float8) THEN ${KEPT.olderThan} ELSE ${KEPT.grace} END
    FROM lin l JOIN ${batch(cp)} c ON c.${COL.threadId} = l.${COL.threadId} AND c.${COL.checkpointNs} = l.${COL.checkpointNs}
   WHERE c.${COL.createdAt} >= pg_catalog.now() - pg_catalog.make_interval(secs => $6::float8)
  UNION ALL
  SELECT c.${COL.threadId}, c.${COL.checkpointNs}, c.${COL.parentCheckpointId}, ${KEPT.grace} FROM lin l JOIN ${batch(cp)} c ON c.${COL.threadId} = l.${COL.threadId} AND c.${COL.checkpointNs} = l.${COL.checkpointNs}
   WHERE c.${COL.createdAt} >= pg_catalog.now() - pg_catalog.make_interval(secs => $7::float8) AND c.${COL.parentCheckpointId} IS NOT NULL
),
why AS MATERIALIZED (
  SELECT ${COL.threadId}, ${COL.checkpointNs}, ${COL.checkpointId}, pg_catalog.min(why) AS why FROM base GROUP BY 1, 2, 3
),
walk (${COL.threadId}, ${COL.checkpointNs}, ${COL.checkpointId}, parent_id, still) AS (
  SELECT c.${COL.threadId}, c.${COL.checkpointNs}, c.${COL.checkpointId}, c.${COL.parentCheckpointId}, ${needs("c")}
    FROM why k JOIN ${batch(cp)} c ON ${sameCheckpoint("c", "k")}
  UNION
  SELECT p.${COL.threadId}, p.${COL.checkpointNs}, p.${COL.checkpointId}, p.${COL.parentCheckpointId},
         ARRAY(SELECT x.ch FROM (SELECT pg_catalog.unnest(w.still) UNION SELECT pg_catalog.unnest(${needs("p")})) AS x(ch)
                WHERE NOT ${stores("p", "x.ch")} ORDER BY 1)
    FROM walk w JOIN ${batch(cp)} p ON p.${COL.threadId} = w.${COL.threadId} AND p.${COL.checkpointNs} = w.${COL.checkpointNs} AND p.${COL.checkpointId} = w.parent_id
   WHERE pg_catalog.cardinality(w.still) > 0
),
kept AS MATERIALIZED (SELECT DISTINCT ${COL.threadId}, ${COL.checkpointNs}, ${COL.checkpointId} FROM walk),
-- A walk that needed a parent and found none, or went around a cycle. A cycle has a step to a
-- parent with a greater id (LangGraph's ids grow with time): only from those, follow the parents,
-- bounded by the lineage's size, and see whether the start comes back.
suspect AS MATERIALIZED (
  SELECT DISTINCT w.${COL.threadId}, w.${COL.checkpointNs}, w.${COL.checkpointId}, w.parent_id FROM walk w
   WHERE pg_catalog.cardinality(w.still) > 0 AND w.parent_id >= w.${COL.checkpointId}
),
around (${COL.threadId}, ${COL.checkpointNs}, start_id, at_id, hops) AS (
  SELECT s.${COL.threadId}, s.${COL.checkpointNs}, s.${COL.checkpointId}, s.parent_id, 1 FROM suspect s
  UNION ALL
  SELECT a.${COL.threadId}, a.${COL.checkpointNs}, a.start_id, c.${COL.parentCheckpointId}, a.hops + 1
    FROM around a JOIN ${batch(cp)} c ON c.${COL.threadId} = a.${COL.threadId} AND c.${COL.checkpointNs} = a.${COL.checkpointNs} AND c.${COL.checkpointId} = a.at_id
   WHERE a.at_id <> a.start_id AND c.${COL.parentCheckpointId} IS NOT NULL
     AND a.hops <= (SELECT pg_catalog.count(*) FROM ${batch(cp)} x WHERE x.${COL.threadId} = a.${COL.threadId} AND x.${COL.checkpointNs} = a.${COL.checkpointNs})
),
broken AS MATERIALIZED (
  SELECT w.${COL.threadId}, w.${COL.checkpointNs}, w.${COL.checkpointId}, 'missing-parent' AS reason FROM walk w
   WHERE pg_catalog.cardinality(w.still) > 0 AND w.parent_id IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM ${batch(cp)} p WHERE p.${COL.threadId} = w.${COL.threadId} AND p.${COL.checkpointNs} = w.${COL.checkpointNs} AND p.${COL.checkpointId} = w.parent_id)
  UNION ALL
  SELECT a.${COL.threadId}, a.${COL.checkpointNs}, a.start_id, 'cycle' FROM around a
   WHERE a.at_id = a.start_id OR a.hops > (SELECT pg_catalog.count(*) FROM ${batch(cp)} x WHERE x.${COL.threadId} = a.${COL.threadId} AND x.${COL.checkpointNs} = a.${COL.checkpointNs})
   LIMIT 1
),
victims AS MATERIALIZED (
  SELECT v.${COL.threadId}, v.${COL.checkpointNs}, v.${COL.checkpointId}, v.bytes,
         pg_catalog.row_number() OVER (ORDER BY v.${COL.threadId}, v.${COL.checkpointNs}, v.${COL.checkpointId}) AS rn
    FROM lin l CROSS JOIN LATERAL (
      SELECT c.${COL.threadId}, c.${COL.checkpointNs}, c.${COL.checkpointId}, pg_catalog.pg_column_size(c.*) AS bytes FROM ${batch(cp)} c
       WHERE c.${COL.threadId} = l.${COL.threadId} AND c.${COL.checkpointNs} = l.${COL.checkpointNs} AND c.${COL.checkpointId} <> l.head_id
         AND NOT EXISTS (SELECT 1 FROM kept k WHERE ${sameCheckpoint("k", "c")})
       ORDER BY c.${COL.checkpointId}
       LIMIT $8::int + 1) v
),
todo AS MATERIALIZED (SELECT ${COL.threadId}, ${COL.checkpointNs}, ${COL.checkpointId}, bytes FROM victims WHERE $8::int IS NULL OR rn <= $8::int),
more AS MATERIALIZED (SELECT DISTINCT ${COL.threadId}, ${COL.checkpointNs} FROM victims WHERE rn > $8::int),
-- What the keep set kept, by rule (what no seed names, the delta walk kept): counted once per lineage,
-- in the round that finishes it (one with victims left over is in more, and comes back).
kept_by AS MATERIALIZED (
  SELECT pg_catalog.count(*) FILTER (WHERE w.why = ${KEPT.keepLast})::int AS keep_last, pg_catalog.count(*) FILTER (WHERE w.why = ${KEPT.head})::int AS head,
         pg_catalog.count(*) FILTER (WHERE w.why = ${KEPT.olderThan})::int AS older_than, pg_catalog.count(*) FILTER (WHERE w.why = ${KEPT.grace})::int AS grace,
         pg_catalog.count(*) FILTER (WHERE w.why IS NULL)::int AS delta
    FROM kept k LEFT JOIN why w ON ${sameCheckpoint("w", "k")}
   WHERE NOT EXISTS (SELECT 1 FROM more m WHERE m.${COL.threadId} = k.${COL.threadId} AND m.${COL.checkpointNs} = k.${COL.checkpointNs})
),
needed_writes AS MATERIALIZED (
  SELECT c.${COL.threadId}, c.${COL.checkpointNs}, c.${COL.parentCheckpointId} AS ${COL.checkpointId}
    FROM kept k JOIN ${batch(cp)} c ON ${sameCheckpoint("c", "k")} WHERE ${legacy("c")}
  UNION
  SELECT c.${COL.threadId}, c.${COL.checkpointNs}, c.${COL.parentCheckpointId}
    FROM th JOIN ${batch(cp)} c ON c.${COL.threadId} = th.${COL.threadId}
   WHERE $9::boolean AND ${legacy("c")} AND NOT EXISTS (SELECT 1 FROM todo t WHERE ${sameCheckpoint("t", "c")})
),
victim_writes AS MATERIALIZED (
  SELECT w.${COL.threadId}, w.${COL.checkpointNs}, w.${COL.checkpointId}, w.${COL.taskId}, w.${COL.idx}, pg_catalog.pg_column_size(w.*) AS bytes
    FROM todo t JOIN ${batch(wr)} w ON ${sameCheckpoint("w", "t")}
   WHERE NOT EXISTS (SELECT 1 FROM needed_writes n WHERE ${sameCheckpoint("n", "w")})
),
orphan_writes AS MATERIALIZED (
  SELECT w.${COL.threadId}, w.${COL.checkpointNs}, w.${COL.checkpointId}, w.${COL.taskId}, w.${COL.idx}, pg_catalog.pg_column_size(w.*) AS bytes
    FROM th JOIN ${batch(wr)} w ON w.${COL.threadId} = th.${COL.threadId}
   WHERE $9::boolean AND w.${COL.createdAt} < pg_catalog.now() - pg_catalog.make_interval(secs => $7::float8)
     AND NOT EXISTS (SELECT 1 FROM ${batch(cp)} c WHERE ${sameCheckpoint("c", "w")})
     AND NOT EXISTS (SELECT 1 FROM needed_writes n WHERE ${sameCheckpoint("n", "w")})
   LIMIT $10::int
),
refs AS MATERIALIZED (
  SELECT c.${COL.threadId}, c.${COL.checkpointNs}, v.key AS ${COL.channel}, v.value AS ${COL.version}
    FROM th JOIN ${batch(cp)} c ON c.${COL.threadId} = th.${COL.threadId}
   CROSS JOIN LATERAL pg_catalog.jsonb_each_text(CASE WHEN pg_catalog.jsonb_typeof(c.${COL.checkpoint} -> 'channel_versions') = 'object'
                                           THEN c.${COL.checkpoint} -> 'channel_versions' ELSE '{}'::jsonb END) AS v
   WHERE $9::boolean AND NOT EXISTS (SELECT 1 FROM todo t WHERE ${sameCheckpoint("t", "c")})
),
-- Element rows (saver/stored.ts) that the values remaining checkpoints name, and remaining writes, name: the elements
-- and chunks in their refs areas, then the chunks' elements.
elem1 AS MATERIALIZED (${elementRefs(`SELECT b.${COL.threadId}, b.${COL.checkpointNs}, ${refsAreaSql(`b.${COL.type}`, `b.${COL.value}`)} AS area FROM refs r JOIN ${batch(bl)} b
     ON b.${COL.threadId} = r.${COL.threadId} AND b.${COL.checkpointNs} = r.${COL.checkpointNs} AND b.${COL.channel} = r.${COL.channel} AND b.${COL.version} = r.${COL.version}
  UNION ALL
  SELECT w.${COL.threadId}, w.${COL.checkpointNs}, ${refsAreaSql(`w.${COL.type}`, `w.${COL.value}`)} FROM th JOIN ${batch(wr)} w ON w.${COL.threadId} = th.${COL.threadId}
   WHERE $9::boolean AND w.${COL.type} LIKE 'pg:%'
     AND NOT EXISTS (SELECT 1 FROM victim_writes v WHERE ${sameWrite("v", "w")})
     AND NOT EXISTS (SELECT 1 FROM orphan_writes o WHERE ${sameWrite("o", "w")})`)}),
elem2 AS MATERIALIZED (${elementRefs(`SELECT e.${COL.threadId}, e.${COL.checkpointNs}, e.${COL.value} AS area FROM elem1 x JOIN ${batch(bl)} e
     ON e.${COL.threadId} = x.${COL.threadId} AND e.${COL.checkpointNs} = x.${COL.checkpointNs} AND e.${COL.channel} = '${ELEMENTS_CHANNEL}' AND e.${COL.version} = x.h
  WHERE e.${COL.type} = '${REFS_TYPE}'`)}),
unreferenced AS MATERIALIZED (
  SELECT b.${COL.threadId}, b.${COL.checkpointNs}, b.${COL.channel}, b.${COL.version}, b.${COL.rowVersion}, pg_catalog.pg_column_size(b.*) AS bytes
    FROM th JOIN ${batch(bl)} b ON b.${COL.threadId} = th.${COL.threadId}
   WHERE $9::boolean
     AND NOT EXISTS (SELECT 1 FROM refs r WHERE r.${COL.threadId} = b.${COL.threadId} AND r.${COL.checkpointNs} = b.${COL.checkpointNs}
                                            AND r.${COL.channel} = b.${COL.channel} AND r.${COL.version} = b.${COL.version})
     AND NOT (b.${COL.channel} = '${ELEMENTS_CHANNEL}'
              AND (EXISTS (SELECT 1 FROM elem1 x WHERE x.${COL.threadId} = b.${COL.threadId} AND x.${COL.checkpointNs} = b.${COL.checkpointNs} AND x.h = b.${COL.version})
                   OR EXISTS (SELECT 1 FROM elem2 x WHERE x.${COL.threadId} = b.${COL.threadId} AND x.${COL.checkpointNs} = b.${COL.checkpointNs} AND x.h = b.${COL.version})))
   LIMIT $10::int
), ${
    dry
      ? `gone_c AS (SELECT ${COL.threadId}, bytes FROM todo),
gone_w AS (SELECT ${COL.threadId}, bytes FROM victim_writes UNION ALL SELECT ${COL.threadId}, bytes FROM orphan_writes),
gone_b AS (SELECT ${COL.threadId}, bytes FROM unreferenced)`
      : `gone_c AS (DELETE FROM ${cp} c USING todo t WHERE ${inBatch("c")} AND ${sameCheckpoint("c", "t")}
                AND NOT EXISTS (SELECT 1 FROM ${batch(hd)} h WHERE ${sameCheckpoint("h", "c")}) RETURNING t.bytes),
gone_w AS (DELETE FROM ${wr} w USING (SELECT * FROM victim_writes UNION ALL SELECT * FROM orphan_writes) g
            WHERE ${inBatch("w")} AND ${sameCheckpoint("w", "g")} AND w.${COL.taskId} = g.${COL.taskId} AND w.${COL.idx} = g.${COL.idx} RETURNING g.bytes),
-- A put that relies on a value this snapshot finds unreferenced (an element it sent again, a value a
-- checkpoint with an unknown parent names) touches its row (saver/sql/put.ts): locked here only if
-- unchanged since the snapshot (a changed row fails the row_version test when re-read), and never
-- waited for (a put holding it is relying on it); a put that comes later waits, then stores it anew.
doomed AS MATERIALIZED (
  SELECT b.${COL.threadId}, b.${COL.checkpointNs}, b.${COL.channel}, b.${COL.version}, u.bytes
    FROM unreferenced u JOIN ${batch(bl)} b
      ON b.${COL.threadId} = u.${COL.threadId} AND b.${COL.checkpointNs} = u.${COL.checkpointNs} AND b.${COL.channel} = u.${COL.channel} AND b.${COL.version} = u.${COL.version}
     AND b.${COL.rowVersion} = u.${COL.rowVersion}
     FOR UPDATE OF b SKIP LOCKED
),
gone_b AS (DELETE FROM ${bl} b USING doomed d
            WHERE ${inBatch("b")} AND b.${COL.threadId} = d.${COL.threadId} AND b.${COL.checkpointNs} = d.${COL.checkpointNs} AND b.${COL.channel} = d.${COL.channel} AND b.${COL.version} = d.${COL.version}
           RETURNING d.bytes)`
  }
SELECT (SELECT pg_catalog.count(*) FROM gone_c)::int AS checkpoints, (SELECT coalesce(pg_catalog.sum(bytes), 0) FROM gone_c)::bigint AS checkpoint_bytes,
       (SELECT pg_catalog.count(*) FROM gone_w)::int AS writes, (SELECT coalesce(pg_catalog.sum(bytes), 0) FROM gone_w)::bigint AS write_bytes,
       (SELECT pg_catalog.count(*) FROM gone_b)::int AS blobs, (SELECT coalesce(pg_catalog.sum(bytes), 0) FROM gone_b)::bigint AS blob_bytes,
       ARRAY(SELECT ${COL.threadId} FROM more) AS more_threads, ARRAY(SELECT ${COL.checkpointNs} FROM more) AS more_ns,
       ($10::int IS NOT NULL AND ((SELECT pg_catalog.count(*) FROM orphan_writes) >= $10::int OR (SELECT pg_catalog.count(*) FROM unreferenced) >= $10::int)) AS more_garbage,
       (SELECT pg_catalog.row_to_json(k) FROM kept_by k) AS kept,
       (SELECT pg_catalog.row_to_json(b) FROM (SELECT ${COL.threadId} AS thread_id, ${COL.checkpointNs} AS checkpoint_ns, ${COL.checkpointId} AS checkpoint_id, reason FROM broken LIMIT 1) b) AS broken${dry ? perThread : ""}`;

  /**
   * Tombstones older than $1 seconds (among threads $2; NULL: all), at most $3
   * of them: deleted (the dry variant counts them all). A write that reads one
   * meanwhile is refused or not, either is right for a tombstone that old.
   */
  const tombstones = (dry: boolean) => {
    const old = `${CHECKPOINT_TOMBSTONES.deletedAt} < pg_catalog.now() - pg_catalog.make_interval(secs => $1::float8)
     AND ($2::text[] IS NULL OR ${CHECKPOINT_TOMBSTONES.threadId} = ANY ($2::text[]))`;
    return dry
      ? `/* langgraph-checkpoint-pg prune: tombstones */
SELECT pg_catalog.count(*)::int AS n FROM ${tb} WHERE ${old}`
      : `/* langgraph-checkpoint-pg prune: tombstones */
WITH gone AS (
  DELETE FROM ${tb} WHERE ${CHECKPOINT_TOMBSTONES.threadId} IN (SELECT ${CHECKPOINT_TOMBSTONES.threadId} FROM ${tb} WHERE ${old} LIMIT $3::int)
  RETURNING 1
)
SELECT pg_catalog.count(*)::int AS n FROM gone`;
  };

  return { threadPage, threadPageDistributed, distributed, checkpoints: cp, claim, idleThreads, lockForExpiry, expire, round, tombstones };
}

export type Sql = ReturnType<typeof buildSql>;

export interface RoundRow {
  /** Set when a keep-set walk met broken parent links (see `broken` in the round statement). */
  broken?: { thread_id: string; checkpoint_ns: string; checkpoint_id: string; reason: "cycle" | "missing-parent" } | null;
  checkpoints: number;
  checkpoint_bytes: string | number;
  writes: number;
  write_bytes: string | number;
  blobs: number;
  blob_bytes: string | number;
  /** The round statement: what its keep set kept, by rule, in the lineages it finished. */
  kept?: { keep_last: number; head: number; older_than: number; grace: number; delta: number } | string;
}
