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
 */
import { quoteIdent } from "./validate.js";

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
 */
export interface ReadRow {
  kind: 0 | 1 | 2 | 3;
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

export function buildQueries(schema: string) {
  const s = quoteIdent(schema);
  const checkpoints = `${s}.checkpoints`;
  const writes = `${s}.checkpoint_writes`;
  const blobs = `${s}.checkpoint_blobs`;
  const heads = `${s}.checkpoint_heads`;
  /** The head's checkpoint id of lineage ($1, $2). */
  const headOf = `(SELECT checkpoint_id FROM ${heads} WHERE thread_id = $1 AND checkpoint_ns = $2)`;

  /** Wrap a page of checkpoint rows into the one-statement read. */
  const read = (page: string) => `
WITH page AS MATERIALIZED (${page})
SELECT 0 AS kind, p.thread_id, p.checkpoint_ns, p.checkpoint_id, p.parent_checkpoint_id AS s1,
       NULL::text AS s2, p.unversioned_type AS s3, NULL::text AS s4, p.state_version AS n, p.metadata_raw AS v,
       p.unversioned_values AS uv, p.checkpoint AS cp, p.metadata AS md
  FROM page p
UNION ALL
SELECT 1, p.thread_id, p.checkpoint_ns, p.checkpoint_id, b.channel, cv.version, b.type, NULL, NULL, b.value, NULL, NULL, NULL
  FROM page p
  CROSS JOIN LATERAL pg_catalog.jsonb_each_text(p.checkpoint -> 'channel_versions') AS cv(channel, version)
  -- A lateral lookup per (channel, version): the planner would otherwise hash
  -- all of a long thread's blobs to find the few a page needs.
  CROSS JOIN LATERAL (SELECT b.channel, b.type, b.value FROM ${blobs} b
                       WHERE b.thread_id = p.thread_id AND b.checkpoint_ns = p.checkpoint_ns
                         AND b.channel = cv.channel AND b.version = cv.version AND b.type <> 'empty'
                      OFFSET 0) b
UNION ALL
SELECT 2, p.thread_id, p.checkpoint_ns, p.checkpoint_id, w.task_id, w.channel, w.type, w.task_path, w.idx, w.value, NULL, NULL, NULL
  FROM page p
  JOIN ${writes} w ON w.thread_id = p.thread_id AND w.checkpoint_ns = p.checkpoint_ns AND w.checkpoint_id = p.checkpoint_id
UNION ALL
SELECT 3, p.thread_id, p.checkpoint_ns, p.checkpoint_id, w.task_id, w.channel, w.type, w.task_path, w.idx, w.value, NULL, NULL, NULL
  FROM page p
  JOIN ${writes} w ON w.thread_id = p.thread_id AND w.checkpoint_ns = p.checkpoint_ns
                  AND w.checkpoint_id = p.parent_checkpoint_id AND w.channel = '__pregel_tasks'
 WHERE (p.checkpoint ->> 'v')::int < 4`;

  const cols =
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, metadata_raw, state_version, unversioned_type, unversioned_values";

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
    if (where.threadId !== undefined) conds.push(`thread_id = ${param(where.threadId)}`);
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
      const keys = param(where.filter.keys);
      const vals = param(where.filter.values);
      conds.push(
        `metadata @> ${param(where.filter.json)}::jsonb AND NOT EXISTS (SELECT 1 FROM ROWS FROM (pg_catalog.unnest(${keys}::text[]), pg_catalog.unnest(${vals}::jsonb[])) f(k, val) WHERE metadata -> f.k IS DISTINCT FROM f.val)`,
      );
    }
    const order = oneLineage ? "checkpoint_id DESC" : "checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC";
    const text = read(
      `SELECT ${cols} FROM ${checkpoints}${conds.length ? ` WHERE ${conds.join(" AND ")}` : ""} ORDER BY ${order} LIMIT ${param(where.limit)}`,
    );
    return { text, values };
  };

  /** The put statement (see `put` and `putChecked` below). */
  const putStatement = (checked: boolean) => `
WITH head AS (
  SELECT checkpoint_id, row_version, moved_at, has_pending_tasks FROM ${heads}
   WHERE thread_id = $1 AND checkpoint_ns = $2
     FOR UPDATE
), checks AS (
  SELECT h.checkpoint_id AS head_id, h.row_version AS head_rv,
         -- Is the parent stored? Its row is key-share locked, after the head, until
         -- we commit, so prune or deleteThread cannot take it (and the values it
         -- holds) away meanwhile. Usually the parent is the head: no second lookup.
         (${checked ? "$4::text IS NULL" : "($4::text IS NULL AND (h.checkpoint_id IS NULL OR h.checkpoint_id = $3))"}
          OR h.checkpoint_id IS NOT DISTINCT FROM $4 OR EXISTS (SELECT 1 FROM ${checkpoints}
                                      WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $4
                                        FOR KEY SHARE)) AS ${checked ? "parent_known" : "fast"},${
    checked
      ? `
         -- Branch mode: the head's own parent, arriving after it (LangGraph 1.4 puts
         -- an "exit" run's stub parent without waiting for it). It is stored; the
         -- head, which already builds on it, stays. Looked up only on a fork.
         (NOT $8::boolean AND h.checkpoint_id IS DISTINCT FROM $4::text AND h.checkpoint_id <> $3
          AND EXISTS (SELECT 1 FROM ${checkpoints}
                       WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = h.checkpoint_id AND parent_checkpoint_id = $3))
           IS TRUE AS late,`
      : ""
  }
         CASE
           WHEN NOT $8::boolean THEN true
           WHEN NOT (h.checkpoint_id IS NOT DISTINCT FROM $4::text OR h.checkpoint_id IS NOT DISTINCT FROM $3) THEN false
           WHEN NOT $13::boolean OR h.checkpoint_id IS NULL OR h.checkpoint_id = $3 THEN true
           -- A new run may start only from a settled head: nothing left to run,
           -- or stopped by an interrupt or error, or idle longer than the lease.
           ELSE NOT h.has_pending_tasks
             OR h.moved_at < pg_catalog.now() - pg_catalog.make_interval(secs => $14::float8)
             OR EXISTS (SELECT 1 FROM ${writes} w
                         WHERE w.thread_id = $1 AND w.checkpoint_ns = $2 AND w.checkpoint_id = h.checkpoint_id
                           AND w.channel IN ('__interrupt__', '__error__'))
         END AS mode_ok
    FROM (SELECT 1) AS one LEFT JOIN head h ON true
), decision AS (${
    checked
      ? `
  -- Linear mode needs a known parent (the head); branch mode only needs the values.
  SELECT x.*, x.mode_ok AND (x.parent_known OR (NOT $8::boolean AND x.missing IS NULL)) AS ok
    FROM (SELECT c.*, CASE WHEN c.parent_known THEN NULL ELSE
                        (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array(r.channel, r.version))
                           FROM ROWS FROM (pg_catalog.unnest($22::text[]), pg_catalog.unnest($23::text[])) AS r(channel, version)
                          WHERE NOT EXISTS (SELECT 1 FROM ${blobs} b
                                             WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = r.channel AND b.version = r.version
                                               FOR KEY SHARE)) END AS missing
            FROM checks c OFFSET 0) AS x`
      : `
  SELECT head_id, head_rv, fast, mode_ok AND fast AS ok FROM checks`
  }
), move AS (
  INSERT INTO ${heads} AS h (thread_id, checkpoint_ns, checkpoint_id, has_pending_tasks)
  SELECT $1, $2, $3, $17 FROM decision d WHERE d.ok${checked ? " AND NOT d.late" : ""}
  ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE
     SET checkpoint_id = EXCLUDED.checkpoint_id, has_pending_tasks = EXCLUDED.has_pending_tasks,
         moved_at = pg_catalog.now(), row_version = h.row_version + 1
   WHERE h.row_version = (SELECT head_rv FROM decision)
  RETURNING 1
), new_blobs AS (
  INSERT INTO ${blobs} (thread_id, checkpoint_ns, channel, version, type, value)
  SELECT $1, $2, p.channel, p.version, p.type, v.value
    FROM ROWS FROM (pg_catalog.unnest($9::text[]), pg_catalog.unnest($10::text[]), pg_catalog.unnest($11::text[]),
                    pg_catalog.unnest($12::int[]), pg_catalog.unnest($18::int[])) AS p(channel, version, type, off, len)
    CROSS JOIN LATERAL (SELECT CASE WHEN p.len < 0 THEN NULL ELSE pg_catalog.substring($19::bytea, p.off + 1, p.len) END AS value) AS v
   WHERE EXISTS (SELECT 1 FROM move)${checked ? " OR (SELECT ok AND late FROM decision)" : ""}
  ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
  RETURNING 1
), ins AS (
  INSERT INTO ${checkpoints} AS c (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, metadata_raw,
                                   ttl_seconds, state_version, has_pending_tasks, unversioned_type, unversioned_values)
  SELECT $1, $2, $3, $4, $5, $6, $7, $15, $16, $17, $20, $21
   WHERE EXISTS (SELECT 1 FROM move)${checked ? " OR (SELECT ok AND late FROM decision)" : ""}
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE
     SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint,
         metadata = EXCLUDED.metadata, metadata_raw = EXCLUDED.metadata_raw,
         ttl_seconds = EXCLUDED.ttl_seconds, state_version = EXCLUDED.state_version,
         has_pending_tasks = EXCLUDED.has_pending_tasks, unversioned_type = EXCLUDED.unversioned_type,
         unversioned_values = EXCLUDED.unversioned_values, row_version = c.row_version + 1
  RETURNING (xmax = 0) AS fresh
)
SELECT d.head_id, d.ok, ${checked ? "d.parent_known, d.late" : "d.fast"}, (SELECT pg_catalog.count(*) FROM move)::int AS moved,
       (SELECT pg_catalog.count(*) FROM ins WHERE fresh)::int AS inserted,
       (SELECT pg_catalog.count(*) FROM new_blobs)::int AS blobs${checked ? ", d.missing" : ""}
  FROM decision d`;

  return {
    listPage,

    /** $1 thread, $2 namespace, $3 checkpoint id. */
    getById: read(`SELECT ${cols} FROM ${checkpoints} WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3`),

    /** $1 thread, $2 namespace: the lineage head (two primary-key lookups, O(log n) at any history length). */
    getHead: read(`SELECT ${cols} FROM ${checkpoints} WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ${headOf}`),

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
     * Returns head_id (the head before), ok, fast, moved (1: the head now points here),
     * inserted (1 new row, 0 re-put/rejected), blobs.
     */
    put: putStatement(false),

    /**
     * {@link put} for what it leaves: a parent that is not stored is accepted
     * in branch mode when every channel value the checkpoint refers to is written
     * by the put or stored already ($22 / $23: the channels / versions it refers
     * to without writing them; those stored are key-share locked until we
     * commit); linear mode refuses it. A put of the head's own parent (it arrived
     * after its child) is stored without moving the head. Parameters as `put`,
     * plus $22, $23. Returns head_id, ok, parent_known (false: the parent is not
     * stored), late (the head's parent: stored, head kept), moved, inserted,
     * blobs, missing (jsonb `[[channel, version], ...]` of values referred to
     * but not stored; NULL if none, or the parent is known).
     */
    putChecked: putStatement(true),

    /**
     * Store a task's writes in one statement. Ordinary writes (idx >= 0) are
     * idempotent (first one wins); special writes (negative idx: error,
     * interrupt, scheduled, resume) replace the previous value and bump row_version.
     * Each (task, idx) appears once in the arrays (the saver keeps the last of
     * repeated special writes): ON CONFLICT cannot touch one row twice.
     * $1 thread, $2 ns, $3 checkpoint id, $4 task id, $5 task path,
     * $6 idx int[], $7 channels, $8 types, $9 offsets, $10 lengths, $11 all values as one bytea.
     */
    putWrites: `
INSERT INTO ${writes} AS w (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value)
SELECT $1, $2, $3, $4, $5, x.idx, x.channel, x.type, v.value
  FROM ROWS FROM (pg_catalog.unnest($6::int[]), pg_catalog.unnest($7::text[]), pg_catalog.unnest($8::text[]),
                  pg_catalog.unnest($9::int[]), pg_catalog.unnest($10::int[])) AS x(idx, channel, type, off, len)
  CROSS JOIN LATERAL (SELECT CASE WHEN x.len < 0 THEN NULL ELSE pg_catalog.substring($11::bytea, x.off + 1, x.len) END AS value) AS v
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
   SET channel = EXCLUDED.channel, type = EXCLUDED.type, value = EXCLUDED.value,
       task_path = EXCLUDED.task_path, row_version = w.row_version + 1
 WHERE EXCLUDED.idx < 0`,

    /**
     * {@link putWrites} for several calls of one lineage at once (coalesced
     * while another write of the lineage was in flight, see coalesce.ts): the
     * checkpoint, task and task path travel per row. Each (checkpoint, task,
     * idx) appears once (the coalescer keeps what the calls one after another
     * would have left). $1 thread, $2 ns, $3 checkpoint ids, $4 task ids,
     * $5 task paths, $6 idx, $7 channels, $8 types, $9 offsets, $10 lengths,
     * $11 all values as one bytea.
     */
    putWritesBatch: `
INSERT INTO ${writes} AS w (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value)
SELECT $1, $2, x.checkpoint_id, x.task_id, x.task_path, x.idx, x.channel, x.type, v.value
  FROM ROWS FROM (pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[]),
                  pg_catalog.unnest($6::int[]), pg_catalog.unnest($7::text[]), pg_catalog.unnest($8::text[]),
                  pg_catalog.unnest($9::int[]), pg_catalog.unnest($10::int[])) AS x(checkpoint_id, task_id, task_path, idx, channel, type, off, len)
  CROSS JOIN LATERAL (SELECT CASE WHEN x.len < 0 THEN NULL ELSE pg_catalog.substring($11::bytea, x.off + 1, x.len) END AS value) AS v
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
   SET channel = EXCLUDED.channel, type = EXCLUDED.type, value = EXCLUDED.value,
       task_path = EXCLUDED.task_path, row_version = w.row_version + 1
 WHERE EXCLUDED.idx < 0`,

    /**
     * Linear mode, after a run failed: end its lease on the lineage, if the head
     * is still one the run left ($3) with tasks to run. `moved_at` is what the
     * lease is measured from; -infinity makes it expired. NOWAIT: a put holding
     * the row is another writer at work, and the caller retries later.
     * $1 thread, $2 namespace, $3 candidate head ids. Returns the released head.
     */
    releaseLease: `
UPDATE ${heads} SET moved_at = '-infinity'
 WHERE (thread_id, checkpoint_ns) IN (SELECT thread_id, checkpoint_ns FROM ${heads}
                                       WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY ($3::text[])
                                         AND has_pending_tasks AND moved_at > '-infinity'
                                         FOR UPDATE NOWAIT)
RETURNING checkpoint_id`,

    /** $1 thread, $2 namespace: the current head id (for conflict reports only). */
    headId: `SELECT checkpoint_id FROM ${heads} WHERE thread_id = $1 AND checkpoint_ns = $2`,

    /**
     * upgradeState: the next batch of checkpoints older than $1 (state version),
     * keyset after ($2, $3, $4), locked for the rewrite. $5 batch size.
     */
    staleBatch: `
SELECT thread_id, checkpoint_ns, checkpoint_id, row_version FROM ${checkpoints}
 WHERE coalesce(state_version, 1) < $1 AND (thread_id, checkpoint_ns, checkpoint_id) > ($2, $3, $4)
 ORDER BY thread_id, checkpoint_ns, checkpoint_id
 LIMIT $5
   FOR UPDATE`,

    /**
     * upgradeState: rewrite one checkpoint (compare-and-set on row_version). $1-$3 key, $4 row_version read,
     * $5 checkpoint, $6 state version, $7 unversioned_type, $8 unversioned_values.
     */
    rewriteCheckpoint: `
UPDATE ${checkpoints} SET checkpoint = $5, state_version = $6, unversioned_type = $7, unversioned_values = $8, row_version = row_version + 1
 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3 AND row_version = $4
RETURNING 1`,

    /** upgradeState: store blobs. $1 thread, $2 ns, $3 channels, $4 versions, $5 types, $6 values. */
    insertBlobs: `
INSERT INTO ${blobs} (thread_id, checkpoint_ns, channel, version, type, value)
SELECT $1, $2, b.channel, b.version, b.type, b.value
  FROM ROWS FROM (pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[]),
                  pg_catalog.unnest($6::bytea[])) AS b(channel, version, type, value)
ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING`,

    /** upgradeState: rename a pending write's channel. $1-$3 checkpoint key, $4 old channel, $5 new channel. */
    renameWrites: `
UPDATE ${writes} SET channel = $5, row_version = row_version + 1
 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3 AND channel = $4`,

    /**
     * deleteThread, first statement: the thread's head rows. Deleting them takes
     * the lock every put takes first, so a put in flight commits before, and a
     * later one waits, then finds no head and its parent gone (a conflict).
     * $1 thread.
     */
    deleteHeads: `DELETE FROM ${heads} WHERE thread_id = $1`,

    /**
     * deleteThread, second statement (same transaction, a newer snapshot: it
     * sees what a put in flight committed): everything else. $1 thread.
     */
    deleteThread: `
WITH a AS (DELETE FROM ${writes} WHERE thread_id = $1),
     b AS (DELETE FROM ${blobs} WHERE thread_id = $1)
DELETE FROM ${checkpoints} WHERE thread_id = $1`,

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
  SELECT checkpoint_id, parent_checkpoint_id FROM ${checkpoints}
   WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = coalesce($3::text, ${headOf})
), chain AS (
  SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, 0 AS depth, $4::text[] AS walking,
         ARRAY(SELECT ch FROM pg_catalog.unnest($4::text[]) ch
                WHERE NOT EXISTS (SELECT 1 FROM ${blobs} b WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = ch
                                    AND b.version = c.checkpoint -> 'channel_versions' ->> ch AND b.type <> 'empty')) AS still
    FROM ${checkpoints} c, target t
   WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = t.parent_checkpoint_id
  UNION ALL
  SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, chain.depth + 1, chain.still,
         ARRAY(SELECT ch FROM pg_catalog.unnest(chain.still) ch
                WHERE NOT EXISTS (SELECT 1 FROM ${blobs} b WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = ch
                                    AND b.version = c.checkpoint -> 'channel_versions' ->> ch AND b.type <> 'empty'))
    FROM chain JOIN ${checkpoints} c
      ON c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = chain.parent_checkpoint_id
   WHERE pg_catalog.cardinality(chain.still) > 0
     AND (c.checkpoint_id < chain.checkpoint_id
          OR chain.depth < (SELECT pg_catalog.count(*) FROM ${checkpoints} x WHERE x.thread_id = $1 AND x.checkpoint_ns = $2))
), stopped AS (
  SELECT chain.checkpoint_id, chain.parent_checkpoint_id FROM chain
   WHERE pg_catalog.cardinality(chain.still) > 0 AND chain.parent_checkpoint_id IS NOT NULL
     AND chain.depth = (SELECT pg_catalog.max(depth) FROM chain)
  UNION ALL
  SELECT t.checkpoint_id, t.parent_checkpoint_id FROM target t
   WHERE t.parent_checkpoint_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM chain)
)
SELECT 0 AS kind, NULL::int AS depth, s.checkpoint_id, NULL::text AS channel, NULL::text AS version, NULL::text AS task_id,
       NULL::text AS task_path, NULL::int AS idx,
       CASE WHEN EXISTS (SELECT 1 FROM ${checkpoints} p WHERE p.thread_id = $1 AND p.checkpoint_ns = $2 AND p.checkpoint_id = s.parent_checkpoint_id)
            THEN 'cycle' ELSE 'missing-parent' END AS type, NULL::bytea AS value
  FROM stopped s
UNION ALL
SELECT 1, chain.depth, chain.checkpoint_id, b.channel, b.version, NULL, NULL, NULL, b.type, b.value
  FROM chain JOIN ${blobs} b
    ON b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = ANY (chain.walking) AND NOT (b.channel = ANY (chain.still))
   AND b.version = chain.checkpoint -> 'channel_versions' ->> b.channel
UNION ALL
SELECT 2, chain.depth, chain.checkpoint_id, w.channel, NULL, w.task_id, w.task_path, w.idx, w.type, w.value
  FROM chain JOIN ${writes} w
    ON w.thread_id = $1 AND w.checkpoint_ns = $2 AND w.checkpoint_id = chain.checkpoint_id AND w.channel = ANY (chain.walking)`,
  };
}
