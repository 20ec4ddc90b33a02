/**
 * The statements on a thread as a whole, outside put and read: deleting it (two statements in one
 * transaction: tombstones.ts), a failed run's lease (leases.ts), the head for a conflict report,
 * and upgradeState's batches (upgrade.ts).
 */
import type { Place } from "./place.js";

/**
 * deleteThread, first statement: the thread's deletion lock, exclusive. It waits for the writes in
 * flight on the thread to commit; later ones wait for this transaction, then find its tombstone.
 * $1 thread.
 */
export const lockThreadForDelete = (p: Place) => `SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(${p.lock}), pg_catalog.hashtext($1::text))`;

/**
 * deleteThread, second statement (same transaction, a snapshot that sees what the writes in
 * flight committed): the tombstone, holding the greatest checkpoint id the thread names (its
 * checkpoints', and its pending writes'), then every row of the thread. $1 thread. Returns the
 * rows deleted per table.
 */
export const deleteThread = (p: Place) => `
WITH last AS MATERIALIZED (
  SELECT GREATEST((SELECT pg_catalog.max(checkpoint_id) FROM ${p.s}.checkpoints WHERE thread_id = $1),
                  (SELECT pg_catalog.max(checkpoint_id) FROM ${p.s}.checkpoint_writes WHERE thread_id = $1)) AS id
), tomb AS (INSERT INTO ${p.s}.checkpoint_tombstones AS t (thread_id, deleted_at, last_checkpoint_id)
  SELECT src.thread_id, pg_catalog.now(), src.last_id FROM (SELECT $1::text, (SELECT id FROM last)) AS src(thread_id, last_id)
  ON CONFLICT (thread_id) DO UPDATE
     SET deleted_at = EXCLUDED.deleted_at,
         last_checkpoint_id = GREATEST(t.last_checkpoint_id, EXCLUDED.last_checkpoint_id)
), h AS (DELETE FROM ${p.s}.checkpoint_heads WHERE thread_id = $1
), w AS (DELETE FROM ${p.s}.checkpoint_writes WHERE thread_id = $1 RETURNING 1
), b AS (DELETE FROM ${p.s}.checkpoint_blobs WHERE thread_id = $1 RETURNING 1
), c AS (DELETE FROM ${p.s}.checkpoints WHERE thread_id = $1 RETURNING 1)
SELECT (SELECT pg_catalog.count(*) FROM c)::int AS checkpoints, (SELECT pg_catalog.count(*) FROM w)::int AS writes,
       (SELECT pg_catalog.count(*) FROM b)::int AS blobs`;

/**
 * Linear mode, after a run failed: end its lease on the lineage, if the head is still one the run
 * left ($3) with tasks to run. `moved_at` is what the lease is measured from; -infinity makes it
 * expired. NOWAIT: a put holding the row is another writer at work, and the caller retries later.
 * $1 thread, $2 namespace, $3 candidate head ids. Returns the released head.
 */
export const releaseLease = (p: Place) => `
UPDATE ${p.s}.checkpoint_heads SET moved_at = '-infinity'
 WHERE (thread_id, checkpoint_ns) IN (SELECT thread_id, checkpoint_ns FROM ${p.s}.checkpoint_heads
                                       WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = ANY ($3::text[])
                                         AND has_pending_tasks AND moved_at > '-infinity'
                                         FOR UPDATE NOWAIT)
RETURNING checkpoint_id`;

/** $1 thread, $2 namespace: the current head id (for conflict reports only). */
export const headId = (p: Place) => `SELECT checkpoint_id FROM ${p.s}.checkpoint_heads WHERE thread_id = $1 AND checkpoint_ns = $2`;

/** upgradeState: the next batch of checkpoints older than $1 (state version), keyset after ($2, $3, $4), locked for the rewrite. $5 batch size. */
export const staleBatch = (p: Place) => `
SELECT thread_id, checkpoint_ns, checkpoint_id, row_version FROM ${p.s}.checkpoints
 WHERE coalesce(state_version, 1) < $1 AND (thread_id, checkpoint_ns, checkpoint_id) > ($2, $3, $4)
 ORDER BY thread_id, checkpoint_ns, checkpoint_id
 LIMIT $5
   FOR UPDATE`;

/**
 * upgradeState: rewrite one checkpoint (compare-and-set on row_version). $1-$3 key, $4 row_version read,
 * $5 checkpoint, $6 state version, $7 unversioned_type, $8 unversioned_values.
 */
export const rewriteCheckpoint = (p: Place) => `
UPDATE ${p.s}.checkpoints SET checkpoint = $5, state_version = $6, unversioned_type = $7, unversioned_values = $8, row_version = row_version + 1
 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3 AND row_version = $4
RETURNING 1`;

/** upgradeState: store blobs. $1 thread, $2 ns, $3 channels, $4 versions, $5 types, $6 values. */
export const insertBlobs = (p: Place) => `
INSERT INTO ${p.s}.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, value)
SELECT $1, $2, b.channel, b.version, b.type, b.value
  FROM ROWS FROM (pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[]),
                  pg_catalog.unnest($6::bytea[])) AS b(channel, version, type, value)
ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING`;

/** upgradeState: rename a pending write's channel. $1-$3 checkpoint key, $4 old channel, $5 new channel. */
export const renameWrites = (p: Place) => `
UPDATE ${p.s}.checkpoint_writes SET channel = $5, row_version = row_version + 1
 WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3 AND channel = $4`;
