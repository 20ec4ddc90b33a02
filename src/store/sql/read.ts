/**
 * Reading items by key: `get` (one item) and `getMany` (a batch's gets), each also in a form that
 * refreshes TTLs in the same statement (`ttl.refreshOnRead`). An expired item is never returned,
 * swept or not. Every read returns the item's columns as {@link ItemRow}.
 *
 * A refreshing read moves the expiry of the rows it read that were put with a TTL to now + their
 * own TTL, and returns such a row only if its update touched it: the sweeper may have deleted it
 * between the read's snapshot (before its expiry) and the update (which then skips it, READ
 * COMMITTED), and a read that returns an item must leave it stored with the refreshed expiry
 * (issue 37). A row without TTL is returned as read: no sweep deletes it.
 */
import type { Place } from "./place.js";
import { minutesFromNow } from "./time.js";

/** A batch's requests, from $1 (a JSON array of `[namespace key, key]`): `op` (0-based), `ns_key`, `key`. */
const requests = `(SELECT x.ord::int - 1 AS op, x.r ->> 0 AS ns_key, x.r ->> 1 AS key
          FROM pg_catalog.jsonb_array_elements($1::jsonb) WITH ORDINALITY AS x(r, ord))`;

/** What every read returns of an item. */
export interface ItemRow {
  /** The namespace's labels joined by U+0001 (input.ts nsKey). */
  ns_key: string;
  key: string;
  value: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  /** The TTL the item was put with (minutes), or null: whether a refreshing read must find it still stored. */
  ttl_minutes: number | null;
  score?: number | string | null;
  /** The operation of the batch this row answers. */
  op?: number;
}

/** One item, if it has not expired. $1 namespace key, $2 key. */
export const get = (p: Place) => `
SELECT it.ns_key, it.key, it.value, it.created_at, it.updated_at, it.ttl_minutes
  FROM ${p.s}.store_items it
 WHERE it.ns_key = $1 AND it.key = $2 AND (it.expires_at IS NULL OR it.expires_at > pg_catalog.now())`;

/**
 * {@link get}, refreshing the item's TTL. $1 namespace key, $2 key. The update names them too
 * (not only the read row's): a store partitioned by namespace (docs/scaling-out.md) is then pruned
 * to the item's partition when planned, and the update is a primary-key lookup even on a table
 * not analyzed yet (the planner chose a hash join over the namespace).
 */
export const getRefreshing = (p: Place) => `
WITH hit AS MATERIALIZED (
  -- The item, if it has not expired.
  SELECT it.ns_key, it.key, it.value, it.created_at, it.updated_at, it.ttl_minutes
    FROM ${p.s}.store_items it
   WHERE it.ns_key = $1 AND it.key = $2 AND (it.expires_at IS NULL OR it.expires_at > pg_catalog.now())
), touch AS (
  -- Its new expiry, if it has a TTL and is still stored.
  UPDATE ${p.s}.store_items it SET expires_at = ${minutesFromNow("it.ttl_minutes")}
    FROM hit
   WHERE it.ns_key = $1 AND it.key = $2 AND it.key = hit.key AND hit.ttl_minutes IS NOT NULL
  RETURNING it.ns_key, it.key
)
SELECT hit.ns_key, hit.key, hit.value, hit.created_at, hit.updated_at, hit.ttl_minutes
  FROM hit
 WHERE hit.ttl_minutes IS NULL OR (hit.ns_key, hit.key) IN (SELECT ns_key, key FROM touch)`;

/**
 * Several items: $1 a JSON array of `[namespace key, key]`; each row says which one it answers
 * (`op`, 0-based). A join on the primary key: a probe per request on a large table. It is a plain
 * join, not a LATERAL probe with LIMIT, so that Citus can send it to every shard of a store
 * distributed by namespace (a batch's keys may be on several nodes; docs/scaling-out.md).
 */
export const getMany = (p: Place) => `
SELECT r.op, it.ns_key, it.key, it.value, it.created_at, it.updated_at, it.ttl_minutes
  FROM ${requests} r
  JOIN ${p.s}.store_items it ON it.ns_key = r.ns_key AND it.key = r.key
 WHERE it.expires_at IS NULL OR it.expires_at > pg_catalog.now()`;

/**
 * {@link getMany}, refreshing the items' TTLs. $1 a JSON array of `[namespace key, key]`. The
 * keys travel inside the JSON parameter, so the update can only name the read rows' (a batch is
 * planned over every partition of a partitioned store: test/scaling/audit.test.ts).
 */
export const getManyRefreshing = (p: Place) => `
WITH hit AS MATERIALIZED (
  -- The items asked for that have not expired.
  SELECT r.op, it.ns_key, it.key, it.value, it.created_at, it.updated_at, it.ttl_minutes
    FROM ${requests} r
    JOIN ${p.s}.store_items it ON it.ns_key = r.ns_key AND it.key = r.key
   WHERE it.expires_at IS NULL OR it.expires_at > pg_catalog.now()
), touch AS (
  -- The new expiry of each one that has a TTL and is still stored.
  UPDATE ${p.s}.store_items it SET expires_at = ${minutesFromNow("it.ttl_minutes")}
    FROM hit
   WHERE it.ns_key = hit.ns_key AND it.key = hit.key AND hit.ttl_minutes IS NOT NULL
  RETURNING it.ns_key, it.key
)
SELECT hit.op, hit.ns_key, hit.key, hit.value, hit.created_at, hit.updated_at, hit.ttl_minutes
  FROM hit
 WHERE hit.ttl_minutes IS NULL OR (hit.ns_key, hit.key) IN (SELECT ns_key, key FROM touch)`;
