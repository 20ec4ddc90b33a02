/**
 * The put statements, each written whole: `put` (the common case: its parent
 * is the head, or stored), `putWithWrites` (the same, carrying the writes that
 * waited for it: threads.ts) and `putChecked` (what `put` leaves: a parent that
 * is not stored, a root into a lineage that has a head). put.ts sends them and
 * reads their answer; their parameters, by name, are put in order at the end
 * of this file:
 *
 *   $1 thread, $2 namespace, $3 checkpoint id, $4 parent id | NULL, $5 checkpoint (jsonb, without
 *   its values), $6 metadata (jsonb), $7 metadata_raw | NULL, $8 linear lineage, $9 channels,
 *   $10 versions, $11 types, $12 offsets and $18 lengths (-1: NULL) of the blob values in $19 (one
 *   bytea: a bytea[] would travel as hex text, twice the bytes), $13 starts a run, $14 run lease
 *   (seconds), $15 thread TTL (seconds) | NULL, $16 state version | NULL, $17 tasks left to run,
 *   $20 unversioned_type | NULL, $21 unversioned_values | NULL.
 *
 * Each is one round trip and one commit. The lineage's head row is locked (FOR UPDATE) and moved
 * with a compare-and-set on its row_version (a HOT update: checkpoint rows are only inserted); a
 * put that moved it while this one waited for the lock is seen (the locked row is re-read). Blobs
 * and the checkpoint row are written only if the head moved; the one case it does not is two first
 * puts of a lineage racing to create its head row (`moved` 0: put.ts runs it again). In linear
 * mode ($8) nothing is written unless the head is the parent (or the checkpoint itself, a re-put),
 * and a put starting a run ($13: new input or a state update) also needs a settled head.
 *
 * Functions are called as `pg_catalog.<name>`: a role that may create objects on the search_path
 * could plant a closer overload (e.g. `unnest(text[])`). Several arrays are unnested with `ROWS
 * FROM (...)`, the form multi-argument `unnest` stands for, which only exists unqualified.
 */
import { hashesSql, refsAreaSql } from "../stored.js";
import type { Place } from "./place.js";


/**
 * A put's gate (tombstones.ts, migration 0009): the checkpoint, its parent, the enclosing graphs'
 * checkpoints it names, and whether it starts a lineage: no parent, and not a subgraph's input
 * checkpoint (`source` "input", naming its enclosing graphs' checkpoints in `metadata.parents`:
 * LangGraph puts it after the root checkpoint it names, unlike a subgraph's checkpoint with "exit"
 * durability, put before it).
 */
const putGate = ({ s, lock }: Place) =>
  `${s}.checkpointer_put_gate(${lock}, $1, $2, $3, $4::text, $6::jsonb -> 'parents', ($4::text IS NULL AND NOT (coalesce($6::jsonb ->> 'source' = 'input', false)
                                         AND coalesce(pg_catalog.jsonb_typeof($6::jsonb -> 'parents') = 'object' AND $6::jsonb -> 'parents' <> '{}'::jsonb, false))))`;

/**
 * The put whose parent is stored (usually the head), or a lineage's first root. Any other put (a
 * parent that is not stored, a root into a lineage that has a head) writes nothing here (`fast`
 * false) and is decided by {@link putChecked}. Returns refused (the gate's reason, or NULL),
 * head_id (the head before), ok, fast, moved (1: the head now points here), inserted (1: a new
 * row), blobs.
 */
export const put = (p: Place) => `
WITH gate AS MATERIALIZED (SELECT ${putGate(p)} AS refused
), head AS (
  SELECT checkpoint_id, row_version, moved_at, has_pending_tasks FROM ${p.s}.checkpoint_heads
   WHERE thread_id = $1 AND checkpoint_ns = $2
     FOR UPDATE
), checks AS (
  SELECT g.refused, h.checkpoint_id AS head_id, h.row_version AS head_rv,
         -- Is the parent stored? Its row is key-share locked, after the head, until
         -- we commit, so prune or deleteThread cannot take it (and the values it
         -- holds) away meanwhile. Usually the parent is the head: no second lookup.
         (($4::text IS NULL AND (h.checkpoint_id IS NULL OR h.checkpoint_id = $3))
          OR h.checkpoint_id IS NOT DISTINCT FROM $4 OR EXISTS (SELECT 1 FROM ${p.s}.checkpoints
                                      WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $4
                                        FOR KEY SHARE)) AS fast,
         CASE
           WHEN NOT $8::boolean THEN true
           WHEN NOT (h.checkpoint_id IS NOT DISTINCT FROM $4::text OR h.checkpoint_id IS NOT DISTINCT FROM $3) THEN false
           WHEN NOT $13::boolean OR h.checkpoint_id IS NULL OR h.checkpoint_id = $3 THEN true
           -- A new run may start only from a settled head: nothing left to run,
           -- or stopped by an interrupt or error, or idle longer than the lease.
           ELSE NOT h.has_pending_tasks
             OR h.moved_at < pg_catalog.now() - pg_catalog.make_interval(secs => $14::float8)
             OR EXISTS (SELECT 1 FROM ${p.s}.checkpoint_writes w
                         WHERE w.thread_id = $1 AND w.checkpoint_ns = $2 AND w.checkpoint_id = h.checkpoint_id
                           AND w.channel IN ('__interrupt__', '__error__'))
         END AS mode_ok
    -- The gate first (outer side of the join): its lock before the head row's.
    FROM gate g LEFT JOIN head h ON true
), decision AS (
  SELECT refused, head_id, head_rv, fast, refused IS NULL AND mode_ok AND fast AS ok FROM checks
), move AS (
  -- The head moves here, if nobody moved it since it was read. The time and the next row version come
  -- in the inserted row (EXCLUDED): Citus runs ON CONFLICT's SET and WHERE on the worker, and takes
  -- neither a function that is not IMMUTABLE nor a subquery there.
  INSERT INTO ${p.s}.checkpoint_heads AS h (thread_id, checkpoint_ns, checkpoint_id, has_pending_tasks, moved_at, row_version)
  SELECT $1, $2, $3, $17, pg_catalog.now(), coalesce(d.head_rv, 0) + 1 FROM decision d WHERE d.ok
  ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE
     SET checkpoint_id = EXCLUDED.checkpoint_id, has_pending_tasks = EXCLUDED.has_pending_tasks,
         moved_at = EXCLUDED.moved_at, row_version = EXCLUDED.row_version
   WHERE h.row_version = EXCLUDED.row_version - 1
  RETURNING 1
), new_blobs AS (
  INSERT INTO ${p.s}.checkpoint_blobs AS b (thread_id, checkpoint_ns, channel, version, type, value)
  SELECT $1, $2, p.channel, p.version, p.type, v.value
    FROM ROWS FROM (pg_catalog.unnest($9::text[]), pg_catalog.unnest($10::text[]), pg_catalog.unnest($11::text[]),
                    pg_catalog.unnest($12::int[]), pg_catalog.unnest($18::int[])) AS p(channel, version, type, off, len)
    CROSS JOIN LATERAL (SELECT CASE WHEN p.len < 0 THEN NULL ELSE pg_catalog.substring($19::bytea, p.off + 1, p.len) END AS value) AS v
   WHERE EXISTS (SELECT 1 FROM move)
  -- A value already stored (an element of an earlier list, say) is touched, not kept as it is: a prune
  -- that decided on an older snapshot to delete it sees the change and leaves it (prune-sql.ts).
  ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO UPDATE SET row_version = b.row_version + 1
  RETURNING 1
), ins AS (
  INSERT INTO ${p.s}.checkpoints AS c (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, metadata_raw,
                                   ttl_seconds, state_version, has_pending_tasks, unversioned_type, unversioned_values)
  SELECT $1, $2, $3, $4, $5, $6, $7, $15, $16, $17, $20, $21
   WHERE EXISTS (SELECT 1 FROM move)
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE
     SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint,
         metadata = EXCLUDED.metadata, metadata_raw = EXCLUDED.metadata_raw,
         ttl_seconds = EXCLUDED.ttl_seconds, state_version = EXCLUDED.state_version,
         has_pending_tasks = EXCLUDED.has_pending_tasks, unversioned_type = EXCLUDED.unversioned_type,
         unversioned_values = EXCLUDED.unversioned_values, row_version = c.row_version + 1
  -- Inserted, not updated: a new row has row_version 1 (never inserted otherwise), an updated one more. Not xmax = 0: a system column of a partitioned table cannot be returned (0A000, issue 32).
  RETURNING c.row_version = 1 AS fresh
)
SELECT d.refused, d.head_id, d.ok, d.fast, (SELECT pg_catalog.count(*) FROM move)::int AS moved,
       (SELECT pg_catalog.count(*) FROM ins WHERE fresh)::int AS inserted,
       (SELECT pg_catalog.count(*) FROM new_blobs)::int AS blobs
  FROM decision d`;

/**
 * {@link put} carrying writes of the lineage that were waiting to go out (threads.ts): one round
 * trip and one commit for a step's writes and the checkpoint that ends it. The writes pass their
 * own gate (as `putWrites`) and are stored whatever becomes of the put; the put's outcome is its
 * own. Parameters as `put`, with the blob rows ($9-$12, $18) also holding the element rows the
 * writes name (in key order with the put's own), and: $22 checkpoint ids, $23 task ids, $24 task
 * paths, $25 idx, $26 channels, $27 types, $28 offsets and $29 lengths into $19 of the writes (a
 * row each, as `putWritesBatch`); $30 per blob row whose it is: 1 the put's, 2 the writes', 3 both's.
 * Returns what `put` returns (`blobs` counting the writes' element rows too), and
 * `writes_refused`: NULL, or why the gate refused the writes (nothing of them written).
 */
export const putWithWrites = (p: Place) => `
WITH gate AS MATERIALIZED (SELECT ${putGate(p)} AS refused, ${p.s}.checkpointer_thread_gate(${p.lock}, $1, $2, $22::text[], false) AS writes_refused
), head AS (
  SELECT checkpoint_id, row_version, moved_at, has_pending_tasks FROM ${p.s}.checkpoint_heads
   WHERE thread_id = $1 AND checkpoint_ns = $2
     FOR UPDATE
), checks AS (
  SELECT g.refused, h.checkpoint_id AS head_id, h.row_version AS head_rv,
         -- Is the parent stored? (As in put.)
         (($4::text IS NULL AND (h.checkpoint_id IS NULL OR h.checkpoint_id = $3))
          OR h.checkpoint_id IS NOT DISTINCT FROM $4 OR EXISTS (SELECT 1 FROM ${p.s}.checkpoints
                                      WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $4
                                        FOR KEY SHARE)) AS fast,
         CASE
           WHEN NOT $8::boolean THEN true
           WHEN NOT (h.checkpoint_id IS NOT DISTINCT FROM $4::text OR h.checkpoint_id IS NOT DISTINCT FROM $3) THEN false
           WHEN NOT $13::boolean OR h.checkpoint_id IS NULL OR h.checkpoint_id = $3 THEN true
           -- A new run may start only from a settled head (as in put).
           ELSE NOT h.has_pending_tasks
             OR h.moved_at < pg_catalog.now() - pg_catalog.make_interval(secs => $14::float8)
             OR EXISTS (SELECT 1 FROM ${p.s}.checkpoint_writes w
                         WHERE w.thread_id = $1 AND w.checkpoint_ns = $2 AND w.checkpoint_id = h.checkpoint_id
                           AND w.channel IN ('__interrupt__', '__error__'))
         END AS mode_ok
    -- The gates first (outer side of the join): their lock before the head row's.
    FROM gate g LEFT JOIN head h ON true
), decision AS (
  SELECT refused, head_id, head_rv, fast, refused IS NULL AND mode_ok AND fast AS ok FROM checks
), move AS (
  INSERT INTO ${p.s}.checkpoint_heads AS h (thread_id, checkpoint_ns, checkpoint_id, has_pending_tasks, moved_at, row_version)
  SELECT $1, $2, $3, $17, pg_catalog.now(), coalesce(d.head_rv, 0) + 1 FROM decision d WHERE d.ok
  ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE
     SET checkpoint_id = EXCLUDED.checkpoint_id, has_pending_tasks = EXCLUDED.has_pending_tasks,
         moved_at = EXCLUDED.moved_at, row_version = EXCLUDED.row_version
   WHERE h.row_version = EXCLUDED.row_version - 1
  RETURNING 1
), new_blobs AS (
  INSERT INTO ${p.s}.checkpoint_blobs AS b (thread_id, checkpoint_ns, channel, version, type, value)
  SELECT $1, $2, p.channel, p.version, p.type, v.value
    FROM ROWS FROM (pg_catalog.unnest($9::text[]), pg_catalog.unnest($10::text[]), pg_catalog.unnest($11::text[]),
                    pg_catalog.unnest($12::int[]), pg_catalog.unnest($18::int[]), pg_catalog.unnest($30::int[])) AS p(channel, version, type, off, len, owner)
    CROSS JOIN LATERAL (SELECT CASE WHEN p.len < 0 THEN NULL ELSE pg_catalog.substring($19::bytea, p.off + 1, p.len) END AS value) AS v
   -- Each row is the put's (1), the carried writes' element row (2), or both's (3): stored for whichever is stored.
   WHERE (p.owner IN (1, 3) AND EXISTS (SELECT 1 FROM move)) OR (p.owner IN (2, 3) AND (SELECT writes_refused FROM gate) IS NULL)
  ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO UPDATE SET row_version = b.row_version + 1
  RETURNING 1
), ins AS (
  INSERT INTO ${p.s}.checkpoints AS c (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, metadata_raw,
                                   ttl_seconds, state_version, has_pending_tasks, unversioned_type, unversioned_values)
  SELECT $1, $2, $3, $4, $5, $6, $7, $15, $16, $17, $20, $21
   WHERE EXISTS (SELECT 1 FROM move)
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE
     SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint,
         metadata = EXCLUDED.metadata, metadata_raw = EXCLUDED.metadata_raw,
         ttl_seconds = EXCLUDED.ttl_seconds, state_version = EXCLUDED.state_version,
         has_pending_tasks = EXCLUDED.has_pending_tasks, unversioned_type = EXCLUDED.unversioned_type,
         unversioned_values = EXCLUDED.unversioned_values, row_version = c.row_version + 1
  RETURNING c.row_version = 1 AS fresh
), carried AS (
  -- The writes, as putWritesBatch stores them: ordinary ones kept (first one wins), special ones replaced.
INSERT INTO ${p.s}.checkpoint_writes AS w (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value)
SELECT $1, $2, x.checkpoint_id, x.task_id, x.task_path, x.idx, x.channel, x.type, v.value
  FROM ROWS FROM (pg_catalog.unnest($22::text[]), pg_catalog.unnest($23::text[]), pg_catalog.unnest($24::text[]),
                  pg_catalog.unnest($25::int[]), pg_catalog.unnest($26::text[]), pg_catalog.unnest($27::text[]),
                  pg_catalog.unnest($28::int[]), pg_catalog.unnest($29::int[])) AS x(checkpoint_id, task_id, task_path, idx, channel, type, off, len)
  CROSS JOIN LATERAL (SELECT CASE WHEN x.len < 0 THEN NULL ELSE pg_catalog.substring($19::bytea, x.off + 1, x.len) END AS value) AS v
 WHERE (SELECT writes_refused FROM gate) IS NULL
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
   SET channel = EXCLUDED.channel, type = EXCLUDED.type, value = EXCLUDED.value,
       task_path = EXCLUDED.task_path, row_version = w.row_version + 1
 WHERE EXCLUDED.idx < 0
)
SELECT d.refused, d.head_id, d.ok, d.fast, (SELECT pg_catalog.count(*) FROM move)::int AS moved,
       (SELECT pg_catalog.count(*) FROM ins WHERE fresh)::int AS inserted,
       (SELECT pg_catalog.count(*) FROM new_blobs)::int AS blobs, (SELECT writes_refused FROM gate) AS writes_refused
  FROM decision d`;

/**
 * What {@link put} leaves: a parent that is not stored is accepted in branch mode when every value
 * the checkpoint refers to is written by the put or stored already ($22, $23: the channels and
 * versions it refers to without writing them; those stored, and the element rows of lists among
 * them, are touched, so a prune deciding on an older snapshot leaves them); linear mode refuses
 * it. A put of the head's own parent (arriving after its child) is stored without moving the head.
 * Returns refused, head_id, ok, parent_known (false: the parent is not stored), late (the head's
 * parent: stored, head kept), moved, inserted, blobs, missing (jsonb `[[channel, version], ...]`
 * of values referred to but not stored; NULL if none, or the parent is known).
 */
export const putChecked = (p: Place) => `
WITH gate AS MATERIALIZED (SELECT ${putGate(p)} AS refused
), head AS (
  SELECT checkpoint_id, row_version, moved_at, has_pending_tasks FROM ${p.s}.checkpoint_heads
   WHERE thread_id = $1 AND checkpoint_ns = $2
     FOR UPDATE
), checks AS (
  SELECT g.refused, h.checkpoint_id AS head_id, h.row_version AS head_rv,
         -- Is the parent stored? (As in put, key-share locked.)
         ($4::text IS NULL
          OR h.checkpoint_id IS NOT DISTINCT FROM $4 OR EXISTS (SELECT 1 FROM ${p.s}.checkpoints
                                      WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $4
                                        FOR KEY SHARE)) AS parent_known,
         -- Branch mode: the head's own parent, arriving after it (LangGraph 1.4 puts
         -- an "exit" run's stub parent without waiting for it). It is stored; the
         -- head, which already builds on it, stays. Looked up only on a fork.
         (NOT $8::boolean AND h.checkpoint_id IS DISTINCT FROM $4::text AND h.checkpoint_id <> $3
          AND EXISTS (SELECT 1 FROM ${p.s}.checkpoints
                       WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = h.checkpoint_id AND parent_checkpoint_id = $3))
           IS TRUE AS late,
         CASE
           WHEN NOT $8::boolean THEN true
           WHEN NOT (h.checkpoint_id IS NOT DISTINCT FROM $4::text OR h.checkpoint_id IS NOT DISTINCT FROM $3) THEN false
           WHEN NOT $13::boolean OR h.checkpoint_id IS NULL OR h.checkpoint_id = $3 THEN true
           -- A new run may start only from a settled head (as in put).
           ELSE NOT h.has_pending_tasks
             OR h.moved_at < pg_catalog.now() - pg_catalog.make_interval(secs => $14::float8)
             OR EXISTS (SELECT 1 FROM ${p.s}.checkpoint_writes w
                         WHERE w.thread_id = $1 AND w.checkpoint_ns = $2 AND w.checkpoint_id = h.checkpoint_id
                           AND w.channel IN ('__interrupt__', '__error__'))
         END AS mode_ok
    FROM gate g LEFT JOIN head h ON true
), referenced AS MATERIALIZED (
  -- The values the checkpoint names without writing them, when its parent is not stored.
  SELECT r.channel, r.version FROM checks c CROSS JOIN ROWS FROM (pg_catalog.unnest($22::text[]), pg_catalog.unnest($23::text[])) AS r(channel, version)
   WHERE NOT c.parent_known
), ref_h1 AS MATERIALIZED (
  -- The element rows those values name (stored.ts) ...
  SELECT DISTINCT i.h FROM (SELECT ${refsAreaSql("b.type", "b.value")} AS value FROM referenced r JOIN ${p.s}.checkpoint_blobs b
     ON b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = r.channel AND b.version = r.version) x ${hashesSql("x.value", "i")}
), ref_h2 AS MATERIALIZED (
  -- ... and those their chunks name.
  SELECT DISTINCT i.h FROM (SELECT e.value AS value FROM ref_h1 x JOIN ${p.s}.checkpoint_blobs e
     ON e.thread_id = $1 AND e.checkpoint_ns = $2 AND e.channel = '__elements__' AND e.version = x.h
  WHERE e.type = 'pg:refs') x ${hashesSql("x.value", "i")}
), touched AS (
  -- Those stored, and the element rows of the lists among them, are touched (row_version bumped): a
  -- prune that decided on an older snapshot to delete one sees the change and leaves it (prune-sql.ts).
  -- Element rows this put sends are left to its insert (one statement may change a row once).
  UPDATE ${p.s}.checkpoint_blobs AS b SET row_version = b.row_version + 1
    FROM (SELECT r.channel, r.version FROM referenced r
          UNION SELECT '__elements__', e.h FROM (SELECT h FROM ref_h1 UNION SELECT h FROM ref_h2) e
                 WHERE NOT EXISTS (SELECT 1 FROM ROWS FROM (pg_catalog.unnest($9::text[]), pg_catalog.unnest($10::text[])) AS p(channel, version)
                                    WHERE p.channel = '__elements__' AND p.version = e.h)) t
   WHERE b.thread_id = $1 AND b.checkpoint_ns = $2 AND b.channel = t.channel AND b.version = t.version
  RETURNING b.channel AS channel, b.version AS version
), decision AS (
  -- Linear mode needs a known parent (the head); branch mode only needs the values.
  SELECT x.*, x.refused IS NULL AND x.mode_ok AND (x.parent_known OR (NOT $8::boolean AND x.missing IS NULL)) AS ok
    FROM (SELECT c.*, CASE WHEN c.parent_known THEN NULL ELSE
                        (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array(r.channel, r.version))
                           FROM referenced r
                          WHERE NOT EXISTS (SELECT 1 FROM touched t WHERE t.channel = r.channel AND t.version = r.version)) END AS missing
            FROM checks c OFFSET 0) AS x
), move AS (
  -- A late parent leaves the head where it is.
  INSERT INTO ${p.s}.checkpoint_heads AS h (thread_id, checkpoint_ns, checkpoint_id, has_pending_tasks, moved_at, row_version)
  SELECT $1, $2, $3, $17, pg_catalog.now(), coalesce(d.head_rv, 0) + 1 FROM decision d WHERE d.ok AND NOT d.late
  ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE
     SET checkpoint_id = EXCLUDED.checkpoint_id, has_pending_tasks = EXCLUDED.has_pending_tasks,
         moved_at = EXCLUDED.moved_at, row_version = EXCLUDED.row_version
   WHERE h.row_version = EXCLUDED.row_version - 1
  RETURNING 1
), new_blobs AS (
  INSERT INTO ${p.s}.checkpoint_blobs AS b (thread_id, checkpoint_ns, channel, version, type, value)
  SELECT $1, $2, p.channel, p.version, p.type, v.value
    FROM ROWS FROM (pg_catalog.unnest($9::text[]), pg_catalog.unnest($10::text[]), pg_catalog.unnest($11::text[]),
                    pg_catalog.unnest($12::int[]), pg_catalog.unnest($18::int[])) AS p(channel, version, type, off, len)
    CROSS JOIN LATERAL (SELECT CASE WHEN p.len < 0 THEN NULL ELSE pg_catalog.substring($19::bytea, p.off + 1, p.len) END AS value) AS v
   WHERE EXISTS (SELECT 1 FROM move) OR (SELECT ok AND late FROM decision)
  ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO UPDATE SET row_version = b.row_version + 1
  RETURNING 1
), ins AS (
  INSERT INTO ${p.s}.checkpoints AS c (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, metadata_raw,
                                   ttl_seconds, state_version, has_pending_tasks, unversioned_type, unversioned_values)
  SELECT $1, $2, $3, $4, $5, $6, $7, $15, $16, $17, $20, $21
   WHERE EXISTS (SELECT 1 FROM move) OR (SELECT ok AND late FROM decision)
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE
     SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint,
         metadata = EXCLUDED.metadata, metadata_raw = EXCLUDED.metadata_raw,
         ttl_seconds = EXCLUDED.ttl_seconds, state_version = EXCLUDED.state_version,
         has_pending_tasks = EXCLUDED.has_pending_tasks, unversioned_type = EXCLUDED.unversioned_type,
         unversioned_values = EXCLUDED.unversioned_values, row_version = c.row_version + 1
  RETURNING c.row_version = 1 AS fresh
)
SELECT d.refused, d.head_id, d.ok, d.parent_known, d.late, (SELECT pg_catalog.count(*) FROM move)::int AS moved,
       (SELECT pg_catalog.count(*) FROM ins WHERE fresh)::int AS inserted,
       (SELECT pg_catalog.count(*) FROM new_blobs)::int AS blobs, d.missing
  FROM decision d`;

// The parameters, by name, and the functions that put them in the order of the statements' `$n`.

/**
 * The parameters of `put` and `putChecked`, by name; {@link putValues} puts
 * them in the order of the statements' `$n`.
 */
export interface PutParams {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
  parentId: string | null;
  /** The checkpoint without its channel values, as JSON text. */
  checkpoint: string;
  /** The metadata's JSONB projection, as JSON text. */
  metadata: string;
  /** The metadata's exact copy, when the projection is not exact. */
  metadataRaw: Uint8Array | null;
  linear: boolean;
  /** The blobs written: channel, version, type, and the values packed (see `put`). */
  channels: string[];
  versions: string[];
  types: string[];
  offsets: number[];
  lengths: number[];
  bytes: Buffer;
  startsRun: boolean;
  leaseSeconds: number;
  ttlSeconds: number | null;
  stateVersion: number | null;
  hasPendingTasks: boolean;
  unversionedType: string | null;
  unversionedValues: Uint8Array | null;
}

/**
 * `put`'s values ($1 to $21); `putChecked`'s with `referenced` ($22, $23: the
 * channels and versions the checkpoint refers to without writing them).
 */
export function putValues(p: PutParams, referenced?: { channels: string[]; versions: string[] }): unknown[] {
  const values: unknown[] = [
    p.threadId, p.checkpointNs, p.checkpointId, p.parentId, p.checkpoint, p.metadata, p.metadataRaw, p.linear,
    p.channels, p.versions, p.types, p.offsets, p.startsRun, p.leaseSeconds, p.ttlSeconds, p.stateVersion,
    p.hasPendingTasks, p.lengths, p.bytes, p.unversionedType, p.unversionedValues,
  ];
  if (referenced) values.push(referenced.channels, referenced.versions);
  return values;
}

/** The writes a put carries (see `putWithWrites`), by name: one row each, values in the put's `bytes`. */
export interface CarriedParams {
  checkpointIds: string[];
  taskIds: string[];
  taskPaths: string[];
  idx: number[];
  channels: string[];
  types: string[];
  offsets: number[];
  lengths: number[];
  /** Per blob row of the put (`PutParams.channels`...): 1 the put's, 2 the writes' element row, 3 both's. */
  owners: number[];
}

/** `putWithWrites`'s values, $1 to $30: the put's (its blob rows holding the writes' element rows too), then the writes'. */
export function putWithWritesValues(p: PutParams, w: CarriedParams): unknown[] {
  return [
    ...putValues(p),
    w.checkpointIds, w.taskIds, w.taskPaths, w.idx, w.channels, w.types, w.offsets, w.lengths, w.owners,
  ];
}
