/**
 * The statements around the items rather than on one: the TTL sweep (store.ts runs it in batches, by hand or from ttl.ts's sweeper),
 * `getStats`, `reindex`'s two, and the readiness check's look at pgvector.
 *
 * A sweep batch is a transaction of three statements: the sweep lock, a `lock_timeout`, the delete.
 * - Several processes may run a sweeper on one schema: the sweep lock (transaction-scoped, advisory,
 *   keyed by the database and the schema) lets one of them delete at a time. The sweeper only tries
 *   it ({@link sweepLock}: the others skip that round); a sweep called by hand waits for it
 *   ({@link sweepLockWaiting}), so its count covers everything expired when it started.
 * - The delete gives way to the application's writes: it waits at most {@link SWEEP_LOCK_TIMEOUT}
 *   for a row another transaction holds, then fails (55P03) and the batch is rolled back. So a
 *   transaction that holds an expired row and wants one the sweep deleted never deadlocks with it
 *   (PostgreSQL looks for deadlocks after `deadlock_timeout`, 1 s by default). It does not lock rows
 *   ahead (`FOR UPDATE SKIP LOCKED`), which Citus refuses in a statement over several shards.
 * - The batch is deleted by its keys, not by `ctid`: in a store partitioned by namespace
 *   (docs/scaling-out.md) a ctid names a row only within one partition, and `ctid = ANY (...)`
 *   deleted the rows at those places in every partition, expired or not.
 */
import type { Place, VectorPlace } from "./place.js";

/** How long a sweep's delete waits for a row another transaction holds before it gives way. */
export const SWEEP_LOCK_TIMEOUT = "100ms";

const sweepLockKey = `pg_catalog.hashtext('langgraph-checkpoint-pg:store-sweep'), pg_catalog.hashtext(pg_catalog.concat(pg_catalog.current_database(), '.', $1::text))`;

/** The sweep lock of schema $1, if no other sweep holds it: `got`. */
export const sweepLock = `SELECT pg_catalog.pg_try_advisory_xact_lock(${sweepLockKey}) AS got`;

/** The sweep lock of schema $1, once the sweep holding it commits. */
export const sweepLockWaiting = `SELECT pg_catalog.pg_advisory_xact_lock(${sweepLockKey})`;

/**
 * Up to $1 expired items deleted, oldest expiry first: `n`. The delete checks the expiry again on
 * the row it deletes, so a row a read refreshed after this statement's snapshot stays.
 */
export const sweep = (p: Place) => `
WITH gone AS (
  DELETE FROM ${p.s}.store_items it
   WHERE (it.ns_key, it.key) IN (SELECT x.ns_key, x.key FROM ${p.s}.store_items x WHERE x.expires_at <= pg_catalog.now()
                                  ORDER BY x.expires_at LIMIT $1)
     AND it.expires_at <= pg_catalog.now()
  RETURNING 1
)
SELECT pg_catalog.count(*)::int AS n FROM gone`;

/** Counts and times over the whole store, expired items included until swept (`getStats`). */
export const stats = (p: Place) => `
SELECT pg_catalog.count(*)::bigint AS total_items,
       pg_catalog.count(*) FILTER (WHERE expires_at IS NOT NULL AND expires_at <= pg_catalog.now())::bigint AS expired_items,
       pg_catalog.count(DISTINCT ns_key)::bigint AS namespace_count,
       pg_catalog.min(created_at) AS oldest_item, pg_catalog.max(created_at) AS newest_item
  FROM ${p.s}.store_items`;

/** `reindex`: the next $1 texts without an embedding, in key order. */
export const reindexPage = (p: Place) =>
  `SELECT ns_key, key, field_path, text_content FROM ${p.s}.store_item_vectors WHERE embedding IS NULL ORDER BY ns_key, key, field_path LIMIT $1`;

/** `reindex`: their embeddings. $1 a JSON array of `{ ns, key, field, embedding }` (pgvector's text form). */
export const reindexWrite = (p: VectorPlace) => `
UPDATE ${p.s}.store_item_vectors v SET embedding = (x ->> 'embedding')::${p.ext}.vector
  FROM pg_catalog.jsonb_array_elements($1::jsonb) AS r(x)
 WHERE v.ns_key = x ->> 'ns' AND v.key = x ->> 'key' AND v.field_path = x ->> 'field'`;

/**
 * The schema pgvector lives in, and whether it has iterative index scans (0.8 or later); no row
 * when it is not installed. Read once by a store with an index.
 */
export const vectorExtension = `
SELECT n.nspname AS schema, coalesce(pg_catalog.regexp_match(e.extversion, '^(\\d+)\\.(\\d+)')::int[] >= '{0,8}', false) AS iterative
  FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname = 'vector'`;
