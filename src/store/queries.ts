/**
 * The store's statements, one per operation (get, put, delete, search,
 * listNamespaces), and for a batch one per kind of operation: its gets in
 * one statement, its searches in one, its namespace listings in one, and all
 * of its puts and deletes in one. Names come from the drizzle table
 * (`satisfies` below: renaming a column there is a type error here).
 */
import type { Table } from "drizzle-orm";
import { quoteIdent } from "../validate.js";
import { STORE_LIMITS } from "./input.js";
import { COLUMNS, LIVE, Params, matchCondition, prefixCondition } from "./sql.js";
import type { storeItems } from "./schema.js";

type Names<T extends Table> = { readonly table: T["_"]["name"] } & { readonly [K in keyof T["_"]["columns"]]: T["_"]["columns"][K]["_"]["name"] };

/** The SQL names of the store's table and columns. */
export const ITEMS = {
  table: "store_items",
  nsKey: "ns_key",
  key: "key",
  value: "value",
  createdAt: "created_at",
  updatedAt: "updated_at",
  expiresAt: "expires_at",
  ttlMinutes: "ttl_minutes",
} as const satisfies Names<typeof storeItems>;

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

/** A TTL (minutes) from now, or NULL. */
const EXPIRES = (ttl: string) => `CASE WHEN ${ttl} IS NULL THEN NULL ELSE pg_catalog.now() + pg_catalog.make_interval(secs => ${ttl} * 60) END`;

/** One put or delete of a batch, as the write statement takes it (JSON). */
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

/**
 * A namespace key cut to its first `depth` labels (the whole key when it has
 * fewer). Up to 8 labels, its labels taken one by one (split_part: a
 * regular expression per key costs about three times more, measured at two
 * labels); beyond, one regular expression.
 */
function truncated(column: string, depth: number, params: Params): string {
  if (depth > 8) return `pg_catalog.substring(${column}, ${params.add(`^[^\u0001]*(?:\u0001[^\u0001]*){0,${depth - 1}}`, "text")})`;
  const sep = "pg_catalog.chr(1)";
  const first = Array.from({ length: depth }, (_, i) => `pg_catalog.split_part(${column}, ${sep}, ${i + 1})`).join(` || ${sep} || `);
  // Keys of fewer labels (fewer than depth - 1 separators) stay whole.
  const separators = `pg_catalog.octet_length(${column}) - pg_catalog.octet_length(pg_catalog.replace(${column}, ${sep}, ''))`;
  return `CASE WHEN ${separators} >= ${depth - 1} THEN ${first} ELSE ${column} END`;
}

export function storeQueries(schema: string) {
  const s = quoteIdent(schema);
  const items = `${s}.${ITEMS.table}`;
  const vectors = `${s}.store_item_vectors`;

  /**
   * Reads that refresh TTLs: the rows read, and in the same statement the
   * expiry of those put with a TTL moved to now + their own TTL. Such a row
   * is returned only if the update touched it: the sweeper may have deleted
   * it between the read's snapshot (before its expiry) and the update (the
   * update then skips it, READ COMMITTED), and a read that returns an item
   * must leave it stored with the refreshed expiry (issue 37). A row without
   * TTL is returned as read: no sweep deletes it. `ns` (and `key`): the
   * parameter naming the one namespace (and key) read, when there is one: the
   * update then names it too, so a store partitioned by namespace (docs/scaling-out.md) is pruned to its partition when planned, not scanned whole,
   * and a get's update is a primary-key lookup even on a table not analyzed.
   */
  const refreshing = (hits: string, columns: string, ns = "hit.ns_key", key = "hit.key") =>
    `WITH hit AS MATERIALIZED (${hits}),
     touch AS (UPDATE ${items} it SET expires_at = pg_catalog.now() + pg_catalog.make_interval(secs => it.ttl_minutes * 60)
                 FROM hit WHERE it.ns_key = ${ns} AND it.key = ${key} AND it.key = hit.key AND hit.ttl_minutes IS NOT NULL
               RETURNING it.ns_key, it.key)
     SELECT ${columns} FROM hit WHERE hit.ttl_minutes IS NULL OR (hit.ns_key, hit.key) IN (SELECT ns_key, key FROM touch)`;

  return {
    items,
    vectors,

    /** One item by namespace key and key. */
    get(refresh: boolean): string {
      const hit = `SELECT ${COLUMNS("it")} FROM ${items} it WHERE it.ns_key = $1 AND it.key = $2 AND ${LIVE("it")}`;
      return refresh ? refreshing(hit, COLUMNS("hit"), "$1", "$2") : hit;
    },

    /** Several items: `$1` is a JSON array of `[namespace key, key]`; each row says which (`op`, 0-based). */
    getMany(refresh: boolean): string {
      // LATERAL ... LIMIT 1: one primary-key probe per request, never a hash join over the whole table.
      const hit = `SELECT r.ord::int - 1 AS op, ${COLUMNS("it")}
                     FROM pg_catalog.jsonb_array_elements($1::jsonb) WITH ORDINALITY AS r(x, ord)
                     CROSS JOIN LATERAL (SELECT * FROM ${items} i
                                          WHERE i.ns_key = r.x ->> 0 AND i.key = r.x ->> 1 AND ${LIVE("i")}
                                          LIMIT 1) it`;
      return refresh ? refreshing(hit, `hit.op, ${COLUMNS("hit")}`) : hit;
    },

    /**
     * One put: insert, or replace the value of the item there. `updated_at`
     * moves forward by at least a millisecond, so that two puts are never
     * equal at the precision of a JavaScript Date.
     */
    put: `INSERT INTO ${items} AS it (ns_key, key, value, expires_at, ttl_minutes)
          VALUES ($1, $2, $3::jsonb, ${EXPIRES("$4::float8")}, $4::float8)
          ON CONFLICT (ns_key, key) DO UPDATE
            SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, ttl_minutes = EXCLUDED.ttl_minutes,
                updated_at = GREATEST(pg_catalog.now(), it.updated_at + interval '1 millisecond')`,

    delete: `DELETE FROM ${items} WHERE ns_key = $1 AND key = $2`,

    /**
     * The puts and deletes of a batch (one per item, the last one called),
     * and with `withVectors` the vector rows of the put items: `$1` the
     * writes, `$2` the vector rows, `$3` the items whose vectors are
     * replaced (those put; a delete takes its vectors along, ON DELETE CASCADE).
     */
    write(withVectors: boolean): string {
      const req = `SELECT r.x ->> 'ns' AS ns_key, r.x ->> 'key' AS key,
                          r.x ->> 'value' AS value, (r.x ->> 'ttl')::float8 AS ttl
                     FROM pg_catalog.jsonb_array_elements($1::jsonb) AS r(x)`;
      const parts = [
        `req AS MATERIALIZED (${req})`,
        `del AS (DELETE FROM ${items} it USING req WHERE req.value IS NULL AND it.ns_key = req.ns_key AND it.key = req.key)`,
        `ins AS (INSERT INTO ${items} AS it (ns_key, key, value, expires_at, ttl_minutes)
                 SELECT ns_key, key, value::jsonb, ${EXPIRES("ttl")}, ttl FROM req WHERE value IS NOT NULL
                 ON CONFLICT (ns_key, key) DO UPDATE
                   SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at, ttl_minutes = EXCLUDED.ttl_minutes,
                       updated_at = GREATEST(pg_catalog.now(), it.updated_at + interval '1 millisecond'))`,
      ];
      if (withVectors) {
        parts.push(
          `vec AS MATERIALIZED (SELECT v.x ->> 'ns' AS ns_key, v.x ->> 'key' AS key,
                                       v.x ->> 'field' AS field_path, v.x ->> 'text' AS text_content, v.x ->> 'embedding' AS embedding
                                  FROM pg_catalog.jsonb_array_elements($2::jsonb) AS v(x))`,
          `vdel AS (DELETE FROM ${vectors} v USING req
                     WHERE req.value IS NOT NULL AND v.ns_key = req.ns_key AND v.key = req.key
                       AND NOT EXISTS (SELECT 1 FROM vec WHERE vec.ns_key = v.ns_key AND vec.key = v.key AND vec.field_path = v.field_path))`,
          `vins AS (INSERT INTO ${vectors} (ns_key, key, field_path, text_content, embedding)
                    SELECT ns_key, key, field_path, text_content, embedding::@VECTOR@ FROM vec
                    ON CONFLICT (ns_key, key, field_path) DO UPDATE SET text_content = EXCLUDED.text_content, embedding = EXCLUDED.embedding)`,
        );
      }
      return `WITH ${parts.join(",\n")} SELECT 1 AS done`;
    },

    /**
     * Namespaces (truncated to `maxDepth` labels), distinct, in label order,
     * matched and paged after truncation, read from the namespace index in
     * its order. One row per listing of a batch (`op`), its page as one JSON
     * array: a row per namespace costs more to send and parse than the listing itself.
     */
    listNamespaces(op: number, where: { conditions: { matchType: "prefix" | "suffix"; path: string[] }[]; maxDepth?: number; limit: number; offset: number }, params: Params): string {
      // No expiry test: the keys alone answer. A namespace whose items all expired is listed until the
      // sweep deletes them, as in the official store.
      const conds = where.conditions.map((c) => matchCondition("it", c, params)).filter((c): c is string => c !== undefined);
      const filter = conds.length ? `WHERE ${conds.join(" AND ")}` : "";
      const page = `LIMIT ${params.add(where.limit, "bigint")} OFFSET ${params.add(where.offset, "bigint")}`;
      // The distinct keys, in the order of store_items_ns_key (deduplicated: one entry per namespace), stopping at the page's end.
      const keys = `SELECT DISTINCT it.ns_key FROM ${items} it ${filter}`;
      const listed =
        where.maxDepth === undefined || where.maxDepth >= STORE_LIMITS.labels
          ? `${keys} ORDER BY it.ns_key ${page}`
          : `SELECT DISTINCT (${truncated("d.ns_key", where.maxDepth, params)}) COLLATE "C" AS ns_key FROM (${keys}) d ORDER BY 1 ${page}`;
      return `SELECT ${op} AS op, pg_catalog.json_agg(l.ns_key ORDER BY l.ns_key) AS ns FROM (${listed}) l`;
    },

    /**
     * Items under a namespace prefix, filtered, newest update first, paged.
     * With `text`, only those matching the text query (full-text over the
     * value's strings, or a substring of them), best match first.
     */
    search(
      op: number,
      where: { prefix: string[]; filter?: string; text?: { query: string; language: string }; limit: number; offset: number },
      params: Params,
    ): string {
      const conds = [LIVE("it"), prefixCondition("it.ns_key", where.prefix, params), where.filter].filter((c): c is string => c !== undefined);
      let score = "NULL::float8";
      let order = "it.updated_at DESC, it.ns_key, it.key";
      if (where.text) {
        const lang = params.add(where.text.language, "regconfig");
        const query = params.add(where.text.query, "text");
        const doc = `pg_catalog.jsonb_to_tsvector(${lang}, it.value, '["string"]')`;
        const tsq = `pg_catalog.plainto_tsquery(${lang}, ${query})`;
        const strings = `pg_catalog.jsonb_path_query_array(it.value, 'strict $.** ? (@.type() == "string")')::text`;
        const like = params.add(`%${where.text.query.replace(/[\\%_]/g, (c) => `\\${c}`)}%`, "text");
        conds.push(`(${doc} @@ ${tsq} OR ${strings} ILIKE ${like})`);
        score = `pg_catalog.ts_rank(${doc}, ${tsq})::float8`;
        order = `score DESC, ${order}`;
      }
      return `SELECT ${op} AS op, ${COLUMNS("it")}, ${score} AS score FROM ${items} it
               WHERE ${conds.join(" AND ")}
               ORDER BY ${order} LIMIT ${params.add(where.limit, "bigint")} OFFSET ${params.add(where.offset, "bigint")}`;
    },

    /**
     * Searches whose results of the operations `ops` (an int[] placeholder) have their TTL refreshed, in the same
     * statement; of those, only the rows the refresh touched are returned, as in `refreshing` above. The rows keep
     * the searches' order (a filter over the materialized rows, never a join).
     */
    refreshFound: (found: string, ops: string) =>
      `WITH found AS MATERIALIZED (${found}),
       touch AS (UPDATE ${items} it SET expires_at = pg_catalog.now() + pg_catalog.make_interval(secs => it.ttl_minutes * 60)
                   FROM found WHERE found.op = ANY (${ops}) AND it.ns_key = found.ns_key AND it.key = found.key AND found.ttl_minutes IS NOT NULL
                 RETURNING it.ns_key, it.key)
       SELECT * FROM found
        WHERE found.ttl_minutes IS NULL OR NOT (found.op = ANY (${ops})) OR (found.ns_key, found.key) IN (SELECT ns_key, key FROM touch)`,

    stats: `SELECT pg_catalog.count(*)::bigint AS total_items,
                   pg_catalog.count(*) FILTER (WHERE expires_at IS NOT NULL AND expires_at <= pg_catalog.now())::bigint AS expired_items,
                   pg_catalog.count(DISTINCT ns_key)::bigint AS namespace_count,
                   pg_catalog.min(created_at) AS oldest_item, pg_catalog.max(created_at) AS newest_item
              FROM ${items}`,
  };
}

export type StoreQueries = ReturnType<typeof storeQueries>;
