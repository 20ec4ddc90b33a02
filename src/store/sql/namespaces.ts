/**
 * Listing namespaces (`listNamespaces`, and a batch's listings in one statement): the distinct
 * namespaces, matched by their labels, truncated to a depth, in label order, paged; read from the
 * namespace index (store_items_ns_key) in its order. One row per listing (`op`), its page as one
 * JSON array: a row per namespace costs more to send and parse than the listing itself.
 *
 * No expiry test: the keys alone answer. A namespace whose items all expired is listed until the
 * sweep deletes them, as in the official store.
 */
import { STORE_LIMITS } from "../input.js";
import type { Place } from "./place.js";
import { type Params, prefixRange } from "./params.js";

/** A LangGraph match condition: labels at the start (prefix) or the end (suffix) of a namespace, `"*"` matching any one label. */
export interface MatchCondition {
  matchType: "prefix" | "suffix";
  path: string[];
}

/** What one listing asks for. */
export interface Listing {
  conditions: MatchCondition[];
  maxDepth?: number;
  limit: number;
  offset: number;
}

/**
 * One listing; `op` numbers it within a batch. Parameters, from where `params` stands: those of
 * the match conditions ({@link matching}), then limit and offset, then (below a depth of 64
 * labels, beyond 8) the pattern that truncates ({@link truncated}).
 */
export function listNamespaces(p: Place, op: number, listing: Listing, params: Params): string {
  const where = matching(listing.conditions, params);
  const limit = params.add(listing.limit, "bigint");
  const offset = params.add(listing.offset, "bigint");
  if (listing.maxDepth === undefined || listing.maxDepth >= STORE_LIMITS.labels) {
    return `
SELECT ${op} AS op, pg_catalog.json_agg(l.ns_key ORDER BY l.ns_key) AS ns
  FROM (SELECT DISTINCT it.ns_key FROM ${p.s}.store_items it ${where} ORDER BY it.ns_key LIMIT ${limit} OFFSET ${offset}) l`;
  }
  // The distinct keys (the index's entries, deduplicated), each cut to the depth, then distinct again: matched and paged after truncation.
  const cut = truncated("d.ns_key", listing.maxDepth, params);
  return `
SELECT ${op} AS op, pg_catalog.json_agg(l.ns_key ORDER BY l.ns_key) AS ns
  FROM (SELECT DISTINCT (${cut}) COLLATE "C" AS ns_key
          FROM (SELECT DISTINCT it.ns_key FROM ${p.s}.store_items it ${where}) d
         ORDER BY 1 LIMIT ${limit} OFFSET ${offset}) l`;
}

/** A batch's listings (each from {@link listNamespaces}, numbered by their position) in one statement. */
export const listingsOfBatch = (listings: string[]): string =>
  listings.length === 1 ? listings[0]! : listings.map((l) => `(${l})`).join(" UNION ALL ");

/**
 * `WHERE` and the match conditions of a listing (its items aliased `it`), or nothing for none. A
 * plain prefix is a range of keys ({@link prefixRange}); a suffix, or a prefix with `"*"`, reads
 * the labels.
 */
function matching(conditions: readonly MatchCondition[], params: Params): string {
  const each = conditions.map(({ matchType, path }) => {
    if (path.length === 0) return undefined;
    if (matchType === "prefix" && !path.includes("*")) return prefixRange("it.ns_key", path, params);
    const labels = "(pg_catalog.string_to_array(it.ns_key, pg_catalog.chr(1)))";
    const parts = [`pg_catalog.cardinality(${labels}) >= ${path.length}`];
    path.forEach((label, i) => {
      if (label === "*") return;
      const at = matchType === "prefix" ? `${i + 1}` : `pg_catalog.cardinality(${labels}) - ${path.length - 1 - i}`;
      parts.push(`${labels}[${at}] = ${params.add(label, "text")}`);
    });
    return parts.join(" AND ");
  });
  const conds = each.filter((c): c is string => c !== undefined);
  return conds.length ? `WHERE ${conds.join(" AND ")}` : "";
}

/**
 * A namespace key cut to its first `depth` labels (the whole key when it has fewer). Up to 8
 * labels, its labels taken one by one (split_part: a regular expression per key costs about three
 * times more, measured at two labels); beyond, one regular expression (a parameter).
 */
function truncated(column: string, depth: number, params: Params): string {
  if (depth > 8) return `pg_catalog.substring(${column}, ${params.add(`^[^\u0001]*(?:\u0001[^\u0001]*){0,${depth - 1}}`, "text")})`;
  const sep = "pg_catalog.chr(1)";
  const first = Array.from({ length: depth }, (_, i) => `pg_catalog.split_part(${column}, ${sep}, ${i + 1})`).join(` || ${sep} || `);
  // Keys of fewer labels (fewer than depth - 1 separators) stay whole.
  const separators = `pg_catalog.octet_length(${column}) - pg_catalog.octet_length(pg_catalog.replace(${column}, ${sep}, ''))`;
  return `CASE WHEN ${separators} >= ${depth - 1} THEN ${first} ELSE ${column} END`;
}
