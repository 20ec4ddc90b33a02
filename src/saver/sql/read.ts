/**
 * The read statements: `getHead`, `getById` and a `list` page each return, in
 * ONE statement, checkpoints with their blobs, pending writes and the element
 * rows their values name (`UNION ALL`, one row shape, no bytea aggregated into
 * arrays; read.ts puts the rows back together); `deltaHistory` walks a
 * checkpoint's parent chain once for all delta channels asked for.
 */
import { hashesSql, refsAreaSql } from "../stored.js";
import type { Place } from "./place.js";

/** The conditions of one `list` page. */
export interface ListWhere {
  threadId?: string;
  checkpointNs?: string;
  checkpointId?: string;
  before?: string;
  /** The last (checkpoint id, thread, namespace) of the previous page. */
  cursor?: [string, string, string];
  filter?: { json: unknown; keys: string[]; values: string[] };
  limit: number;
}

/**
 * Read rows share one shape so a single statement can return a checkpoint with
 * its blobs and writes (`UNION ALL`), without aggregating bytea into arrays.
 * Each kind fills the columns it has, the others are NULL:
 *   checkpoint: parent_id, checkpoint, metadata, metadata_raw, state_version,
 *               type and value (its values without a version: unversioned_type, unversioned_values)
 *   blob:       channel, version, type, value
 *   write:      task_id, task_path, idx, channel, type, value
 *   send:       a parent's pending send (checkpoints before format v4), as a write
 *   element:    an element row a value names (stored.ts), once per lineage and read:
 *               version (its hash), type, value; checkpoint_id empty
 */
export interface ReadRow {
  kind: "checkpoint" | "blob" | "write" | "send" | "element";
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_id: string | null;
  channel: string | null;
  version: string | null;
  task_id: string | null;
  task_path: string | null;
  idx: number | null;
  type: string | null;
  value: Buffer | null;
  metadata_raw: Buffer | null;
  state_version: number | null;
  checkpoint: unknown;
  metadata: unknown;
}

/** The columns of a checkpoint row a read returns. */
const CHECKPOINT_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, metadata_raw, state_version, unversioned_type, unversioned_values";

/**
 * The element rows named by the values of `source` (a query with `thread_id`, `checkpoint_ns`,
 * `type` and `value` columns), each once (stored.ts): `except`, a CTE of those already fetched
 * (the chunks' level). `thread`: the parameter naming the one thread read.
 */
const elementRows = (p: Place, source: string, except: string | undefined, thread: string) => `
  SELECT r.thread_id, r.checkpoint_ns, r.h, e.type AS type, e.value AS value
    FROM (SELECT DISTINCT x.thread_id, x.checkpoint_ns, i.h
            FROM (SELECT y.thread_id, y.checkpoint_ns, ${refsAreaSql("y.type", "y.value")} AS area FROM ${source} y) x
           ${hashesSql("x.area", "i")}) r
   CROSS JOIN LATERAL (SELECT e.type, e.value FROM ${p.s}.checkpoint_blobs e
                        WHERE e.thread_id = ${thread} AND e.checkpoint_ns = r.checkpoint_ns
                          AND e.channel = '__elements__' AND e.version = r.h
                       OFFSET 0) e${
  except
    ? `
   WHERE NOT EXISTS (SELECT 1 FROM ${except} y WHERE y.thread_id = r.thread_id AND y.checkpoint_ns = r.checkpoint_ns AND y.h = r.h)`
    : ""
}`;

/**
 * The one-statement read around `page`, a query of one thread's checkpoint rows. `t`: the parameter
 * naming the thread: each table is looked up by it rather than by the page's column, so on tables
 * partitioned by thread (issue 32) the planner prunes them all to the thread's partition when it
 * plans, as Citus routes a statement whose every table names the key.
 */
const readAround = (p: Place, page: string, t: string) => {
  return `
WITH page AS MATERIALIZED (${page}),
bl AS MATERIALIZED (
  SELECT p.thread_id AS thread_id, p.checkpoint_ns AS checkpoint_ns, p.checkpoint_id AS checkpoint_id, b.channel AS channel, cv.version,
         b.type AS type, b.value AS value
    FROM page p
   -- A row whose channel_versions is not an object (written with SQL) names no blob: never an error for the whole page.
   CROSS JOIN LATERAL pg_catalog.jsonb_each_text(CASE WHEN pg_catalog.jsonb_typeof(p.checkpoint -> 'channel_versions') = 'object'
                                                      THEN p.checkpoint -> 'channel_versions' ELSE '{}'::jsonb END) AS cv(channel, version)
   -- A lateral lookup per (channel, version): the planner would otherwise hash
   -- all of a long thread's blobs to find the few a page needs.
   CROSS JOIN LATERAL (SELECT b.channel, b.type, b.value FROM ${p.s}.checkpoint_blobs b
                        WHERE b.thread_id = ${t} AND b.checkpoint_ns = p.checkpoint_ns
                          AND b.channel = cv.channel AND b.version = cv.version AND b.type <> 'empty'
                       OFFSET 0) b
),
wr AS MATERIALIZED (
  SELECT p.thread_id AS thread_id, p.checkpoint_ns AS checkpoint_ns, p.checkpoint_id AS checkpoint_id, w.task_id AS task_id,
         w.channel AS channel, w.type AS type, w.task_path AS task_path, w.idx AS idx, w.value AS value
    FROM page p
    JOIN ${p.s}.checkpoint_writes w ON w.thread_id = ${t} AND w.checkpoint_ns = p.checkpoint_ns AND w.checkpoint_id = p.checkpoint_id
),
-- Values stored by content (stored.ts): the element and chunk rows they name, then the chunks' elements.
e1 AS MATERIALIZED (${elementRows(p, "(SELECT thread_id, checkpoint_ns, type, value FROM bl UNION ALL SELECT thread_id, checkpoint_ns, type, value FROM wr)", undefined, t)}
),
e2 AS MATERIALIZED (${elementRows(p, "e1", "e1", t)}
)
SELECT 'checkpoint' AS kind, p.thread_id, p.checkpoint_ns, p.checkpoint_id, p.parent_checkpoint_id AS parent_id,
       NULL::text AS channel, NULL::text AS version, NULL::text AS task_id, NULL::text AS task_path, NULL::int AS idx,
       p.unversioned_type AS type, p.unversioned_values AS value, p.metadata_raw, p.state_version, p.checkpoint, p.metadata
  FROM page p
UNION ALL
SELECT 'blob', bl.thread_id, bl.checkpoint_ns, bl.checkpoint_id, NULL, bl.channel, bl.version, NULL, NULL, NULL, bl.type, bl.value, NULL, NULL, NULL, NULL FROM bl
UNION ALL
SELECT 'element', e.thread_id, e.checkpoint_ns, '', NULL, NULL, e.h, NULL, NULL, NULL, e.type, e.value, NULL, NULL, NULL, NULL FROM e1 e
UNION ALL
SELECT 'element', e.thread_id, e.checkpoint_ns, '', NULL, NULL, e.h, NULL, NULL, NULL, e.type, e.value, NULL, NULL, NULL, NULL FROM e2 e
UNION ALL
SELECT 'write', w.thread_id, w.checkpoint_ns, w.checkpoint_id, NULL, w.channel, NULL, w.task_id, w.task_path, w.idx, w.type, w.value, NULL, NULL, NULL, NULL FROM wr w
UNION ALL
-- Checkpoints before format v4 kept pending sends as writes of their parent.
SELECT 'send', p.thread_id, p.checkpoint_ns, p.checkpoint_id, NULL, w.channel, NULL, w.task_id, w.task_path, w.idx, w.type, w.value, NULL, NULL, NULL, NULL
  FROM page p
  JOIN ${p.s}.checkpoint_writes w ON w.thread_id = ${t} AND w.checkpoint_ns = p.checkpoint_ns
                  AND w.checkpoint_id = p.parent_checkpoint_id AND w.channel = '__pregel_tasks'
 WHERE (p.checkpoint ->> 'v')::int < 4`;
};

/** $1 thread, $2 namespace, $3 checkpoint id. */
export const getById = (p: Place) =>
  readAround(p, `SELECT ${CHECKPOINT_COLUMNS} FROM ${p.s}.checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3`, "$1");

/** $1 thread, $2 namespace: the lineage head (two primary-key lookups, O(log n) at any history length). */
export const getHead = (p: Place) =>
  readAround(
    p,
    `SELECT ${CHECKPOINT_COLUMNS} FROM ${p.s}.checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = (SELECT checkpoint_id FROM ${p.s}.checkpoint_heads WHERE thread_id = $1 AND checkpoint_ns = $2)`,
    "$1",
  );

/**
 * One page of `list`, newest first, keyset-paginated. Built from the conditions actually present,
 * so each variant is a plain index-friendly statement (an `($n IS NULL OR col = $n)` form would give
 * prepared statements a generic plan that scans the whole table). With a thread: the page read
 * whole, in one statement. Without one: the page's keys only ({@link listOfThread} then reads each
 * thread's), so that every statement that reads values stays within one thread (on Citus, one node).
 */
export function listPage(p: Place, where: ListWhere): { text: string; values: unknown[] } {
  const values: unknown[] = [];
  const param = (v: unknown) => `$${values.push(v)}`;
  const conds: string[] = [];
  const thread = where.threadId === undefined ? undefined : param(where.threadId);
  if (thread !== undefined) conds.push(`thread_id = ${thread}`);
  if (where.checkpointNs !== undefined) conds.push(`checkpoint_ns = ${param(where.checkpointNs)}`);
  if (where.checkpointId !== undefined) conds.push(`checkpoint_id = ${param(where.checkpointId)}`);
  // Within one lineage the checkpoint id alone orders and bounds the page (an index range).
  const oneLineage = where.threadId !== undefined && where.checkpointNs !== undefined;
  const upper = [where.before, where.cursor?.[0]].filter((x): x is string => x !== undefined).sort()[0];
  if (oneLineage) {
    if (upper !== undefined) conds.push(`checkpoint_id < ${param(upper)}`);
  } else {
    if (where.before !== undefined) conds.push(`checkpoint_id < ${param(where.before)}`);
    if (where.cursor) conds.push(`(checkpoint_id, thread_id, checkpoint_ns) < (${param(where.cursor[0])}, ${param(where.cursor[1])}, ${param(where.cursor[2])})`);
  }
  if (where.filter) {
    // Containment finds the candidates through the metadata index; each key then compares exactly.
    const keys = param(where.filter.keys);
    const vals = param(where.filter.values);
    conds.push(
      `metadata @> ${param(where.filter.json)}::jsonb AND NOT EXISTS (SELECT 1 FROM ROWS FROM (pg_catalog.unnest(${keys}::text[]), pg_catalog.unnest(${vals}::jsonb[])) f(k, val) WHERE metadata -> f.k IS DISTINCT FROM f.val)`,
    );
  }
  const order = oneLineage ? "checkpoint_id DESC" : "checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC";
  const columns = thread === undefined ? "thread_id, checkpoint_ns, checkpoint_id" : CHECKPOINT_COLUMNS;
  const page = `SELECT ${columns} FROM ${p.s}.checkpoints${conds.length ? ` WHERE ${conds.join(" AND ")}` : ""} ORDER BY ${order} LIMIT ${param(where.limit)}`;
  return { text: thread === undefined ? page : readAround(p, page, thread), values };
}

/** A key of a `list` page without a thread. */
export interface ListKey {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
}

/** `list` without a thread, each thread of a page ({@link listPage}'s keys): its checkpoints read whole. $1 thread, $2 namespaces, $3 ids. */
export const listOfThread = (p: Place) =>
  readAround(
    p,
    `SELECT ${CHECKPOINT_COLUMNS} FROM ${p.s}.checkpoints
      WHERE thread_id = $1 AND (checkpoint_ns, checkpoint_id) IN (SELECT k.ns, k.id FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS k(ns, id))`,
    "$1",
  );

/** A row of {@link deltaHistory}. */
export interface DeltaRow {
  kind: "stopped" | "seed" | "write" | "element";
  depth: number;
  checkpoint_id: string;
  channel: string;
  version: string | null;
  task_id: string | null;
  task_path: string | null;
  idx: number | null;
  type: string;
  value: Buffer | null;
}

/**
 * Delta-channel history: walk the parent chain of a checkpoint once, for all requested channels;
 * each channel stops at the nearest ancestor holding a non-empty blob for it (its seed). Returns per
 * ancestor (depth 0 = parent of the target) the seed blobs (`seed`) and the writes (`write`) of
 * still-walking channels, and the element rows their values name (`element`, the hash as `version`). The walk is bounded: a step to a parent with
 * a greater id (never the case for LangGraph's time-ordered ids, so never paid for) is taken only
 * while the walk is shorter than the lineage has checkpoints, so a cycle ends it. A `stopped` row says
 * why a walk that still needed parents stopped (`type`: cycle or missing-parent) at `checkpoint_id`.
 * $1 thread, $2 ns, $3 target id|null (null: the head), $4 channels text[], $5 and $6 the channels
 * and versions of seeds the saver kept (elements.ts `ElementMemory`): their rows come, not the
 * element rows they name.
 */
export const deltaHistory = (p: Place) => `
WITH RECURSIVE target AS (
  SELECT checkpoint_id, parent_checkpoint_id FROM ${p.s}.checkpoints
   WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = coalesce($3::text, (SELECT checkpoint_id FROM ${p.s}.checkpoint_heads WHERE thread_id = $1 AND checkpoint_ns = $2))
), chain AS (
  -- Per ancestor, the channels still walking: those without a seed here.
  SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, 0 AS depth, $4::text[] AS walking,
         ARRAY(SELECT ch FROM pg_catalog.unnest($4::text[]) ch
                WHERE NOT EXISTS (SELECT 1 FROM ${p.s}.checkpoint_blobs b WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = ch
                                    AND b.version = c.checkpoint -> 'channel_versions' ->> ch AND b.type <> 'empty')) AS still
    FROM ${p.s}.checkpoints c, target t
   WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = t.parent_checkpoint_id
  UNION ALL
  SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, chain.depth + 1, chain.still,
         ARRAY(SELECT ch FROM pg_catalog.unnest(chain.still) ch
                WHERE NOT EXISTS (SELECT 1 FROM ${p.s}.checkpoint_blobs b WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = ch
                                    AND b.version = c.checkpoint -> 'channel_versions' ->> ch AND b.type <> 'empty'))
    FROM chain JOIN ${p.s}.checkpoints c
      ON c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = chain.parent_checkpoint_id
   WHERE pg_catalog.cardinality(chain.still) > 0
     AND (c.checkpoint_id < chain.checkpoint_id
          OR chain.depth < (SELECT pg_catalog.count(*) FROM ${p.s}.checkpoints x WHERE x.thread_id = $1 AND x.checkpoint_ns = $2))
), stopped AS (
  -- Where a walk that still needed parents ended.
  SELECT chain.checkpoint_id, chain.parent_checkpoint_id FROM chain
   WHERE pg_catalog.cardinality(chain.still) > 0 AND chain.parent_checkpoint_id IS NOT NULL
     AND chain.depth = (SELECT pg_catalog.max(depth) FROM chain)
  UNION ALL
  SELECT t.checkpoint_id, t.parent_checkpoint_id FROM target t
   WHERE t.parent_checkpoint_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM chain)
), seeds AS MATERIALIZED (
  -- Each channel's seed: its blob at the ancestor where its walk ended. Looked up per channel (LIMIT 1:
  -- one row by the key, and a subquery the planner keeps apart); joined, it was planned as a scan of all
  -- the thread's blobs, a cost that grew with the thread.
  SELECT $1::text AS thread_id, $2::text AS checkpoint_ns, chain.depth, chain.checkpoint_id AS checkpoint_id, b.channel AS channel,
         b.version AS version, b.type AS type, b.value AS value
    FROM chain CROSS JOIN LATERAL pg_catalog.unnest(chain.walking) AS ch(name)
    CROSS JOIN LATERAL (SELECT * FROM ${p.s}.checkpoint_blobs b
                         WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = ch.name
                           AND b.version = chain.checkpoint -> 'channel_versions' ->> ch.name LIMIT 1) b
   WHERE NOT (ch.name = ANY (chain.still))
), dw AS MATERIALIZED (
  -- The walking channels' writes, looked up per ancestor (OFFSET 0 keeps the subquery apart, so it stays
  -- a lookup by the key and never becomes a scan of all the thread's writes).
  SELECT $1::text AS thread_id, $2::text AS checkpoint_ns, chain.depth, chain.checkpoint_id AS checkpoint_id, w.channel AS channel,
         w.task_id AS task_id, w.task_path AS task_path, w.idx AS idx, w.type AS type, w.value AS value
    FROM chain CROSS JOIN LATERAL (
           SELECT * FROM ${p.s}.checkpoint_writes w
            WHERE w.thread_id = $1 AND w.checkpoint_ns = $2 AND w.checkpoint_id = chain.checkpoint_id AND w.channel = ANY (chain.walking)
           OFFSET 0) w
), kept AS (
  -- The seeds whose element rows the saver has already.
  SELECT k.channel, k.version FROM ROWS FROM (pg_catalog.unnest($5::text[]), pg_catalog.unnest($6::text[])) AS k(channel, version)
), e1 AS MATERIALIZED (${elementRows(
    p,
    `(SELECT thread_id, checkpoint_ns, type, value FROM seeds s WHERE NOT EXISTS (SELECT 1 FROM kept k WHERE k.channel = s.channel AND k.version = s.version)
      UNION ALL SELECT thread_id, checkpoint_ns, type, value FROM dw)`,
    undefined,
    "$1",
  )}
), e2 AS MATERIALIZED (${elementRows(p, "e1", "e1", "$1")}
)
SELECT 'stopped' AS kind, NULL::int AS depth, s.checkpoint_id, NULL::text AS channel, NULL::text AS version, NULL::text AS task_id,
       NULL::text AS task_path, NULL::int AS idx,
       CASE WHEN EXISTS (SELECT 1 FROM ${p.s}.checkpoints p WHERE p.thread_id = $1 AND p.checkpoint_ns = $2 AND p.checkpoint_id = s.parent_checkpoint_id)
            THEN 'cycle' ELSE 'missing-parent' END AS type, NULL::bytea AS value
  FROM stopped s
UNION ALL
SELECT 'seed', depth, checkpoint_id, channel, version, NULL, NULL, NULL, type, value FROM seeds
UNION ALL
SELECT 'element', NULL, '', NULL, h, NULL, NULL, NULL, type, value FROM e1
UNION ALL
SELECT 'element', NULL, '', NULL, h, NULL, NULL, NULL, type, value FROM e2
UNION ALL
SELECT 'write', depth, checkpoint_id, channel, NULL, task_id, task_path, idx, type, value FROM dw`;
