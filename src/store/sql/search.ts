/**
 * Searching items without vectors: by filter (newest update first), and by text (best match
 * first); a batch's searches in one statement, and the refresh of their TTLs in that statement.
 * Vector and hybrid search are in vector-search.ts; every search returns {@link ItemRow}s with
 * `op` (the search's number in its batch) and `score`.
 *
 * A search is built per call: its filter (filter.ts) compiles to a varying number of conditions,
 * and in a batch its parameters are numbered after those of the searches before it (params.ts).
 */
import type { ItemRow } from "./read.js";
import type { Place } from "./place.js";
import { minutesFromNow } from "./time.js";
import { and, type Params, prefixRange } from "./params.js";

/** What a search without vectors asks for. */
export interface SearchWhere {
  prefix: string[];
  /** The compiled filter (filter.ts), over `it.value`. */
  filter?: string;
  limit: number;
  offset: number;
}

/**
 * Items under a namespace prefix that have not expired, filtered, newest update first, paged; `op`
 * numbers the search within its batch. Parameters, numbered from where `params` stands: the
 * filter's (compiled by the caller, first), the prefix's range ({@link prefixRange}), limit, offset.
 */
export function filterSearch(p: Place, op: number, where: SearchWhere, params: Params): string {
  const inPrefix = prefixRange("it.ns_key", where.prefix, params);
  const limit = params.add(where.limit, "bigint");
  const offset = params.add(where.offset, "bigint");
  return `
SELECT ${op} AS op, it.ns_key, it.key, it.value, it.created_at, it.updated_at, it.ttl_minutes, NULL::float8 AS score
  FROM ${p.s}.store_items it
 WHERE (it.expires_at IS NULL OR it.expires_at > pg_catalog.now())${and(inPrefix)}${and(where.filter)}
 ORDER BY it.updated_at DESC, it.ns_key, it.key LIMIT ${limit} OFFSET ${offset}`;
}

/**
 * {@link filterSearch} of the items matching a text query: full-text over the value's strings
 * (`language`, a text search configuration), or a substring of them (case-insensitive), best
 * match first (`ts_rank`, the score). Parameters: the filter's, the prefix's range, the language,
 * the query, the query as a LIKE pattern, limit, offset.
 */
export function textSearch(p: Place, op: number, where: SearchWhere & { text: { query: string; language: string } }, params: Params): string {
  const inPrefix = prefixRange("it.ns_key", where.prefix, params);
  const language = params.add(where.text.language, "regconfig");
  const query = params.add(where.text.query, "text");
  const pattern = params.add(`%${where.text.query.replace(/[\\%_]/g, (c) => `\\${c}`)}%`, "text");
  const limit = params.add(where.limit, "bigint");
  const offset = params.add(where.offset, "bigint");
  return `
SELECT ${op} AS op, it.ns_key, it.key, it.value, it.created_at, it.updated_at, it.ttl_minutes,
       pg_catalog.ts_rank(pg_catalog.jsonb_to_tsvector(${language}, it.value, '["string"]'), pg_catalog.plainto_tsquery(${language}, ${query}))::float8 AS score
  FROM ${p.s}.store_items it
 WHERE (it.expires_at IS NULL OR it.expires_at > pg_catalog.now())${and(inPrefix)}${and(where.filter)}
   AND (pg_catalog.jsonb_to_tsvector(${language}, it.value, '["string"]') @@ pg_catalog.plainto_tsquery(${language}, ${query})
        OR pg_catalog.jsonb_path_query_array(it.value, 'strict $.** ? (@.type() == "string")')::text ILIKE ${pattern})
 ORDER BY score DESC, it.updated_at DESC, it.ns_key, it.key LIMIT ${limit} OFFSET ${offset}`;
}

/**
 * A batch's searches (each from {@link filterSearch}, {@link textSearch} or vector-search.ts,
 * numbered by their position) in one statement, each one's rows in its own order (`rn`).
 */
export const searchesOfBatch = (searches: string[]): string =>
  searches.length === 1
    ? searches[0]!
    : `SELECT * FROM (${searches.map((s) => `(SELECT q.*, pg_catalog.row_number() OVER () AS rn FROM (${s}) q)`).join(" UNION ALL ")}) b ORDER BY op, rn`;

/**
 * The searches `found` (one statement, {@link searchesOfBatch}), with the TTLs of the rows of the
 * searches `ops` (an int[] placeholder, added last) refreshed in the same statement: of those,
 * only the rows the refresh touched are returned, as a refreshing get does (read.ts). The rows
 * keep the searches' order (a filter over the materialized rows, never a join).
 */
export const refreshFound = (p: Place, found: string, ops: string): string => `
WITH found AS MATERIALIZED (${found}
), touch AS (
  -- The new expiry of each item a refreshing search found that has a TTL and is still stored.
  UPDATE ${p.s}.store_items it SET expires_at = ${minutesFromNow("it.ttl_minutes")}
    FROM found
   WHERE found.op = ANY (${ops}) AND it.ns_key = found.ns_key AND it.key = found.key AND found.ttl_minutes IS NOT NULL
  RETURNING it.ns_key, it.key
)
SELECT * FROM found
 WHERE found.ttl_minutes IS NULL OR NOT (found.op = ANY (${ops})) OR (found.ns_key, found.key) IN (SELECT ns_key, key FROM touch)`;
