/**
 * Writing items: `put` and `deleteItem` (one item, the store without an index), and `write`, all
 * the puts and deletes of a batch in one statement (also a put of a store with an index), with
 * `writeWithVectors` their embeddings too.
 *
 * A put inserts the item or replaces its value; its expiry is now + its TTL (minutes), or NULL.
 * `updated_at` moves forward by at least a millisecond, so that two puts are never equal at the
 * precision of a JavaScript Date. A delete takes the item's vectors along (ON DELETE CASCADE).
 */
import type { Place, VectorPlace } from "./place.js";
import { afterMillisecond } from "./time.js";

/** One put or delete of a batch, as {@link write} takes it (JSON). */
export interface WriteRow {
  /** The namespace's key (input.ts nsKey). */
  ns: string;
  key: string;
  /** JSON text of the value; absent: delete. */
  value?: string;
  /** Minutes; absent: none. */
  ttl?: number;
}

/** The vector rows a put writes (the item's rows not named here are deleted). */
export interface VectorRow {
  ns: string;
  key: string;
  field: string;
  text: string;
  /** pgvector's text form, `[0.1,0.2,...]`. */
  embedding: string;
}

/** One put. $1 namespace key, $2 key, $3 value (JSON text), $4 TTL in minutes | NULL. */
export const put = (p: Place) => `
INSERT INTO ${p.s}.store_items AS it (ns_key, key, value, expires_at, ttl_minutes)
VALUES ($1, $2, $3::jsonb, CASE WHEN $4::float8 IS NULL THEN NULL ELSE pg_catalog.now() + pg_catalog.make_interval(secs => $4::float8 * 60) END, $4::float8)
ON CONFLICT (ns_key, key) DO UPDATE
   SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, ttl_minutes = EXCLUDED.ttl_minutes,
       updated_at = GREATEST(EXCLUDED.updated_at, ${afterMillisecond("it.updated_at")})`;

/** One delete. $1 namespace key, $2 key. */
export const deleteItem = (p: Place) => `DELETE FROM ${p.s}.store_items WHERE ns_key = $1 AND key = $2`;

/**
 * The puts and deletes of a batch, each item once (the last one called: batch.ts). $1 a JSON
 * array of {@link WriteRow}.
 */
export const write = (p: Place) => `
WITH req AS MATERIALIZED (
  -- The writes, read once.
  SELECT r.x ->> 'ns' AS ns_key, r.x ->> 'key' AS key, r.x ->> 'value' AS value, (r.x ->> 'ttl')::float8 AS ttl
    FROM pg_catalog.jsonb_array_elements($1::jsonb) AS r(x)
),
-- The deletes (no value).
del AS (DELETE FROM ${p.s}.store_items it USING req WHERE req.value IS NULL AND it.ns_key = req.ns_key AND it.key = req.key),
-- The puts, as put does.
ins AS (
  INSERT INTO ${p.s}.store_items AS it (ns_key, key, value, expires_at, ttl_minutes)
  SELECT ns_key, key, value::jsonb, CASE WHEN ttl IS NULL THEN NULL ELSE pg_catalog.now() + pg_catalog.make_interval(secs => ttl * 60) END, ttl
    FROM req WHERE value IS NOT NULL
  ON CONFLICT (ns_key, key) DO UPDATE
     SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, ttl_minutes = EXCLUDED.ttl_minutes,
         updated_at = GREATEST(EXCLUDED.updated_at, ${afterMillisecond("it.updated_at")})
)
SELECT 1 AS done`;

/**
 * {@link write} with the embeddings of the items put: $1 a JSON array of {@link WriteRow}, $2 one
 * of {@link VectorRow}. An item put keeps exactly the vector rows $2 names for it; a delete's go
 * with the item.
 */
export const writeWithVectors = (p: VectorPlace) => `
WITH req AS MATERIALIZED (
  -- The writes, read once.
  SELECT r.x ->> 'ns' AS ns_key, r.x ->> 'key' AS key, r.x ->> 'value' AS value, (r.x ->> 'ttl')::float8 AS ttl
    FROM pg_catalog.jsonb_array_elements($1::jsonb) AS r(x)
),
-- The deletes (no value).
del AS (DELETE FROM ${p.s}.store_items it USING req WHERE req.value IS NULL AND it.ns_key = req.ns_key AND it.key = req.key),
-- The puts, as put does.
ins AS (
  INSERT INTO ${p.s}.store_items AS it (ns_key, key, value, expires_at, ttl_minutes)
  SELECT ns_key, key, value::jsonb, CASE WHEN ttl IS NULL THEN NULL ELSE pg_catalog.now() + pg_catalog.make_interval(secs => ttl * 60) END, ttl
    FROM req WHERE value IS NOT NULL
  ON CONFLICT (ns_key, key) DO UPDATE
     SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, ttl_minutes = EXCLUDED.ttl_minutes,
         updated_at = GREATEST(EXCLUDED.updated_at, ${afterMillisecond("it.updated_at")})
),
vec AS MATERIALIZED (
  -- The vector rows of the items put, read once.
  SELECT v.x ->> 'ns' AS ns_key, v.x ->> 'key' AS key, v.x ->> 'field' AS field_path, v.x ->> 'text' AS text_content, v.x ->> 'embedding' AS embedding
    FROM pg_catalog.jsonb_array_elements($2::jsonb) AS v(x)
),
-- An item put loses the vector rows of fields it no longer embeds.
vdel AS (
  DELETE FROM ${p.s}.store_item_vectors v USING req
   WHERE req.value IS NOT NULL AND v.ns_key = req.ns_key AND v.key = req.key
     AND NOT EXISTS (SELECT 1 FROM vec WHERE vec.ns_key = v.ns_key AND vec.key = v.key AND vec.field_path = v.field_path)
),
-- And stores those it embeds.
vins AS (
  INSERT INTO ${p.s}.store_item_vectors (ns_key, key, field_path, text_content, embedding)
  SELECT ns_key, key, field_path, text_content, embedding::${p.ext}.vector FROM vec
  ON CONFLICT (ns_key, key, field_path) DO UPDATE SET text_content = EXCLUDED.text_content, embedding = EXCLUDED.embedding
)
SELECT 1 AS done`;
