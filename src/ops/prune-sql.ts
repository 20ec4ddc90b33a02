/**
 * The statements of `prune` (prune.ts runs them): the dry-run count, the
 * delete round under the lineages' head locks, idle-thread expiry, and blob
 * and orphan-write collection, each one statement. Built per schema.
 */
import { quoteIdent } from "../validate.js";
import { CHECKPOINT_BLOBS, CHECKPOINT_HEADS, CHECKPOINT_WRITES, CHECKPOINTS } from "../db/names.js";

/** One lineage: a thread and a namespace. */
export interface Lineage {
  thread: string;
  ns: string;
}

export function buildSql(schema: string) {
  const s = quoteIdent(schema);
  const cp = `${s}.${CHECKPOINTS.table}`;
  const wr = `${s}.${CHECKPOINT_WRITES.table}`;
  const bl = `${s}.${CHECKPOINT_BLOBS.table}`;
  const hd = `${s}.${CHECKPOINT_HEADS.table}`;

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
}
