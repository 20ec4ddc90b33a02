/**
 * The pending-write statements: `putWrites` (one call's rows) and `putWritesBatch` (several calls
 * of one lineage, coalesced: threads.ts). Ordinary writes (idx >= 0) are idempotent (the first one
 * wins); special writes (negative idx: error, interrupt, scheduled, resume) replace the stored one
 * and bump its row_version. Each (checkpoint, task, idx) appears once in a statement (the saver
 * keeps the last of repeated special writes): ON CONFLICT cannot touch one row twice. Nothing is
 * written when the thread's tombstone gate refuses them (tombstones.ts): both return `refused`,
 * NULL or the reason. The element rows the writes name ($12 hashes, $13 types, $14 offsets and $15
 * lengths into $11, in key order) go with them; one already stored is touched, as a put does.
 */
import type { Place } from "./place.js";

/**
 * $1 thread, $2 ns, $3 checkpoint id, $4 task id, $5 task path, $6 idx int[], $7 channels,
 * $8 types, $9 offsets, $10 lengths, $11 all values as one bytea (the writes', then the element
 * rows'), $12-$15 the element rows.
 */
export const putWrites = (p: Place) => `
WITH gate AS MATERIALIZED (SELECT ${p.s}.checkpointer_thread_gate(${p.lock}, $1, $2, ARRAY[$3::text], false) AS refused
), elements AS (
  INSERT INTO ${p.s}.checkpoint_blobs AS b (thread_id, checkpoint_ns, channel, version, type, value)
  SELECT $1, $2, '__elements__', e.hash, e.type, pg_catalog.substring($11::bytea, e.off + 1, e.len)
    FROM ROWS FROM (pg_catalog.unnest($12::text[]), pg_catalog.unnest($13::text[]), pg_catalog.unnest($14::int[]), pg_catalog.unnest($15::int[])) AS e(hash, type, off, len)
   WHERE (SELECT refused FROM gate) IS NULL
  ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO UPDATE SET row_version = b.row_version + 1
), ins AS (
INSERT INTO ${p.s}.checkpoint_writes AS w (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value)
SELECT $1, $2, $3, $4, $5, x.idx, x.channel, x.type, v.value
  FROM ROWS FROM (pg_catalog.unnest($6::int[]), pg_catalog.unnest($7::text[]), pg_catalog.unnest($8::text[]),
                  pg_catalog.unnest($9::int[]), pg_catalog.unnest($10::int[])) AS x(idx, channel, type, off, len)
  CROSS JOIN LATERAL (SELECT CASE WHEN x.len < 0 THEN NULL ELSE pg_catalog.substring($11::bytea, x.off + 1, x.len) END AS value) AS v
 WHERE (SELECT refused FROM gate) IS NULL
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
   SET channel = EXCLUDED.channel, type = EXCLUDED.type, value = EXCLUDED.value,
       task_path = EXCLUDED.task_path, row_version = w.row_version + 1
 WHERE EXCLUDED.idx < 0
)
SELECT refused FROM gate`;

/**
 * {@link putWrites} for several calls of one lineage: the checkpoint, task and task path travel per
 * row. $1 thread, $2 ns, $3 checkpoint ids, $4 task ids, $5 task paths, $6 idx, $7 channels,
 * $8 types, $9 offsets, $10 lengths, $11 all values as one bytea, $12-$15 the element rows.
 */
export const putWritesBatch = (p: Place) => `
WITH gate AS MATERIALIZED (SELECT ${p.s}.checkpointer_thread_gate(${p.lock}, $1, $2, $3::text[], false) AS refused
), elements AS (
  INSERT INTO ${p.s}.checkpoint_blobs AS b (thread_id, checkpoint_ns, channel, version, type, value)
  SELECT $1, $2, '__elements__', e.hash, e.type, pg_catalog.substring($11::bytea, e.off + 1, e.len)
    FROM ROWS FROM (pg_catalog.unnest($12::text[]), pg_catalog.unnest($13::text[]), pg_catalog.unnest($14::int[]), pg_catalog.unnest($15::int[])) AS e(hash, type, off, len)
   WHERE (SELECT refused FROM gate) IS NULL
  ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO UPDATE SET row_version = b.row_version + 1
), ins AS (
INSERT INTO ${p.s}.checkpoint_writes AS w (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value)
SELECT $1, $2, x.checkpoint_id, x.task_id, x.task_path, x.idx, x.channel, x.type, v.value
  FROM ROWS FROM (pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[]),
                  pg_catalog.unnest($6::int[]), pg_catalog.unnest($7::text[]), pg_catalog.unnest($8::text[]),
                  pg_catalog.unnest($9::int[]), pg_catalog.unnest($10::int[])) AS x(checkpoint_id, task_id, task_path, idx, channel, type, off, len)
  CROSS JOIN LATERAL (SELECT CASE WHEN x.len < 0 THEN NULL ELSE pg_catalog.substring($11::bytea, x.off + 1, x.len) END AS value) AS v
 WHERE (SELECT refused FROM gate) IS NULL
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE
   SET channel = EXCLUDED.channel, type = EXCLUDED.type, value = EXCLUDED.value,
       task_path = EXCLUDED.task_path, row_version = w.row_version + 1
 WHERE EXCLUDED.idx < 0
)
SELECT refused FROM gate`;

// The parameters, by name, and the functions that put them in the order of the statements' `$n`.

/** The values of one putWrites call's rows, by name (see `putWrites`). */
export interface WritesParams {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
  taskId: string;
  taskPath: string;
  idx: number[];
  channels: string[];
  types: string[];
  offsets: number[];
  lengths: number[];
  /** The write values, then the element rows' values, packed. */
  bytes: Buffer;
  /** The element rows the writes name that go with them (stored.ts): hash, type, where in `bytes`. */
  elementHashes: string[];
  elementTypes: string[];
  elementOffsets: number[];
  elementLengths: number[];
}

/** `putWrites`'s values, $1 to $15. */
export function putWritesValues(w: WritesParams): unknown[] {
  return [
    w.threadId, w.checkpointNs, w.checkpointId, w.taskId, w.taskPath, w.idx, w.channels, w.types, w.offsets, w.lengths, w.bytes,
    w.elementHashes, w.elementTypes, w.elementOffsets, w.elementLengths,
  ];
}

/** The rows of several putWrites calls of one lineage, by name: checkpoint, task and path per row (see `putWritesBatch`). */
export interface WritesBatchParams extends Omit<WritesParams, "checkpointId" | "taskId" | "taskPath"> {
  checkpointIds: string[];
  taskIds: string[];
  taskPaths: string[];
}

/** `putWritesBatch`'s values, $1 to $15. */
export function putWritesBatchValues(w: WritesBatchParams): unknown[] {
  return [
    w.threadId, w.checkpointNs, w.checkpointIds, w.taskIds, w.taskPaths, w.idx, w.channels, w.types, w.offsets, w.lengths, w.bytes,
    w.elementHashes, w.elementTypes, w.elementOffsets, w.elementLengths,
  ];
}
