/**
 * Ranking by vectors: the statement of a vector search, and of a hybrid one (vectors and text).
 * Each reads the nearest vectors first, in the order of the pgvector index (HNSW or IVFFlat) when
 * the planner finds that cheaper (`ORDER BY embedding <=> $q LIMIT k`, the shape an index
 * answers; a narrow namespace or a small table is read by its key and sorted instead, which is
 * exact), with the items' filters applied as the index yields them. When those candidates cannot
 * be the whole answer (the filters left fewer items than the page needs, and no candidate fell
 * below `similarityThreshold`), the same statement ranks every vector of the namespaces instead,
 * exactly: a filter never costs results. The search settings (`hnsw.ef_search`,
 * `ivfflat.probes`, pgvector 0.8's iterative scans, which keep reading the index past rows a
 * filter drops) are set for this statement alone (`set_config(..., true)`), before the index is
 * read.
 *
 * An item is scored by its best-matching text: cosine similarity, 1 / (1 + l2 distance), or the
 * inner product (higher is better for each). Built per call, as search.ts's statements are.
 */
import { vectorText, type DistanceMetric, type VectorIndexType } from "../vector.js";
import type { VectorPlace } from "./place.js";
import { and, type Params, prefixRange } from "./params.js";

/** How a search reads the index: the store's index, its search settings, and what the server's pgvector can do. */
export interface VectorTuning {
  indexType: VectorIndexType;
  /** `hnsw.ef_search` for this search; undefined: the server's, raised to the candidates wanted where there are no iterative scans. */
  ef: number | undefined;
  /** `ivfflat.probes` for this search; undefined: the server's. */
  probes: number | undefined;
  /** pgvector 0.8 or later: iterative index scans (turned on, relaxed order, unless the server set them). */
  iterativeScan: boolean;
  /** Candidate vectors read per item the page needs (the fields an item embeds, usually). */
  fanout: number;
}

/** What a vector search asks for. */
export interface VectorSearch {
  prefix: string[];
  /** The compiled filter (filter.ts), over `it.value`. */
  filter?: string;
  query: number[];
  metric: DistanceMetric;
  threshold?: number;
  limit: number;
  offset: number;
}

const OPERATOR: Record<DistanceMetric, string> = { cosine: "<=>", l2: "<->", inner_product: "<#>" };
const SCORE: Record<DistanceMetric, (distance: string) => string> = {
  cosine: (d) => `1 - ${d}`,
  l2: (d) => `1 / (1 + ${d})`,
  inner_product: (d) => `-(${d})`,
};

/**
 * The placeholders both statements share, added in this order: the query vector, the candidate
 * vectors to read, the threshold, the prefix's range (for the candidates), the search settings',
 * the item count a page needs, the prefix's range again (for the exact ranking); and the metric's
 * `distance` and `score` of a vector row aliased `alias`.
 */
function shared(p: VectorPlace, where: VectorSearch, tuning: VectorTuning, params: Params) {
  const q = params.add(vectorText(where.query), `${p.ext}.vector`);
  const need = where.limit + where.offset;
  const candidates = params.add(need * Math.max(1, tuning.fanout), "bigint");
  const t = where.threshold === undefined ? undefined : params.add(where.threshold, "float8");
  const candidatesInPrefix = prefixRange("v.ns_key", where.prefix, params);
  const settings = searchSettings(tuning, candidates, params);
  const pageItems = params.add(need, "bigint");
  const vectorsInPrefix = prefixRange("v.ns_key", where.prefix, params);
  const distance = (alias: string) => `(${alias}.embedding OPERATOR(${p.ext}.${OPERATOR[where.metric]}) ${q})`;
  const score = (alias: string) => SCORE[where.metric](distance(alias));
  // A score that counts: at least the threshold, or any.
  const reaching = (v: string) => (t === undefined ? `${v} IS NOT NULL` : `${v} >= ${t}`);
  return { t, candidates, candidatesInPrefix, settings, pageItems, vectorsInPrefix, distance, score, reaching };
}

/**
 * A vector search; `op` numbers it within a batch. Parameters, numbered from where `params`
 * stands: the filter's (compiled by the caller, first), those of {@link shared}, limit, offset.
 */
export function vectorSearch(p: VectorPlace, op: number, where: VectorSearch, tuning: VectorTuning, params: Params): string {
  const { t, candidates, candidatesInPrefix, settings, pageItems, vectorsInPrefix, distance, score, reaching } = shared(p, where, tuning, params);
  const limit = params.add(where.limit, "bigint");
  const offset = params.add(where.offset, "bigint");
  return `
WITH cand AS MATERIALIZED (
  -- The nearest vectors of matching items: the index's order when the planner takes it (the search settings set first).
  SELECT v.ns_key, v.key, (${score("v")})::float8 AS vscore
    FROM ${p.s}.store_item_vectors v JOIN ${p.s}.store_items it ON it.ns_key = v.ns_key AND it.key = v.key
   WHERE v.embedding IS NOT NULL${and(candidatesInPrefix)} AND (it.expires_at IS NULL OR it.expires_at > pg_catalog.now())${and(where.filter)}${and(settings)}
   ORDER BY ${distance("v")} LIMIT ${candidates}
), best AS MATERIALIZED (
  -- Each candidate item's best score.
  SELECT ns_key, key, pg_catalog.max(vscore) AS vscore FROM cand GROUP BY ns_key, key
), ok AS MATERIALIZED (
  -- The candidates are the answer when they hold a page of items reaching the threshold (no item left out can rank
  -- above one of those), or when one fell below it (every item reaching it is among them).
  SELECT (SELECT pg_catalog.count(*) FROM best WHERE ${reaching("vscore")}) >= ${pageItems}${t === undefined ? "" : ` OR EXISTS (SELECT 1 FROM cand WHERE vscore < ${t})`} AS ok
)
SELECT * FROM (
  -- The candidates' items.
  SELECT * FROM (SELECT ${op} AS op, it.ns_key, it.key, it.value, it.created_at, it.updated_at, it.ttl_minutes, b.vscore AS score
                   FROM best b JOIN ${p.s}.store_items it ON it.ns_key = b.ns_key AND it.key = b.key${t === undefined ? "" : ` WHERE b.vscore >= ${t}`}) a
   WHERE (SELECT ok FROM ok)
  UNION ALL
  -- Or every vector of the namespaces, each item's best: exact.
  SELECT * FROM (SELECT ${op} AS op, it.ns_key, it.key, it.value, it.created_at, it.updated_at, it.ttl_minutes, b.vscore AS score
                   FROM (SELECT v.ns_key, v.key, pg_catalog.max(${score("v")})::float8 AS vscore
                           FROM ${p.s}.store_item_vectors v
                          WHERE v.embedding IS NOT NULL${and(vectorsInPrefix)} GROUP BY v.ns_key, v.key) b
                   JOIN ${p.s}.store_items it ON it.ns_key = b.ns_key AND it.key = b.key
                  WHERE (it.expires_at IS NULL OR it.expires_at > pg_catalog.now())${and(where.filter)}${and(t === undefined ? undefined : `b.vscore >= ${t}`)}) e
   WHERE NOT (SELECT ok FROM ok)
) r
 ORDER BY score DESC, ns_key, key LIMIT ${limit} OFFSET ${offset}`;
}

/**
 * A hybrid search: {@link vectorSearch}'s candidates, scored `w * vector + (1 - w) * ts_rank`, and
 * also the items whose text matches without a close vector (an item outside the candidates
 * without a text match scores below a page of them). Parameters: the filter's, those of
 * {@link shared}, the text search configuration, the text query, the weight `w`, the prefix's
 * range (for the items), limit, offset.
 */
export function hybridSearch(p: VectorPlace, op: number, where: VectorSearch & { text: string; language: string; weight: number }, tuning: VectorTuning, params: Params): string {
  const { candidates, candidatesInPrefix, settings, pageItems, vectorsInPrefix, distance, score, reaching, t } = shared(p, where, tuning, params);
  const language = params.add(where.language, "regconfig");
  const query = params.add(where.text, "text");
  const w = params.add(where.weight, "float8");
  const inPrefix = prefixRange("it.ns_key", where.prefix, params);
  const limit = params.add(where.limit, "bigint");
  const offset = params.add(where.offset, "bigint");
  const textRank = `pg_catalog.ts_rank(pg_catalog.jsonb_to_tsvector(${language}, it.value, '["string"]'), pg_catalog.plainto_tsquery(${language}, ${query}))`;
  const textMatches = `pg_catalog.jsonb_to_tsvector(${language}, it.value, '["string"]') @@ pg_catalog.plainto_tsquery(${language}, ${query})`;
  return `
WITH cand AS MATERIALIZED (
  -- The nearest vectors of matching items: the index's order when the planner takes it (the search settings set first).
  SELECT v.ns_key, v.key, (${score("v")})::float8 AS vscore
    FROM ${p.s}.store_item_vectors v JOIN ${p.s}.store_items it ON it.ns_key = v.ns_key AND it.key = v.key
   WHERE v.embedding IS NOT NULL${and(candidatesInPrefix)} AND (it.expires_at IS NULL OR it.expires_at > pg_catalog.now())${and(where.filter)}${and(settings)}
   ORDER BY ${distance("v")} LIMIT ${candidates}
), best AS MATERIALIZED (
  -- Each candidate item's best score.
  SELECT ns_key, key, pg_catalog.max(vscore) AS vscore FROM cand GROUP BY ns_key, key
), ok AS MATERIALIZED (
  -- The candidates are the answer when they hold a page of items reaching the threshold, or when one fell below it.
  SELECT (SELECT pg_catalog.count(*) FROM best WHERE ${reaching("vscore")}) >= ${pageItems}${t === undefined ? "" : ` OR EXISTS (SELECT 1 FROM cand WHERE vscore < ${t})`} AS ok
)
SELECT * FROM (
  -- The candidates' items and the text matches, each with its best vector.
  SELECT * FROM (SELECT ${op} AS op, it.ns_key, it.key, it.value, it.created_at, it.updated_at, it.ttl_minutes,
                        (${w} * coalesce(b.vscore, 0) + (1 - ${w}) * ${textRank})::float8 AS score
                   FROM ${p.s}.store_items it
                  CROSS JOIN LATERAL (SELECT pg_catalog.max(${score("v")})::float8 AS vscore
                                        FROM ${p.s}.store_item_vectors v
                                       WHERE v.ns_key = it.ns_key AND v.key = it.key AND v.embedding IS NOT NULL) b
                  WHERE ${inPrefix === undefined ? "" : `${inPrefix} AND `}(it.expires_at IS NULL OR it.expires_at > pg_catalog.now())${and(where.filter)}
                    AND (EXISTS (SELECT 1 FROM cand c WHERE c.ns_key = it.ns_key AND c.key = it.key) OR ${textMatches})
                    AND (${reaching("b.vscore")} OR ${textMatches})) a
   WHERE (SELECT ok FROM ok)
  UNION ALL
  -- Or every item of the namespaces, with its best vector if it has one: exact.
  SELECT * FROM (SELECT ${op} AS op, it.ns_key, it.key, it.value, it.created_at, it.updated_at, it.ttl_minutes,
                        (${w} * coalesce(b.vscore, 0) + (1 - ${w}) * ${textRank})::float8 AS score
                   FROM ${p.s}.store_items it
                   LEFT JOIN (SELECT v.ns_key, v.key, pg_catalog.max(${score("v")})::float8 AS vscore
                                FROM ${p.s}.store_item_vectors v
                               WHERE v.embedding IS NOT NULL${and(vectorsInPrefix)} GROUP BY v.ns_key, v.key) b
                     ON it.ns_key = b.ns_key AND it.key = b.key
                  WHERE ${inPrefix === undefined ? "" : `${inPrefix} AND `}(it.expires_at IS NULL OR it.expires_at > pg_catalog.now())${and(where.filter)}
                    AND (${reaching("b.vscore")} OR ${textMatches})) e
   WHERE NOT (SELECT ok FROM ok)
) r
 ORDER BY score DESC, ns_key, key LIMIT ${limit} OFFSET ${offset}`;
}

/**
 * `set_config` of each search setting, as one condition that is true: a one-time filter, run
 * before any row is read; undefined when the server's settings stand. `candidates`: the
 * placeholder of the candidate count.
 */
function searchSettings(tuning: VectorTuning, candidates: string, params: Params): string | undefined {
  const set = (name: string, value: string) => `pg_catalog.set_config('${name}', ${value}, true)`;
  const iterative = (am: string) =>
    set(`${am}.iterative_scan`, `CASE pg_catalog.current_setting('${am}.iterative_scan') WHEN 'off' THEN 'relaxed_order' ELSE pg_catalog.current_setting('${am}.iterative_scan') END`);
  const calls: string[] = [];
  if (tuning.indexType === "hnsw") {
    if (tuning.ef !== undefined) calls.push(set("hnsw.ef_search", params.add(String(tuning.ef), "text")));
    // Without iterative scans an HNSW scan returns at most ef_search rows: at least as many as the candidates wanted.
    else if (!tuning.iterativeScan) calls.push(set("hnsw.ef_search", `GREATEST(pg_catalog.current_setting('hnsw.ef_search')::int, ${candidates})::text`));
    if (tuning.iterativeScan) calls.push(iterative("hnsw"));
  } else {
    if (tuning.probes !== undefined) calls.push(set("ivfflat.probes", params.add(String(tuning.probes), "text")));
    if (tuning.iterativeScan) calls.push(iterative("ivfflat"));
  }
  return calls.length === 0 ? undefined : `(SELECT pg_catalog.concat(${calls.join(", ")})) IS NOT NULL`;
}
