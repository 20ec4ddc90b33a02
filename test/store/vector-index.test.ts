/**
 * Vector search through the pgvector index: the ranking statement reads the
 * HNSW or IVFFlat index (EXPLAIN ANALYZE of the very statement the store
 * sent), ranks as an exact search does wherever the index is exhaustive
 * (IVFFlat probing every list) or the filters leave fewer items than a page
 * (the statement then ranks every vector itself), and applies `hnsw.ef` and
 * `ivfflat.probes` to each search alone. The oracle is computed here, in
 * JavaScript, from the same deterministic embeddings.
 */
import { createHash, randomBytes } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresStore, type IndexConfig } from "../../src/index.js";
import type { PGliteLike } from "../../src/db/db.js";
import { prng } from "../helpers/random.js";
import { vectorTargets, type VectorTarget } from "../helpers/vector.js";

const DIMS = 16;
const ITEMS = 1200;
const fresh = () => `vi_${randomBytes(4).toString("hex")}`;

/** A random direction per text, the same for the same text. */
function embedding(text: string): number[] {
  const rng = prng(createHash("sha256").update(text).digest().readUInt32BE(0));
  return Array.from({ length: DIMS }, () => rng.next() - 0.5);
}
const embed = async (texts: string[]) => texts.map(embedding);
const cosine = (a: number[], b: number[]) => {
  let dot = 0;
  let na = 0;
  let nb = 0;
  a.forEach((x, i) => {
    dot += x * b[i]!;
    na += x * x;
    nb += b[i]! * b[i]!;
  });
  return dot / Math.sqrt(na * nb);
};

interface Doc {
  ns: string[];
  key: string;
  value: { title: string; body: string; n: number };
}
const docs: Doc[] = Array.from({ length: ITEMS }, (_, i) => ({
  ns: ["g", String(i % 40)],
  key: `k${i}`,
  value: { title: `title ${i}`, body: `body ${i}${i % 3 === 0 ? " memory" : ""}`, n: i % 7 },
}));

/** The exact answer: each item scored by its best field, filtered, best first, paged. */
function oracle(query: string, o: { prefix?: string[]; n?: number; threshold?: number; limit?: number; offset?: number } = {}) {
  const q = embedding(query);
  return docs
    .filter((d) => (o.prefix ?? []).every((label, i) => d.ns[i] === label) && (o.n === undefined || d.value.n === o.n))
    .map((d) => ({ key: d.key, score: Math.max(cosine(q, embedding(d.value.title)), cosine(q, embedding(d.value.body))) }))
    .filter((r) => o.threshold === undefined || r.score >= o.threshold)
    .sort((a, b) => b.score - a.score)
    .slice(o.offset ?? 0, (o.offset ?? 0) + (o.limit ?? 10));
}

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Actual Loops"?: number;
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
}
const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

const targets = await vectorTargets("vector search through the index");

describe.each(targets)("vector search through the index on %s", (_name, make) => {
  let target: VectorTarget;
  beforeAll(async () => {
    target = await make();
  });
  afterAll(() => target.close());
  const sql = async <R>(text: string, values: unknown[] = []): Promise<R[]> => (await (target.db as PGliteLike).query<R & object>(text, values)).rows;

  async function storeWith(index: Partial<IndexConfig>, items: Doc[] = docs) {
    const store = new PostgresStore(target.db as pg.Pool, { schema: fresh(), index: { dims: DIMS, embed, fields: ["title", "body"], ...index } });
    await store.setup({ adopt: false });
    for (let i = 0; i < items.length; i += 300) await store.batch(items.slice(i, i + 300).map((d) => ({ namespace: d.ns, key: d.key, value: d.value })));
    // An IVFFlat index built before its rows has one list in use: built again, its lists follow the data.
    await sql(`REINDEX INDEX ${store.schema}.store_item_vectors_embedding`);
    await sql(`ANALYZE ${store.schema}.store_item_vectors`);
    await sql(`ANALYZE ${store.schema}.store_items`);
    return store;
  }

  /** EXPLAIN ANALYZE of the last search the store sent: the plan's nodes. */
  async function lastPlan(): Promise<PlanNode[]> {
    const last = target.sent.filter((s) => s.text.includes("store_item_vectors v") && s.text.includes("ORDER BY")).at(-1)!;
    const [row] = await sql<{ "QUERY PLAN": [{ Plan: PlanNode }] | string }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${last.text}`, last.values);
    const json = row!["QUERY PLAN"];
    return nodes((typeof json === "string" ? (JSON.parse(json) as [{ Plan: PlanNode }]) : json)[0].Plan);
  }
  const indexScan = (plan: PlanNode[]) => plan.find((n) => n["Index Name"] === "store_item_vectors_embedding");
  const blocks = (n: PlanNode | undefined) => (n?.["Shared Hit Blocks"] ?? 0) + (n?.["Shared Read Blocks"] ?? 0);
  /** Did the statement rank every vector (the exact branch)? Its aggregate over the table ran. */
  const rankedAll = (plan: PlanNode[]) => plan.some((n) => n["Node Type"] === "Aggregate" && (n["Actual Loops"] ?? 0) > 0 && (n.Plans ?? []).some((c) => /store_item_vectors/.test(JSON.stringify(c)) && c["Node Type"] !== "CTE Scan"));

  const keysAndScores = (rows: { key: string; score?: number }[]) => rows.map((r) => ({ key: r.key, score: Number(r.score!.toFixed(5)) }));
  const expected = (rows: { key: string; score: number }[]) => rows.map((r) => ({ key: r.key, score: Number(r.score.toFixed(5)) }));

  describe("IVFFlat probing every list: exhaustive, so the answer must be the exact one", () => {
    let store: PostgresStore;
    beforeAll(async () => {
      store = await storeWith({ indexType: "ivfflat", ivfflat: { lists: 8, probes: 8 } });
    });

    it("reads the index for a search over every namespace, and never ranks every vector", async () => {
      expect(keysAndScores(await store.search([], { query: "query 1", mode: "vector" }))).toEqual(expected(oracle("query 1")));
      const plan = await lastPlan();
      expect(indexScan(plan), JSON.stringify(plan.map((n) => n["Node Type"]))).toBeDefined();
      expect(rankedAll(plan)).toBe(false);
    });

    it("filters, namespaces, thresholds and pages rank as the exact search does", async () => {
      for (const q of ["query 2", "query 3"]) {
        expect(keysAndScores(await store.search([], { query: q, mode: "vector", filter: { n: 3 } }))).toEqual(expected(oracle(q, { n: 3 })));
        expect(keysAndScores(await store.search(["g", "7"], { query: q, mode: "vector", limit: 5 }))).toEqual(expected(oracle(q, { prefix: ["g", "7"], limit: 5 })));
        expect(keysAndScores(await store.search([], { query: q, mode: "vector", limit: 5, offset: 7 }))).toEqual(expected(oracle(q, { limit: 5, offset: 7 })));
        // Between the 25th and the 26th score: the database computes in float4, the oracle in float8.
        const top = oracle(q, { limit: 26 });
        const threshold = (top[24]!.score + top[25]!.score) / 2;
        expect(keysAndScores(await store.search([], { query: q, mode: "vector", similarityThreshold: threshold, limit: 40 }))).toEqual(
          expected(oracle(q, { threshold, limit: 40 })),
        );
      }
    });

    it("a filter leaving fewer items than the page: the statement ranks every vector instead, and nothing is missed", async () => {
      // Namespace ["g", "5"] holds 30 items; n = 2 leaves 4 or 5 of them: fewer than the page of 10.
      const want = oracle("query 4", { prefix: ["g", "5"], n: 2 });
      expect(want.length).toBeLessThan(10);
      expect(keysAndScores(await store.search(["g", "5"], { query: "query 4", mode: "vector", filter: { n: 2 } }))).toEqual(expected(want));
      expect(rankedAll(await lastPlan())).toBe(true);
      // A threshold nobody reaches: none, also through that path.
      expect(await store.search([], { query: "query 4", mode: "vector", similarityThreshold: 1.5 })).toEqual([]);
    });

    it("hybrid: the index's candidates and the text matches, ranked as the exact mix", async () => {
      const got = await store.search([], { query: "memory 9", mode: "hybrid", vectorWeight: 0.6 });
      const qv = `[${embedding("memory 9").join(",")}]`;
      const ext = (await sql<{ s: string }>("SELECT n.nspname AS s FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"))[0]!.s;
      const want = await sql<{ key: string; score: number }>(
        `WITH b AS (SELECT ns_key, key, max(1 - (embedding OPERATOR("${ext}".<=>) $1::"${ext}".vector)) AS s FROM ${store.schema}.store_item_vectors GROUP BY 1, 2)
         SELECT it.key, (0.6 * coalesce(b.s, 0) + 0.4 * ts_rank(jsonb_to_tsvector('english', it.value, '["string"]'), plainto_tsquery('english', 'memory 9')))::float8 AS score
           FROM ${store.schema}.store_items it LEFT JOIN b USING (ns_key, key)
          WHERE b.s IS NOT NULL OR jsonb_to_tsvector('english', it.value, '["string"]') @@ plainto_tsquery('english', 'memory 9')
          ORDER BY score DESC, it.ns_key, it.key LIMIT 10`,
        [qv],
      );
      expect(keysAndScores(got)).toEqual(expected(want.map((r) => ({ key: r.key, score: Number(r.score) }))));
      expect(indexScan(await lastPlan())).toBeDefined();
    });
  });

  it("ivfflat.probes is applied to each search: more lists read with more probes, exact with all; the session keeps its own", async () => {
    const one = await storeWith({ indexType: "ivfflat", ivfflat: { lists: 8, probes: 1 } });
    await one.search([], { query: "query 5", mode: "vector" });
    const fewer = blocks(indexScan(await lastPlan()));
    const all = new PostgresStore(target.db as pg.Pool, { schema: one.schema, index: { dims: DIMS, embed, fields: ["title", "body"], indexType: "ivfflat", ivfflat: { lists: 8, probes: 8 } } });
    expect(keysAndScores(await all.search([], { query: "query 5", mode: "vector" }))).toEqual(expected(oracle("query 5")));
    expect(blocks(indexScan(await lastPlan()))).toBeGreaterThan(fewer);
    expect(await sql("SELECT pg_catalog.current_setting('ivfflat.probes') AS p")).toEqual([{ p: "1" }]);
  });

  it("hnsw.ef is applied to each search: a larger candidate list reads more of the graph and finds the exact neighbours", async () => {
    const small = await storeWith({ indexType: "hnsw", hnsw: { ef: 1 } });
    await small.search([], { query: "query 6", mode: "vector" });
    const plan = await lastPlan();
    expect(indexScan(plan)).toBeDefined();
    const fewer = blocks(indexScan(plan));
    const large = new PostgresStore(target.db as pg.Pool, { schema: small.schema, index: { dims: DIMS, embed, fields: ["title", "body"], hnsw: { ef: 400 } } });
    let found = 0;
    for (let q = 0; q < 10; q++) {
      const want = oracle(`query ${q}`).map((r) => r.key);
      found += (await large.search([], { query: `query ${q}`, mode: "vector" })).filter((r) => want.includes(r.key)).length;
    }
    // HNSW is approximate: with a candidate list of 400 over 2,400 vectors nearly every neighbour is found.
    expect(found).toBeGreaterThanOrEqual(95);
    await large.search([], { query: "query 6", mode: "vector" });
    expect(blocks(indexScan(await lastPlan()))).toBeGreaterThan(fewer);
    expect(await sql("SELECT pg_catalog.current_setting('hnsw.ef_search') AS ef")).toEqual([{ ef: "40" }]);
  });

  it("ef and probes are checked before any SQL, naming the option", () => {
    for (const [index, option] of [
      [{ hnsw: { ef: 0 } }, "index.hnsw.ef"],
      [{ hnsw: { ef: 1001 } }, "index.hnsw.ef"],
      [{ ivfflat: { probes: 1.5 } }, "index.ivfflat.probes"],
    ] as const) {
      expect(() => new PostgresStore(target.db as pg.Pool, { index: { dims: DIMS, embed, ...index } }), option).toThrow(expect.objectContaining({ name: "InvalidOptionsError", option }));
    }
  });

  it("a small store: exact, whatever the planner reads", async () => {
    const few = docs.slice(0, 20);
    const store = await storeWith({ indexType: "hnsw" }, few);
    const q = embedding("query 7");
    const want = few
      .map((d) => ({ key: d.key, score: Math.max(cosine(q, embedding(d.value.title)), cosine(q, embedding(d.value.body))) }))
      .sort((a, b) => b.score - a.score)
      .slice(0, 10);
    expect(keysAndScores(await store.search([], { query: "query 7", mode: "vector" }))).toEqual(expected(want));
  });
});
