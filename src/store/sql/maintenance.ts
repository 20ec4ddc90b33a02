/**
 * The statements around the items rather than on one: the TTL sweep (store.ts runs it in batches, by hand or from ttl.ts's sweeper),
 * `getStats`, `reindex`'s two, and the readiness check's look at pgvector.
 *
 * Several processes may run a sweeper on one schema: each sweep statement first takes a
 * transaction-scoped advisory lock (keyed by the database and the schema), so at any moment only
 * one of them deletes. The sweeper only tries it ({@link sweep}: the others skip that round); a
 * sweep called by hand waits for it ({@link sweepWaiting}), so its count covers everything expired
 * when it started. The batch is deleted by its keys, not by `ctid`: in a store partitioned by
 * namespace (docs/scaling-out.md) a ctid names a row only within one partition, and `ctid = ANY
 * (...)` deleted the rows at those places in every partition, expired or not.
 */
import type { Place, VectorPlace } from "./place.js";

/**
 * One batch of the sweeper's: up to $2 expired items deleted, if the sweep lock was free. $1 the
 * schema's name (the lock's key). Returns `got` (the lock) and `n` (items deleted).
 */
export const sweep = (p: Place) => `
WITH lock AS MATERIALIZED (
  -- The sweep lock of this schema, if no other sweep holds it.
  SELECT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtext('langgraph-checkpoint-pg:store-sweep'), pg_catalog.hashtext(pg_catalog.concat(pg_catalog.current_database(), '.', $1::text))) AS got
), gone AS (
  -- The expired items, oldest expiry first, skipping rows another transaction holds.
  DELETE FROM ${p.s}.store_items it
   USING (SELECT ns_key, key FROM ${p.s}.store_items WHERE expires_at <= pg_catalog.now() AND (SELECT got FROM lock)
           ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) x
   WHERE it.ns_key = x.ns_key AND it.key = x.key RETURNING 1
)
SELECT (SELECT got FROM lock) AS got, (SELECT pg_catalog.count(*) FROM gone)::int AS n`;

/** {@link sweep} that waits for the sweep lock (`sweepExpiredItems()`). $1 the schema's name, $2 the batch size. */
export const sweepWaiting = (p: Place) => `
WITH lock AS MATERIALIZED (
  -- The sweep lock of this schema, once the sweep holding it commits.
  SELECT (SELECT true FROM (SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('langgraph-checkpoint-pg:store-sweep'), pg_catalog.hashtext(pg_catalog.concat(pg_catalog.current_database(), '.', $1::text)))) l) AS got
), gone AS (
  -- The expired items, oldest expiry first, skipping rows another transaction holds.
  DELETE FROM ${p.s}.store_items it
   USING (SELECT ns_key, key FROM ${p.s}.store_items WHERE expires_at <= pg_catalog.now() AND (SELECT got FROM lock)
           ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) x
   WHERE it.ns_key = x.ns_key AND it.key = x.key RETURNING 1
)
SELECT (SELECT got FROM lock) AS got, (SELECT pg_catalog.count(*) FROM gone)::int AS n`;

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
