/**
 * Ranking by vectors: the statement of a vector or hybrid search. It reads
 * the nearest vectors first, in the order of the pgvector index (HNSW or
 * IVFFlat) when the planner finds that cheaper (`ORDER BY embedding <=> $q
 * LIMIT k`, the shape an index answers; a narrow namespace or a small table
 * is read by its key and sorted instead, which is exact), with the items'
 * filters applied as the index yields them. When those candidates cannot be
 * the whole answer (the filters left fewer items than the page needs, and no
 * candidate fell below `similarityThreshold`), the same statement ranks every
 * vector of the namespaces instead, exactly: a filter never costs results.
 * The search settings (`hnsw.ef_search`, `ivfflat.probes`, pgvector 0.8's
 * iterative scans, which keep reading the index past rows a filter drops)
 * are set for this statement alone (`set_config(..., true)`), before the
 * index is read.
 */
import { quoteIdent } from "../validate.js";
import { COLUMNS, LIVE, type Params, prefixCondition } from "./sql.js";
import { SCORE, VECTOR_TABLE, inExtension, op, vectorText, type DistanceMetric, type VectorIndexType } from "./vector.js";

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

export interface VectorSearch {
  prefix: string[];
  filter?: string;
  query: number[];
  metric: DistanceMetric;
  threshold?: number;
  hybrid?: { text: string; language: string; weight: number };
  limit: number;
  offset: number;
}

/** `set_config` of each search setting, as one condition that is true: a one-time filter, run before any row is read. */
function settings(tuning: VectorTuning, candidates: string, params: Params): string | undefined {
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

/**
 * The statement of one vector (or hybrid) search; `op_` numbers it within a
 * batch. Each item is scored by its best-matching text (cosine similarity,
 * 1 / (1 + l2 distance), or the inner product); hybrid mixes in the text
 * rank, `w * vector + (1 - w) * ts_rank`, and also finds items whose text
 * matches without a close vector.
 *
 * @example
 * ```ts
 * const params = new Params();
 * const text = vectorSearchSql("public", "public", 0, { prefix: ["docs"], query: [0.1, 0.2], metric: "cosine", limit: 10, offset: 0 }, tuning, params);
 * ```
 */
export function vectorSearchSql(schema: string, extSchema: string, op_: number, where: VectorSearch, tuning: VectorTuning, params: Params): string {
  const s = quoteIdent(schema);
  const items = `${s}.store_items`;
  const vectors = `${s}.${VECTOR_TABLE}`;
  const q = params.add(vectorText(where.query), inExtension(extSchema, "vector"));
  const distance = (alias: string) => `(${alias}.embedding ${op(extSchema, where.metric)} ${q})`;
  const score = (alias: string) => SCORE[where.metric](distance(alias));
  const need = where.limit + where.offset;
  const candidates = params.add(need * Math.max(1, tuning.fanout), "bigint");
  const matching = [LIVE("it"), where.filter].filter((c): c is string => c !== undefined);
  const columns = `${op_} AS op, ${COLUMNS("it")}`;
  const t = where.threshold === undefined ? undefined : params.add(where.threshold, "float8");
  const reaching = (v: string) => (t === undefined ? `${v} IS NOT NULL` : `${v} >= ${t}`);

  // The nearest vectors of matching items: the index's order when the planner takes it.
  const candConds = ["v.embedding IS NOT NULL", prefixCondition("v.ns_key", where.prefix, params), ...matching, settings(tuning, candidates, params)];
  const cand = `SELECT v.ns_key, v.key, (${score("v")})::float8 AS vscore
                  FROM ${vectors} v JOIN ${items} it ON it.ns_key = v.ns_key AND it.key = v.key
                 WHERE ${candConds.filter(Boolean).join(" AND ")}
                 ORDER BY ${distance("v")} LIMIT ${candidates}`;
  const best = "SELECT ns_key, key, pg_catalog.max(vscore) AS vscore FROM cand GROUP BY ns_key, key";
  // The candidates are the answer when they hold a page of items reaching the threshold (no item left out
  // can rank above one of those), or when one fell below it (every item reaching it is among them).
  const ok = `SELECT (SELECT pg_catalog.count(*) FROM best WHERE ${reaching("vscore")}) >= ${params.add(need, "bigint")}${
    t === undefined ? "" : ` OR EXISTS (SELECT 1 FROM cand WHERE vscore < ${t})`
  } AS ok`;

  // Every vector of the namespaces, each item's best: exact.
  const allConds = ["v.embedding IS NOT NULL", prefixCondition("v.ns_key", where.prefix, params)].filter(Boolean);
  const allBest = `SELECT v.ns_key, v.key, pg_catalog.max(${score("v")})::float8 AS vscore FROM ${vectors} v WHERE ${allConds.join(" AND ")} GROUP BY v.ns_key, v.key`;

  let approx: string;
  let exact: string;
  if (!where.hybrid) {
    approx = `SELECT ${columns}, b.vscore AS score FROM best b JOIN ${items} it ON it.ns_key = b.ns_key AND it.key = b.key${t === undefined ? "" : ` WHERE b.vscore >= ${t}`}`;
    exact = `SELECT ${columns}, b.vscore AS score FROM (${allBest}) b JOIN ${items} it ON it.ns_key = b.ns_key AND it.key = b.key
              WHERE ${[...matching, ...(t === undefined ? [] : [`b.vscore >= ${t}`])].join(" AND ")}`;
  } else {
    const lang = params.add(where.hybrid.language, "regconfig");
    const tsq = `pg_catalog.plainto_tsquery(${lang}, ${params.add(where.hybrid.text, "text")})`;
    const doc = `pg_catalog.jsonb_to_tsvector(${lang}, it.value, '["string"]')`;
    const w = params.add(where.hybrid.weight, "float8");
    const mixed = `(${w} * coalesce(b.vscore, 0) + (1 - ${w}) * pg_catalog.ts_rank(${doc}, ${tsq}))::float8`;
    const inPrefix = [prefixCondition("it.ns_key", where.prefix, params), ...matching].filter(Boolean);
    // An item outside the candidates without a text match scores below a page of them: the candidates and the text matches, each with its best vector.
    const own = `SELECT pg_catalog.max(${score("v")})::float8 AS vscore FROM ${vectors} v WHERE v.ns_key = it.ns_key AND v.key = it.key AND v.embedding IS NOT NULL`;
    approx = `SELECT ${columns}, ${mixed} AS score FROM ${items} it CROSS JOIN LATERAL (${own}) b
               WHERE ${[...inPrefix, `(EXISTS (SELECT 1 FROM cand c WHERE c.ns_key = it.ns_key AND c.key = it.key) OR ${doc} @@ ${tsq})`, `(${reaching("b.vscore")} OR ${doc} @@ ${tsq})`].join(" AND ")}`;
    exact = `SELECT ${columns}, ${mixed} AS score FROM ${items} it LEFT JOIN (${allBest}) b ON it.ns_key = b.ns_key AND it.key = b.key
              WHERE ${[...inPrefix, `(${reaching("b.vscore")} OR ${doc} @@ ${tsq})`].join(" AND ")}`;
  }
  return `WITH cand AS MATERIALIZED (${cand}),
               best AS MATERIALIZED (${best}),
               ok AS MATERIALIZED (${ok})
          SELECT * FROM (SELECT * FROM (${approx}) a WHERE (SELECT ok FROM ok)
                         UNION ALL
                         SELECT * FROM (${exact}) e WHERE NOT (SELECT ok FROM ok)) r
           ORDER BY score DESC, ns_key, key LIMIT ${params.add(where.limit, "bigint")} OFFSET ${params.add(where.offset, "bigint")}`;
}
