/**
 * Every SQL statement the saver runs, built once per schema. Each saver
 * operation is ONE statement (one round trip, one commit in autocommit):
 * blobs, checkpoint row and head move in `put`; checkpoint, blobs and
 * pending writes in each read.
 *
 * Every function is called as `pg_catalog.<name>`: these statements resolve
 * names through the caller's search_path, where a role that may create
 * objects could plant a closer overload (e.g. `unnest(text[])`) that would
 * otherwise win. Several arrays are unnested with `ROWS FROM (...)`, the form
 * multi-argument `unnest` stands for, which only exists unqualified.
 *
 * Tables and columns are named through db/names.ts (checked against the
 * drizzle definitions when the package compiles), once, when the statements
 * are built: the texts are the same as if written out. A column the code
 * reads from a result keeps the name the code reads (see `out`).
 */
import { CHECKPOINT_BLOBS as B, CHECKPOINT_HEADS as H, CHECKPOINT_WRITES as W, CHECKPOINTS as C } from "../db/names.js";
import { quoteIdent } from "../validate.js";
import { knowsElementsSql } from "./element-codec.js";
import { ELEMENTS_CHANNEL, REFS_TYPE } from "./elements.js";
import { hashesSql, refsAreaSql } from "./stored.js";
import { gateCall, lockForDelete, putGateCall, upsertTombstones } from "./tombstones.js";

export type Queries = ReturnType<typeof buildQueries>;

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
 *   kind 0 checkpoint: s1 parent id, s3 unversioned_type, n state_version, v metadata_raw, uv unversioned_values,
 *                      cp checkpoint, md metadata
 *   kind 1 blob:       s1 channel, s2 version, s3 type, v value
 *   kind 2 write:      s1 task id, s2 channel, s3 type, s4 task path, n idx, v value
 *   kind 3 parent's pending sends (checkpoints with v < 4 only), same as kind 2
 *   kind 4 element row of a list channel (elements.ts), once per lineage and read:
 *                      s1 hash, s3 type, v value (checkpoint_id empty)
 */
export interface ReadRow {
  kind: 0 | 1 | 2 | 3 | 4;
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  s1: string | null;
  s2: string | null;
  s3: string | null;
  s4: string | null;
  n: number | null;
  v: Buffer | null;
  uv: Buffer | null;
  cp: unknown;
  md: unknown;
}

/**
 * Column `column` (with its table alias `alias`), in a result under `name`,
 * the name the code reads: written as it is while the column is so called,
 * `AS name` after a rename.
 */
function out(alias: string, column: string, name: string): string {
  return column === name ? `${alias}${column}` : `${alias}${column} AS ${name}`;
}

export function buildQueries(schema: string) {
  const s = quoteIdent(schema);
  const checkpoints = `${s}.${C.table}`;
  const writes = `${s}.${W.table}`;
  const blobs = `${s}.${B.table}`;
  const heads = `${s}.${H.table}`;
  /** The head's checkpoint id of lineage ($1, $2). */
  const headOf = `(SELECT ${H.checkpointId} FROM ${heads} WHERE ${H.threadId} = $1 AND ${H.checkpointNs} = $2)`;

  /** A pending write's columns as the read rows carry them (s1 task id, s2 channel, s3 type, s4 task path, n idx, v value). */
  const writeCols = `w.${W.taskId}, w.${W.channel}, w.${W.type}, w.${W.taskPath}, w.${W.idx}, w.${W.value}`;
  const blobCols = [B.threadId, B.checkpointNs, B.channel, B.version, B.type, B.value].join(", ");
  const blobKey = [B.threadId, B.checkpointNs, B.channel, B.version].join(", ");
  const writeInsertCols = [W.threadId, W.checkpointNs, W.checkpointId, W.taskId, W.taskPath, W.idx, W.channel, W.type, W.value].join(", ");
  /**
   * The element rows a putWrites statement's values name (stored.ts), in the given (key) order, after
   * the gate: $12 hashes, $13 types, $14 offsets and $15 lengths into $11. One already stored is
   * touched, as a put does (see `new_blobs` in the put statement).
   */
  const writeElements = `elements AS (
  INSERT INTO ${blobs} AS b (${blobCols})
  SELECT $1, $2, '${ELEMENTS_CHANNEL}', e.hash, e.type, pg_catalog.substring($11::bytea, e.off + 1, e.len)
    FROM ROWS FROM (pg_catalog.unnest($12::text[]), pg_catalog.unnest($13::text[]), pg_catalog.unnest($14::int[]), pg_catalog.unnest($15::int[])) AS e(hash, type, off, len)
   WHERE (SELECT refused FROM gate) IS NULL
  ON CONFLICT (${blobKey}) DO UPDATE SET ${B.rowVersion} = b.${B.rowVersion} + 1
)`;

  /** Ordinary writes (idx >= 0) are kept (first one wins); special ones replace the stored one. */
  const writeConflict = `ON CONFLICT (${W.threadId}, ${W.checkpointNs}, ${W.checkpointId}, ${W.taskId}, ${W.idx}) DO UPDATE
   SET ${W.channel} = EXCLUDED.${W.channel}, ${W.type} = EXCLUDED.${W.type}, ${W.value} = EXCLUDED.${W.value},
       ${W.taskPath} = EXCLUDED.${W.taskPath}, ${W.rowVersion} = w.${W.rowVersion} + 1
 WHERE EXCLUDED.${W.idx} < 0`;

  /**
   * Insert the rows of several putWrites calls of thread $1, namespace $2: their keys, channels and
   * types in eight arrays from `$first` on, their values in the bytea `$bytes`, unless `refused`.
   */
  const insertWriteRows = (first: number, bytes: number, refused: string) => {
    const p = (k: number, type: string) => `pg_catalog.unnest($${first + k}::${type}[])`;
    return `INSERT INTO ${writes} AS w (${writeInsertCols})
SELECT $1, $2, x.checkpoint_id, x.task_id, x.task_path, x.idx, x.channel, x.type, v.value
  FROM ROWS FROM (${p(0, "text")}, ${p(1, "text")}, ${p(2, "text")},
                  ${p(3, "int")}, ${p(4, "text")}, ${p(5, "text")},
                  ${p(6, "int")}, ${p(7, "int")}) AS x(checkpoint_id, task_id, task_path, idx, channel, type, off, len)
  CROSS JOIN LATERAL (SELECT CASE WHEN x.len < 0 THEN NULL ELSE pg_catalog.substring($${bytes}::bytea, x.off + 1, x.len) END AS value) AS v
 WHERE (SELECT ${refused} FROM gate) IS NULL
${writeConflict}`;
  };

  /**
   * Element rows named by the refs values of `source` (a CTE with thread, namespace, type and value
   * columns `thread_id`, `checkpoint_ns`, `type`, `value`), each once; see elements.ts.
   * `except`: a CTE of element rows already fetched (the chunks' own level). `thread`: see `read`.
   */
  const elementsOf = (source: string, except?: string, thread = "r.thread_id") => `
  SELECT r.thread_id, r.checkpoint_ns, r.h, e.${B.type} AS type, e.${B.value} AS value
    FROM (SELECT DISTINCT x.thread_id, x.checkpoint_ns, i.h
            FROM (SELECT y.thread_id, y.checkpoint_ns, ${refsAreaSql("y.type", "y.value")} AS area FROM ${source} y) x
           ${hashesSql("x.area", "i")}) r
   CROSS JOIN LATERAL (SELECT e.${B.type}, e.${B.value} FROM ${blobs} e
                        WHERE e.${B.threadId} = ${thread} AND e.${B.checkpointNs} = r.checkpoint_ns
                          AND e.${B.channel} = '${ELEMENTS_CHANNEL}' AND e.${B.version} = r.h
                       OFFSET 0) e${except ? `
   WHERE NOT EXISTS (SELECT 1 FROM ${except} y WHERE y.thread_id = r.thread_id AND y.checkpoint_ns = r.checkpoint_ns AND y.h = r.h)` : ""}`;

  /** The hashes (hex, as `h`) the refs areas of `source` (a query with a `value` column: refs areas, or NULL) name, each once. */
  const elementsNamed = (source: string) => `
  SELECT DISTINCT i.h FROM (${source}) x ${hashesSql("x.value", "i")}`;

  /**
   * Wrap a page of checkpoint rows into the one-statement read. `thread`: the parameter naming the
   * page's one thread, when it has one: each table is then looked up by it rather than by the page's
   * column, so on tables partitioned by thread (issue 32) the planner prunes them all to the thread's
   * partition when it plans, as Citus routes a statement whose every table names the key.
   */
  const read = (page: string, thread?: string) => `
WITH page AS MATERIALIZED (${page}),
bl AS MATERIALIZED (
  SELECT p.${C.threadId} AS thread_id, p.${C.checkpointNs} AS checkpoint_ns, p.${C.checkpointId} AS checkpoint_id, b.${B.channel} AS channel, cv.version,
         b.${B.type} AS type, b.${B.value} AS value
    FROM page p
   -- A row whose channel_versions is not an object (written with SQL) names no blob: never an error for the whole page.
   CROSS JOIN LATERAL pg_catalog.jsonb_each_text(CASE WHEN pg_catalog.jsonb_typeof(p.${C.checkpoint} -> 'channel_versions') = 'object'
                                                      THEN p.${C.checkpoint} -> 'channel_versions' ELSE '{}'::jsonb END) AS cv(channel, version)
   -- A lateral lookup per (channel, version): the planner would otherwise hash
   -- all of a long thread's blobs to find the few a page needs.
   CROSS JOIN LATERAL (SELECT b.${B.channel}, b.${B.type}, b.${B.value} FROM ${blobs} b
                        WHERE b.${B.threadId} = ${thread ?? `p.${C.threadId}`} AND b.${B.checkpointNs} = p.${C.checkpointNs}
                          AND b.${B.channel} = cv.channel AND b.${B.version} = cv.version AND b.${B.type} <> 'empty'
                       OFFSET 0) b
),
wr AS MATERIALIZED (
  SELECT p.${C.threadId} AS thread_id, p.${C.checkpointNs} AS checkpoint_ns, p.${C.checkpointId} AS checkpoint_id, w.${W.taskId} AS task_id,
         w.${W.channel} AS channel, w.${W.type} AS type, w.${W.taskPath} AS task_path, w.${W.idx} AS idx, w.${W.value} AS value
    FROM page p
    JOIN ${writes} w ON w.${W.threadId} = ${thread ?? `p.${C.threadId}`} AND w.${W.checkpointNs} = p.${C.checkpointNs} AND w.${W.checkpointId} = p.${C.checkpointId}
),
-- Values stored by content (stored.ts): the element and chunk rows they name, then the chunks' elements.
e1 AS MATERIALIZED (${elementsOf(`(SELECT thread_id, checkpoint_ns, type, value FROM bl UNION ALL SELECT thread_id, checkpoint_ns, type, value FROM wr)`, undefined, thread)}
),
e2 AS MATERIALIZED (${elementsOf("e1", "e1", thread)}
)
SELECT 0 AS kind, ${out("p.", C.threadId, "thread_id")}, ${out("p.", C.checkpointNs, "checkpoint_ns")}, ${out("p.", C.checkpointId, "checkpoint_id")}, p.${C.parentCheckpointId} AS s1,
       NULL::text AS s2, p.${C.unversionedType} AS s3, NULL::text AS s4, p.${C.stateVersion} AS n, p.${C.metadataRaw} AS v,
       p.${C.unversionedValues} AS uv, p.${C.checkpoint} AS cp, p.${C.metadata} AS md
  FROM page p
UNION ALL
SELECT 1, bl.thread_id, bl.checkpoint_ns, bl.checkpoint_id, bl.channel, bl.version, bl.type, NULL, NULL, bl.value, NULL, NULL, NULL FROM bl
UNION ALL
SELECT 4, e.thread_id, e.checkpoint_ns, '', e.h, NULL, e.type, NULL, NULL, e.value, NULL, NULL, NULL FROM e1 e
UNION ALL
SELECT 4, e.thread_id, e.checkpoint_ns, '', e.h, NULL, e.type, NULL, NULL, e.value, NULL, NULL, NULL FROM e2 e
UNION ALL
SELECT 2, w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.channel, w.type, w.task_path, w.idx, w.value, NULL, NULL, NULL FROM wr w
UNION ALL
SELECT 3, p.${C.threadId}, p.${C.checkpointNs}, p.${C.checkpointId}, ${writeCols}, NULL, NULL, NULL
  FROM page p
  JOIN ${writes} w ON w.${W.threadId} = ${thread ?? `p.${C.threadId}`} AND w.${W.checkpointNs} = p.${C.checkpointNs}
                  AND w.${W.checkpointId} = p.${C.parentCheckpointId} AND w.${W.channel} = '__pregel_tasks'
 WHERE (p.${C.checkpoint} ->> 'v')::int < 4`;

  const cols = [
    C.threadId,
    C.checkpointNs,
    C.checkpointId,
    C.parentCheckpointId,
    C.checkpoint,
    C.metadata,
    C.metadataRaw,
    C.stateVersion,
    C.unversionedType,
    C.unversionedValues,
  ].join(", ");

  /**
   * One page of `list`, newest first, keyset-paginated. Built from the
   * conditions actually present, so each variant is a plain index-friendly
   * statement (an `($n IS NULL OR col = $n)` form would give prepared
   * statements a generic plan that scans the whole table).
   */
  const listPage = (where: ListWhere): { text: string; values: unknown[] } => {
    const values: unknown[] = [];
    const param = (v: unknown) => `$${values.push(v)}`;
    const conds: string[] = [];
    const thread = where.threadId === undefined ? undefined : param(where.threadId);
    if (thread !== undefined) conds.push(`${C.threadId} = ${thread}`);
    if (where.checkpointNs !== undefined) conds.push(`${C.checkpointNs} = ${param(where.checkpointNs)}`);
    if (where.checkpointId !== undefined) conds.push(`${C.checkpointId} = ${param(where.checkpointId)}`);
    // Within one lineage the checkpoint id alone orders and bounds the page (an index range).
    const oneLineage = where.threadId !== undefined && where.checkpointNs !== undefined;
    const upper = [where.before, where.cursor?.[0]].filter((x): x is string => x !== undefined).sort()[0];
    if (oneLineage) {
      if (upper !== undefined) conds.push(`${C.checkpointId} < ${param(upper)}`);
    } else {
      if (where.before !== undefined) conds.push(`${C.checkpointId} < ${param(where.before)}`);
      if (where.cursor) conds.push(`(${C.checkpointId}, ${C.threadId}, ${C.checkpointNs}) < (${param(where.cursor[0])}, ${param(where.cursor[1])}, ${param(where.cursor[2])})`);
    }
    if (where.filter) {
      const keys = param(where.filter.keys);
      const vals = param(where.filter.values);
      conds.push(
        `${C.metadata} @> ${param(where.filter.json)}::jsonb AND NOT EXISTS (SELECT 1 FROM ROWS FROM (pg_catalog.unnest(${keys}::text[]), pg_catalog.unnest(${vals}::jsonb[])) f(k, val) WHERE ${C.metadata} -> f.k IS DISTINCT FROM f.val)`,
      );
    }
    const order = oneLineage ? `${C.checkpointId} DESC` : `${C.checkpointId} DESC, ${C.threadId} DESC, ${C.checkpointNs} DESC`;
    const text = read(
      `SELECT ${cols} FROM ${checkpoints}${conds.length ? ` WHERE ${conds.join(" AND ")}` : ""} ORDER BY ${order} LIMIT ${param(where.limit)}`,
      thread,
    );
    return { text, values };
  };

  /**
   * The tombstone check of a put (tombstones.ts), before any row is locked: the
   * checkpoint, its parent, the enclosing graphs' checkpoints it names, and
   * whether it starts a lineage: no parent, and not a subgraph's input
   * checkpoint (`source` "input", naming its enclosing graphs' checkpoints in
   * `metadata.parents`: LangGraph puts it after the root checkpoint it names,
   * unlike a subgraph's checkpoint with "exit" durability, put before it).
   */
  const putGate = putGateCall(schema, {
    thread: "$1",
    ns: "$2",
    id: "$3",
    parent: "$4::text",
    ancestors: "$6::jsonb -> 'parents'",
    starts: `($4::text IS NULL AND NOT (coalesce($6::jsonb ->> 'source' = 'input', false)
                                         AND coalesce(pg_catalog.jsonb_typeof($6::jsonb -> 'parents') = 'object' AND $6::jsonb -> 'parents' <> '{}'::jsonb, false)))`,
  });

  /**
   * The gate of the writes a put carries (`putWithWrites`): as a putWrites statement's, for their
   * checkpoints ($22), never starting a conversation.
   */
  const carriedGate = gateCall(schema, { thread: "$1", ns: "$2", ids: "$22::text[]", starts: "false" });

  /** The put statement (see `put`, `putChecked` and `putWithWrites` below). */
  const putStatement = (checked: boolean, carries = false) => `
WITH gate AS MATERIALIZED (SELECT ${putGate} AS refused${carries ? `, ${carriedGate} AS writes_refused` : ""}
), head AS (
  SELECT ${H.checkpointId}, ${H.rowVersion}, ${H.movedAt}, ${H.hasPendingTasks} FROM ${heads}
   WHERE ${H.threadId} = $1 AND ${H.checkpointNs} = $2
     FOR UPDATE
), checks AS (
  SELECT g.refused, h.${H.checkpointId} AS head_id, h.${H.rowVersion} AS head_rv,
         -- Is the parent stored? Its row is key-share locked, after the head, until
         -- we commit, so prune or deleteThread cannot take it (and the values it
         -- holds) away meanwhile. Usually the parent is the head: no second lookup.
         (${checked ? "$4::text IS NULL" : `($4::text IS NULL AND (h.${H.checkpointId} IS NULL OR h.${H.checkpointId} = $3))`}
          OR h.${H.checkpointId} IS NOT DISTINCT FROM $4 OR EXISTS (SELECT 1 FROM ${checkpoints}
                                      WHERE ${C.threadId} = $1 AND ${C.checkpointNs} = $2 AND ${C.checkpointId} = $4
                                        FOR KEY SHARE)) AS ${checked ? "parent_known" : "fast"},${
    checked
      ? `
         -- Branch mode: the head's own parent, arriving after it (LangGraph 1.4 puts
         -- an "exit" run's stub parent without waiting for it). It is stored; the
         -- head, which already builds on it, stays. Looked up only on a fork.
         (NOT $8::boolean AND h.${H.checkpointId} IS DISTINCT FROM $4::text AND h.${H.checkpointId} <> $3
          AND EXISTS (SELECT 1 FROM ${checkpoints}
                       WHERE ${C.threadId} = $1 AND ${C.checkpointNs} = $2 AND ${C.checkpointId} = h.${H.checkpointId} AND ${C.parentCheckpointId} = $3))
           IS TRUE AS late,`
      : ""
  }
         CASE
           WHEN NOT $8::boolean THEN true
           WHEN NOT (h.${H.checkpointId} IS NOT DISTINCT FROM $4::text OR h.${H.checkpointId} IS NOT DISTINCT FROM $3) THEN false
           WHEN NOT $13::boolean OR h.${H.checkpointId} IS NULL OR h.${H.checkpointId} = $3 THEN true
           -- A new run may start only from a settled head: nothing left to run,
           -- or stopped by an interrupt or error, or idle longer than the lease.
           ELSE NOT h.${H.hasPendingTasks}
             OR h.${H.movedAt} < pg_catalog.now() - pg_catalog.make_interval(secs => $14::float8)
             OR EXISTS (SELECT 1 FROM ${writes} w
                         WHERE w.${W.threadId} = $1 AND w.${W.checkpointNs} = $2 AND w.${W.checkpointId} = h.${H.checkpointId}
                           AND w.${W.channel} IN ('__interrupt__', '__error__'))
         END AS mode_ok
    -- The gate first (outer side of the join): its lock before the head row's.
    FROM gate g LEFT JOIN head h ON true
), ${
    checked
      ? `referenced AS MATERIALIZED (
  -- The values the checkpoint names without writing them, when its parent is not stored.
  SELECT r.channel, r.version FROM checks c CROSS JOIN ROWS FROM (pg_catalog.unnest($22::text[]), pg_catalog.unnest($23::text[])) AS r(channel, version)
   WHERE NOT c.parent_known
), ref_h1 AS MATERIALIZED (${elementsNamed(`SELECT ${refsAreaSql(`b.${B.type}`, `b.${B.value}`)} AS value FROM referenced r JOIN ${blobs} b
     ON b.${B.threadId} = $1 AND b.${B.checkpointNs} = $2 AND b.${B.channel} = r.channel AND b.${B.version} = r.version`)}
), ref_h2 AS MATERIALIZED (${elementsNamed(`SELECT e.${B.value} AS value FROM ref_h1 x JOIN ${blobs} e
     ON e.${B.threadId} = $1 AND e.${B.checkpointNs} = $2 AND e.${B.channel} = '${ELEMENTS_CHANNEL}' AND e.${B.version} = x.h
  WHERE e.${B.type} = '${REFS_TYPE}'`)}
), touched AS (
  -- Those stored, and the element rows of the lists among them, are touched (row_version bumped): a
  -- prune that decided on an older snapshot to delete one sees the change and leaves it (prune-sql.ts).
  -- Element rows this put sends are left to its insert (one statement may change a row once).
  UPDATE ${blobs} AS b SET ${B.rowVersion} = b.${B.rowVersion} + 1
    FROM (SELECT r.channel, r.version FROM referenced r
          UNION SELECT '${ELEMENTS_CHANNEL}', e.h FROM (SELECT h FROM ref_h1 UNION SELECT h FROM ref_h2) e
                 WHERE NOT EXISTS (SELECT 1 FROM ROWS FROM (pg_catalog.unnest($9::text[]), pg_catalog.unnest($10::text[])) AS p(channel, version)
                                    WHERE p.channel = '${ELEMENTS_CHANNEL}' AND p.version = e.h)) t
   WHERE b.${B.threadId} = $1 AND b.${B.checkpointNs} = $2 AND b.${B.channel} = t.channel AND b.${B.version} = t.version
  RETURNING b.${B.channel} AS channel, b.${B.version} AS version
), decision AS (
  -- Linear mode needs a known parent (the head); branch mode only needs the values.
  SELECT x.*, x.refused IS NULL AND x.mode_ok AND (x.parent_known OR (NOT $8::boolean AND x.missing IS NULL)) AS ok
    FROM (SELECT c.*, CASE WHEN c.parent_known THEN NULL ELSE
                        (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array(r.channel, r.version))
                           FROM referenced r
                          WHERE NOT EXISTS (SELECT 1 FROM touched t WHERE t.channel = r.channel AND t.version = r.version)) END AS missing
            FROM checks c OFFSET 0) AS x`
      : `decision AS (
  SELECT refused, head_id, head_rv, fast, refused IS NULL AND mode_ok AND fast AS ok FROM checks`
  }
), move AS (
  INSERT INTO ${heads} AS h (${H.threadId}, ${H.checkpointNs}, ${H.checkpointId}, ${H.hasPendingTasks})
  SELECT $1, $2, $3, $17 FROM decision d WHERE d.ok${checked ? " AND NOT d.late" : ""}
  ON CONFLICT (${H.threadId}, ${H.checkpointNs}) DO UPDATE
     SET ${H.checkpointId} = EXCLUDED.${H.checkpointId}, ${H.hasPendingTasks} = EXCLUDED.${H.hasPendingTasks},
         ${H.movedAt} = pg_catalog.now(), ${H.rowVersion} = h.${H.rowVersion} + 1
   WHERE h.${H.rowVersion} = (SELECT head_rv FROM decision)
  RETURNING 1
), new_blobs AS (
  INSERT INTO ${blobs} AS b (${blobCols})
  SELECT $1, $2, p.channel, p.version, p.type, v.value
    FROM ROWS FROM (pg_catalog.unnest($9::text[]), pg_catalog.unnest($10::text[]), pg_catalog.unnest($11::text[]),
                    pg_catalog.unnest($12::int[]), pg_catalog.unnest($18::int[])${carries ? ", pg_catalog.unnest($30::int[])" : ""}) AS p(channel, version, type, off, len${carries ? ", owner" : ""})
    CROSS JOIN LATERAL (SELECT CASE WHEN p.len < 0 THEN NULL ELSE pg_catalog.substring($19::bytea, p.off + 1, p.len) END AS value) AS v
${
    carries
      ? `   -- Each row is the put's (1), the carried writes' element row (2), or both's (3): stored for whichever is stored.
   WHERE (p.owner IN (1, 3) AND EXISTS (SELECT 1 FROM move)) OR (p.owner IN (2, 3) AND (SELECT writes_refused FROM gate) IS NULL)`
      : `   WHERE EXISTS (SELECT 1 FROM move)${checked ? " OR (SELECT ok AND late FROM decision)" : ""}`
  }
  -- A value already stored (an element of an earlier list, say) is touched, not kept as it is: a prune
  -- that decided on an older snapshot to delete it sees the change and leaves it (prune-sql.ts).
  ON CONFLICT (${blobKey}) DO UPDATE SET ${B.rowVersion} = b.${B.rowVersion} + 1
  RETURNING 1
), ins AS (
  INSERT INTO ${checkpoints} AS c (${C.threadId}, ${C.checkpointNs}, ${C.checkpointId}, ${C.parentCheckpointId}, ${C.checkpoint}, ${C.metadata}, ${C.metadataRaw},
                                   ${C.ttlSeconds}, ${C.stateVersion}, ${C.hasPendingTasks}, ${C.unversionedType}, ${C.unversionedValues})
  SELECT $1, $2, $3, $4, $5, $6, $7, $15, $16, $17, $20, $21
   WHERE EXISTS (SELECT 1 FROM move)${checked ? " OR (SELECT ok AND late FROM decision)" : ""}
  ON CONFLICT (${C.threadId}, ${C.checkpointNs}, ${C.checkpointId}) DO UPDATE
     SET ${C.parentCheckpointId} = EXCLUDED.${C.parentCheckpointId}, ${C.checkpoint} = EXCLUDED.${C.checkpoint},
         ${C.metadata} = EXCLUDED.${C.metadata}, ${C.metadataRaw} = EXCLUDED.${C.metadataRaw},
         ${C.ttlSeconds} = EXCLUDED.${C.ttlSeconds}, ${C.stateVersion} = EXCLUDED.${C.stateVersion},
         ${C.hasPendingTasks} = EXCLUDED.${C.hasPendingTasks}, ${C.unversionedType} = EXCLUDED.${C.unversionedType},
         ${C.unversionedValues} = EXCLUDED.${C.unversionedValues}, ${C.rowVersion} = c.${C.rowVersion} + 1
  -- Inserted, not updated: a new row has row_version 1 (never inserted otherwise), an updated one more. Not xmax = 0: a system column of a partitioned table cannot be returned (0A000, issue 32).
  RETURNING c.${C.rowVersion} = 1 AS fresh
)${
    carries
      ? `, carried AS (
${insertWriteRows(22, 19, "writes_refused")}
)`
      : ""
  }
SELECT d.refused, d.head_id, d.ok, ${checked ? "d.parent_known, d.late" : "d.fast"}, (SELECT pg_catalog.count(*) FROM move)::int AS moved,
       (SELECT pg_catalog.count(*) FROM ins WHERE fresh)::int AS inserted,
       (SELECT pg_catalog.count(*) FROM new_blobs)::int AS blobs${checked ? ", d.missing" : ""}${carries ? ", (SELECT writes_refused FROM gate) AS writes_refused" : ""}
  FROM decision d`;

  return {
    listPage,

    /** $1 thread, $2 namespace, $3 checkpoint id. */
    getById: read(`SELECT ${cols} FROM ${checkpoints} WHERE ${C.threadId} = $1 AND ${C.checkpointNs} = $2 AND ${C.checkpointId} = $3`, "$1"),

    /** $1 thread, $2 namespace: the lineage head (two primary-key lookups, O(log n) at any history length). */
    getHead: read(`SELECT ${cols} FROM ${checkpoints} WHERE ${C.threadId} = $1 AND ${C.checkpointNs} = $2 AND ${C.checkpointId} = ${headOf}`, "$1"),

    /**
     * Store a checkpoint: its new blobs, its row, and the head move, in one
     * statement. The lineage's `checkpoint_heads` row is locked (FOR UPDATE),
     * compared, and moved with a compare-and-set on its row_version (a HOT
     * update: the checkpoint rows are only inserted). A concurrent put that
     * moved the head while this one waited for the lock is seen (the locked row
     * is re-read), so the comparison is always against the current head. The
     * blobs and the row are written only if the move succeeded: the one case
     * it does not is two first puts of a lineage racing to create its head
     * row (`moved` 0: the caller runs the statement again, now seeing the head).
     * In linear mode ($8 true) nothing is written unless the head is the parent
     * (or the checkpoint itself, a re-put), and a put that starts a run ($13:
     * new input or a state update) also needs a settled head (see below), so a
     * run never starts on top of another run's unfinished steps.
     *
     * This statement takes the puts whose parent is stored (usually the head),
     * and a lineage's first root. Any other put (a parent that is not stored, a
     * root into a lineage that has a head) writes nothing here (`fast` false):
     * the caller runs {@link putChecked}, which can decide it. Kept apart so the
     * common plan carries none of that checking.
     * $1 thread, $2 ns, $3 id, $4 parent|null, $5 checkpoint jsonb, $6 metadata jsonb,
     * $7 metadata_raw|null, $8 linear, $9 channels, $10 versions, $11 types, $12 value offsets,
     * $13 starts a run, $14 run lease in seconds, $15 thread TTL in seconds|null, $16 state version|null,
     * $17 the checkpoint has tasks left to run, $20 unversioned_type|null, $21 unversioned_values|null.
     * Blob values travel as one binary
     * bytea ($19) cut by offsets ($12) and lengths ($18, -1 for NULL): a bytea[]
     * would be sent as hex text, twice the bytes and an encode on each side.
     * First of all the thread's tombstone gate (tombstones.ts): a put continuing a
     * deleted thread writes nothing (`refused`, the reason).
     * Returns refused, head_id (the head before), ok, fast, moved (1: the head now points here),
     * inserted (1 new row, 0 re-put/rejected), blobs.
     */
    put: putStatement(false),

    /**
     * {@link put} for what it leaves: a parent that is not stored is accepted
     * in branch mode when every channel value the checkpoint refers to is written
     * by the put or stored already ($22 / $23: the channels / versions it refers
     * to without writing them; those stored, and the element rows of lists
     * among them, are touched, so a prune deciding on an older snapshot leaves
     * them); linear mode refuses it. A put of the head's own parent (it arrived
     * after its child) is stored without moving the head. Parameters as `put`,
     * plus $22, $23. Returns head_id, ok, parent_known (false: the parent is not
     * stored), late (the head's parent: stored, head kept), moved, inserted,
     * blobs, missing (jsonb `[[channel, version], ...]` of values referred to
     * but not stored; NULL if none, or the parent is known).
     */
    putChecked: putStatement(true),

    /**
     * {@link put} carrying writes of the lineage that were waiting to go out
     * (coalesce.ts): one round trip and one commit for a step's writes and the
     * checkpoint that ends it. The writes pass their own gate (as `putWrites`)
     * and are stored whatever becomes of the put; the put's outcome is its own.
     * Parameters as `put`, with the blob rows ($9-$12, $18) also holding the
     * element rows the writes name (in key order with the put's own), and:
     * $22 checkpoint ids, $23 task ids, $24 task paths, $25 idx, $26 channels,
     * $27 types, $28 offsets and $29 lengths into $19 of the writes (one row
     * each, as `putWritesBatch`); $30 per blob row whose it is: 1 the put's,
     * 2 the writes', 3 both's. Returns what `put` returns (`blobs` then counts
     * the writes' element rows too), and `writes_refused`: NULL, or why the
     * gate refused the writes (nothing of them written).
     */
    putWithWrites: putStatement(false, true),

    /**
     * Store a task's writes in one statement. Ordinary writes (idx >= 0) are
     * idempotent (first one wins); special writes (negative idx: error,
     * interrupt, scheduled, resume) replace the previous value and bump row_version.
     * Each (task, idx) appears once in the arrays (the saver keeps the last of
     * repeated special writes): ON CONFLICT cannot touch one row twice.
     * $1 thread, $2 ns, $3 checkpoint id, $4 task id, $5 task path,
     * $6 idx int[], $7 channels, $8 types, $9 offsets, $10 lengths, $11 all values as one bytea
     * (the writes', then the element rows'), $12-$15 the element rows (see `writeElements`).
     * Nothing is written when the thread's tombstone gate refuses them (tombstones.ts):
     * returns `refused`, NULL or the reason.
     */
    putWrites: `
WITH gate AS MATERIALIZED (SELECT ${gateCall(schema, { thread: "$1", ns: "$2", ids: "ARRAY[$3::text]", starts: "false" })} AS refused
), ${writeElements}, ins AS (
INSERT INTO ${writes} AS w (${writeInsertCols})
SELECT $1, $2, $3, $4, $5, x.idx, x.channel, x.type, v.value
  FROM ROWS FROM (pg_catalog.unnest($6::int[]), pg_catalog.unnest($7::text[]), pg_catalog.unnest($8::text[]),
                  pg_catalog.unnest($9::int[]), pg_catalog.unnest($10::int[])) AS x(idx, channel, type, off, len)
  CROSS JOIN LATERAL (SELECT CASE WHEN x.len < 0 THEN NULL ELSE pg_catalog.substring($11::bytea, x.off + 1, x.len) END AS value) AS v
 WHERE (SELECT refused FROM gate) IS NULL
${writeConflict}
)
SELECT refused FROM gate`,

    /**
     * {@link putWrites} for several calls of one lineage at once (coalesced
     * while another write of the lineage was in flight, see coalesce.ts): the
     * checkpoint, task and task path travel per row. Each (checkpoint, task,
     * idx) appears once (the coalescer keeps what the calls one after another
     * would have left). $1 thread, $2 ns, $3 checkpoint ids, $4 task ids,
     * $5 task paths, $6 idx, $7 channels, $8 types, $9 offsets, $10 lengths,
     * $11 all values as one bytea, $12-$15 the element rows (see `writeElements`).
     */
    putWritesBatch: `
WITH gate AS MATERIALIZED (SELECT ${gateCall(schema, { thread: "$1", ns: "$2", ids: "$3::text[]", starts: "false" })} AS refused
), ${writeElements}, ins AS (
${insertWriteRows(3, 11, "refused")}
)
SELECT refused FROM gate`,

    /**
     * Linear mode, after a run failed: end its lease on the lineage, if the head
     * is still one the run left ($3) with tasks to run. `moved_at` is what the
     * lease is measured from; -infinity makes it expired. NOWAIT: a put holding
     * the row is another writer at work, and the caller retries later.
     * $1 thread, $2 namespace, $3 candidate head ids. Returns the released head.
     */
    releaseLease: `
UPDATE ${heads} SET ${H.movedAt} = '-infinity'
 WHERE (${H.threadId}, ${H.checkpointNs}) IN (SELECT ${H.threadId}, ${H.checkpointNs} FROM ${heads}
                                       WHERE ${H.threadId} = $1 AND ${H.checkpointNs} = $2 AND ${H.checkpointId} = ANY ($3::text[])
                                         AND ${H.hasPendingTasks} AND ${H.movedAt} > '-infinity'
                                         FOR UPDATE NOWAIT)
RETURNING ${out("", H.checkpointId, "checkpoint_id")}`,

    /** $1 thread, $2 namespace: the current head id (for conflict reports only). */
    headId: `SELECT ${out("", H.checkpointId, "checkpoint_id")} FROM ${heads} WHERE ${H.threadId} = $1 AND ${H.checkpointNs} = $2`,

    /**
     * upgradeState: the next batch of checkpoints older than $1 (state version),
     * keyset after ($2, $3, $4), locked for the rewrite. $5 batch size.
     */
    staleBatch: `
SELECT ${out("", C.threadId, "thread_id")}, ${out("", C.checkpointNs, "checkpoint_ns")}, ${out("", C.checkpointId, "checkpoint_id")}, ${out("", C.rowVersion, "row_version")} FROM ${checkpoints}
 WHERE coalesce(${C.stateVersion}, 1) < $1 AND (${C.threadId}, ${C.checkpointNs}, ${C.checkpointId}) > ($2, $3, $4)
 ORDER BY ${C.threadId}, ${C.checkpointNs}, ${C.checkpointId}
 LIMIT $5
   FOR UPDATE`,

    /**
     * upgradeState: rewrite one checkpoint (compare-and-set on row_version). $1-$3 key, $4 row_version read,
     * $5 checkpoint, $6 state version, $7 unversioned_type, $8 unversioned_values.
     */
    rewriteCheckpoint: `
UPDATE ${checkpoints} SET ${C.checkpoint} = $5, ${C.stateVersion} = $6, ${C.unversionedType} = $7, ${C.unversionedValues} = $8, ${C.rowVersion} = ${C.rowVersion} + 1
 WHERE ${C.threadId} = $1 AND ${C.checkpointNs} = $2 AND ${C.checkpointId} = $3 AND ${C.rowVersion} = $4
RETURNING 1`,

    /** upgradeState: store blobs. $1 thread, $2 ns, $3 channels, $4 versions, $5 types, $6 values. */
    insertBlobs: `
INSERT INTO ${blobs} (${blobCols})
SELECT $1, $2, b.channel, b.version, b.type, b.value
  FROM ROWS FROM (pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[]),
                  pg_catalog.unnest($6::bytea[])) AS b(channel, version, type, value)
ON CONFLICT (${blobKey}) DO NOTHING`,

    /** upgradeState: rename a pending write's channel. $1-$3 checkpoint key, $4 old channel, $5 new channel. */
    renameWrites: `
UPDATE ${writes} SET ${W.channel} = $5, ${W.rowVersion} = ${W.rowVersion} + 1
 WHERE ${W.threadId} = $1 AND ${W.checkpointNs} = $2 AND ${W.checkpointId} = $3 AND ${W.channel} = $4`,

    /**
     * deleteThread, first statement: the thread's deletion lock (tombstones.ts),
     * exclusive. It waits for the writes in flight on the thread to commit;
     * later ones wait for this transaction, then find its tombstone. Says the
     * transaction knows element rows (migration 0008's guard). $1 thread.
     */
    lockThreadForDelete: `SELECT ${lockForDelete(schema, "$1::text")}, ${knowsElementsSql}`,

    /**
     * deleteThread, second statement (same transaction, a snapshot that sees
     * what the writes in flight committed): the tombstone, then every row of the
     * thread. $1 thread. Returns the rows deleted per table.
     */
    deleteThread: `
WITH last AS MATERIALIZED (
  SELECT GREATEST((SELECT pg_catalog.max(${C.checkpointId}) FROM ${checkpoints} WHERE ${C.threadId} = $1),
                  (SELECT pg_catalog.max(${W.checkpointId}) FROM ${writes} WHERE ${W.threadId} = $1)) AS id
), tomb AS (${upsertTombstones(schema, `SELECT $1::text, (SELECT id FROM last)`)}
), h AS (DELETE FROM ${heads} WHERE ${H.threadId} = $1
), w AS (DELETE FROM ${writes} WHERE ${W.threadId} = $1 RETURNING 1
), b AS (DELETE FROM ${blobs} WHERE ${B.threadId} = $1 RETURNING 1
), c AS (DELETE FROM ${checkpoints} WHERE ${C.threadId} = $1 RETURNING 1)
SELECT (SELECT pg_catalog.count(*) FROM c)::int AS checkpoints, (SELECT pg_catalog.count(*) FROM w)::int AS writes,
       (SELECT pg_catalog.count(*) FROM b)::int AS blobs`,

    /**
     * Delta-channel history: walk the parent chain of a checkpoint once, for
     * all requested channels; each channel stops at the nearest ancestor holding
     * a non-empty blob for it (its seed). Returns per ancestor (depth 0 = parent
     * of the target) kind 1 seed blobs and kind 2 writes of still-walking channels.
     * The walk is bounded: a step to a parent with a greater id (never the case
     * for LangGraph's time-ordered ids, so never paid for) is taken only while
     * the walk is shorter than the lineage has checkpoints, so a cycle ends it.
     * A kind 0 row says why a walk that still needed parents stopped (`type`:
     * cycle or missing-parent) at `checkpoint_id`.
     * $1 thread, $2 ns, $3 target id|null (null: the head), $4 channels text[].
     */
    deltaHistory: `
WITH RECURSIVE target AS (
  SELECT ${C.checkpointId}, ${C.parentCheckpointId} FROM ${checkpoints}
   WHERE ${C.threadId} = $1 AND ${C.checkpointNs} = $2 AND ${C.checkpointId} = coalesce($3::text, ${headOf})
), chain AS (
  SELECT c.${C.checkpointId}, c.${C.parentCheckpointId}, c.${C.checkpoint}, 0 AS depth, $4::text[] AS walking,
         ARRAY(SELECT ch FROM pg_catalog.unnest($4::text[]) ch
                WHERE NOT EXISTS (SELECT 1 FROM ${blobs} b WHERE b.${B.threadId} = $1 AND b.${B.checkpointNs} = $2 AND b.${B.channel} = ch
                                    AND b.${B.version} = c.${C.checkpoint} -> 'channel_versions' ->> ch AND b.${B.type} <> 'empty')) AS still
    FROM ${checkpoints} c, target t
   WHERE c.${C.threadId} = $1 AND c.${C.checkpointNs} = $2 AND c.${C.checkpointId} = t.${C.parentCheckpointId}
  UNION ALL
  SELECT c.${C.checkpointId}, c.${C.parentCheckpointId}, c.${C.checkpoint}, chain.depth + 1, chain.still,
         ARRAY(SELECT ch FROM pg_catalog.unnest(chain.still) ch
                WHERE NOT EXISTS (SELECT 1 FROM ${blobs} b WHERE b.${B.threadId} = $1 AND b.${B.checkpointNs} = $2 AND b.${B.channel} = ch
                                    AND b.${B.version} = c.${C.checkpoint} -> 'channel_versions' ->> ch AND b.${B.type} <> 'empty'))
    FROM chain JOIN ${checkpoints} c
      ON c.${C.threadId} = $1 AND c.${C.checkpointNs} = $2 AND c.${C.checkpointId} = chain.${C.parentCheckpointId}
   WHERE pg_catalog.cardinality(chain.still) > 0
     AND (c.${C.checkpointId} < chain.${C.checkpointId}
          OR chain.depth < (SELECT pg_catalog.count(*) FROM ${checkpoints} x WHERE x.${C.threadId} = $1 AND x.${C.checkpointNs} = $2))
), stopped AS (
  SELECT chain.${C.checkpointId}, chain.${C.parentCheckpointId} FROM chain
   WHERE pg_catalog.cardinality(chain.still) > 0 AND chain.${C.parentCheckpointId} IS NOT NULL
     AND chain.depth = (SELECT pg_catalog.max(depth) FROM chain)
  UNION ALL
  SELECT t.${C.checkpointId}, t.${C.parentCheckpointId} FROM target t
   WHERE t.${C.parentCheckpointId} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM chain)
), seeds AS MATERIALIZED (
  SELECT $1::text AS thread_id, $2::text AS checkpoint_ns, chain.depth, chain.${C.checkpointId} AS checkpoint_id, b.${B.channel} AS channel,
         b.${B.version} AS version, b.${B.type} AS type, b.${B.value} AS value
    FROM chain JOIN ${blobs} b
      ON b.${B.threadId} = $1 AND b.${B.checkpointNs} = $2 AND b.${B.channel} = ANY (chain.walking) AND NOT (b.${B.channel} = ANY (chain.still))
     AND b.${B.version} = chain.${C.checkpoint} -> 'channel_versions' ->> b.${B.channel}
), dw AS MATERIALIZED (
  SELECT $1::text AS thread_id, $2::text AS checkpoint_ns, chain.depth, chain.${C.checkpointId} AS checkpoint_id, w.${W.channel} AS channel,
         w.${W.taskId} AS task_id, w.${W.taskPath} AS task_path, w.${W.idx} AS idx, w.${W.type} AS type, w.${W.value} AS value
    FROM chain JOIN ${writes} w
      ON w.${W.threadId} = $1 AND w.${W.checkpointNs} = $2 AND w.${W.checkpointId} = chain.${C.checkpointId} AND w.${W.channel} = ANY (chain.walking)
), e1 AS MATERIALIZED (${elementsOf(`(SELECT thread_id, checkpoint_ns, type, value FROM seeds UNION ALL SELECT thread_id, checkpoint_ns, type, value FROM dw)`, undefined, "$1")}
), e2 AS MATERIALIZED (${elementsOf("e1", "e1", "$1")}
)
SELECT 0 AS kind, NULL::int AS depth, ${out("s.", C.checkpointId, "checkpoint_id")}, NULL::text AS channel, NULL::text AS version, NULL::text AS task_id,
       NULL::text AS task_path, NULL::int AS idx,
       CASE WHEN EXISTS (SELECT 1 FROM ${checkpoints} p WHERE p.${C.threadId} = $1 AND p.${C.checkpointNs} = $2 AND p.${C.checkpointId} = s.${C.parentCheckpointId})
            THEN 'cycle' ELSE 'missing-parent' END AS type, NULL::bytea AS value
  FROM stopped s
UNION ALL
SELECT 1, depth, checkpoint_id, channel, version, NULL, NULL, NULL, type, value FROM seeds
UNION ALL
SELECT 3, NULL, '', NULL, h, NULL, NULL, NULL, type, value FROM e1
UNION ALL
SELECT 3, NULL, '', NULL, h, NULL, NULL, NULL, type, value FROM e2
UNION ALL
SELECT 2, depth, checkpoint_id, channel, NULL, task_id, task_path, idx, type, value FROM dw`,
  };
}
