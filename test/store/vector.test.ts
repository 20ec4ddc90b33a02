/**
 * Vector search (pgvector): on PGlite with the pgvector extension
 * (@electric-sql/pglite-pgvector), and on the test server too when it has
 * pgvector (detected; the run says so when it does not). The official
 * store's vector tests as twins (same calls, assertions made exact with a
 * deterministic embedder), then this store's own: changing the dimensions or
 * the metric is a migration, never silent; reindex; deletes; the embedder
 * called once per batch; a store and a saver sharing the embedded database.
 * The official store beside ours when the dimensions or the metric change:
 * vector-official.long.test.ts (`npm run test:long`).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvalidOptionsError, migrateStore, PostgresSaver, PostgresStore, StoreIndexMismatchError, VectorExtensionMissingError } from "../../src/index.js";
import type { PGliteLike } from "../../src/db/db.js";
import { fakeEmbeddings, type FakeEmbed } from "../helpers/embeddings.js";
import { vectorTargets, type VectorTarget } from "../helpers/vector.js";

const DIMS = 256;
const fresh = () => `v_${randomBytes(4).toString("hex")}`;

const targets = await vectorTargets("vector search");

describe.each(targets)("vector search on %s", (_name, make) => {
  let target: VectorTarget;
  beforeAll(async () => {
    target = await make();
  });
  afterAll(() => target.close());
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- rows are whatever the SQL selects
  const sql = async (text: string, values: unknown[] = []): Promise<any[]> => (await (target.db as PGliteLike).query(text, values)).rows;

  async function vectorStore(options: { fields?: string[]; dims?: number; embed?: FakeEmbed; schema?: string; distanceMetric?: "cosine" | "l2" | "inner_product" } = {}) {
    const embed = options.embed ?? fakeEmbeddings(options.dims ?? DIMS);
    const store = new PostgresStore(target.db as pg.Pool, {
      schema: options.schema ?? fresh(),
      index: { dims: options.dims ?? DIMS, embed, fields: options.fields ?? ["content", "title"], distanceMetric: options.distanceMetric },
    });
    await store.setup({ adopt: false });
    return { store, embed };
  }

  describe("the official store's vector tests", () => {
    it("should support index: false to disable vector indexing", async () => {
      const { store, embed } = await vectorStore();
      await store.put(["vectors", "no-index"], "doc1", { title: "Test Document", content: "This content should not be indexed" }, false);
      expect(embed.calls).toHaveLength(0);
      expect(await store.search(["vectors", "no-index"], { query: "test document", mode: "vector" })).toEqual([]);
      // Still there for get and plain search.
      expect((await store.search(["vectors", "no-index"])).length).toBe(1);
    });

    it("should support specific fields to index", async () => {
      const { store, embed } = await vectorStore();
      await store.put(["vectors", "selective"], "doc1", { title: "Indexed Title", content: "Not indexed content", summary: "Indexed summary", metadata: { author: "Test Author" } }, ["title", "summary"]);
      expect(embed.calls).toHaveLength(1);
      expect(embed.calls[0]).toEqual(["Indexed Title", "Indexed summary"]);
      const results = await store.search(["vectors", "selective"], { query: "indexed summary", mode: "vector" });
      expect(results.map((r) => r.key)).toEqual(["doc1"]);
    });

    it("should support both TTL and indexing options", async () => {
      const { store, embed } = await vectorStore();
      const value = { title: "Combined Options Test", content: "Testing both TTL and indexing options" };
      await store.put(["vectors", "combined"], "doc1", value, ["title"], { ttl: 10 });
      expect((await store.get(["vectors", "combined"], "doc1"))?.value).toEqual(value);
      expect(embed.calls).toEqual([["Combined Options Test"]]);
      // The official test reads its vector table; this reads ours.
      expect(await sql(`SELECT field_path, text_content FROM ${store.schema}.store_item_vectors WHERE key = 'doc1'`)).toEqual([
        { field_path: "title", text_content: "Combined Options Test" },
      ]);
    });

    it("should support vector search", async () => {
      const { store, embed } = await vectorStore();
      await store.put(["docs"], "doc1", { title: "Machine Learning Basics", content: "Introduction to neural networks and deep learning" });
      await store.put(["docs"], "doc2", { title: "Data Science Guide", content: "Statistical analysis and data visualization techniques" });
      const results = await store.search(["docs"], { query: "deep learning networks", mode: "vector", limit: 5 });
      expect(results.map((r) => r.key)).toEqual(["doc1", "doc2"]);
      expect(results[0]!.score!).toBeGreaterThan(results[1]!.score!);
      expect(embed.calls.at(-1)).toEqual(["deep learning networks"]);
    });

    it("should handle different distance metrics", async () => {
      const { store } = await vectorStore();
      await store.put(["test"], "item1", { content: "sample content for testing" });
      await store.put(["test"], "item2", { content: "something else entirely" });
      for (const distanceMetric of ["cosine", "l2", "inner_product"] as const) {
        const results = await store.search(["test"], { query: "sample content", mode: "vector", distanceMetric });
        expect(results.map((r) => r.key)).toEqual(["item1", "item2"]);
        expect(results[0]!.score!).toBeGreaterThan(results[1]!.score!);
      }
    });

    it("should respect similarity thresholds", async () => {
      const { store } = await vectorStore();
      await store.put(["test"], "item1", { content: "very different words" });
      await store.put(["test"], "item2", { content: "similar query content" });
      const high = await store.search(["test"], { query: "query content", mode: "vector", similarityThreshold: 0.5 });
      const low = await store.search(["test"], { query: "query content", mode: "vector", similarityThreshold: -1 });
      expect(high.map((r) => r.key)).toEqual(["item2"]);
      expect(low.map((r) => r.key)).toEqual(["item2", "item1"]);
    });

    it("should extract text from JSON paths correctly", async () => {
      const { store, embed } = await vectorStore({ fields: ["title", "content.sections[*].text", "tags[-1]", "metadata"] });
      await store.put(["test"], "doc1", {
        title: "Test Document",
        content: { sections: [{ text: "Section 1 content" }, { text: "Section 2 content" }] },
        tags: ["ai", "ml", "nlp"],
        metadata: { author: "Test Author", version: 1 },
      });
      expect(embed.calls[0]).toEqual(["Test Document", "Section 1 content", "Section 2 content", "nlp", '{"author":"Test Author","version":1}']);
      expect(await sql(`SELECT field_path FROM ${store.schema}.store_item_vectors ORDER BY field_path`)).toEqual([
        { field_path: "content.sections[*].text[0]" },
        { field_path: "content.sections[*].text[1]" },
        { field_path: "metadata" },
        { field_path: "tags[-1]" },
        { field_path: "title" },
      ]);
      const results = await store.search(["test"], { query: "Test Document", mode: "vector" });
      expect(results[0]?.key).toBe("doc1");
    });

    it("should use vector search by default when in auto mode with vector config", async () => {
      const { store, embed } = await vectorStore();
      await store.put(["auto"], "doc1", { title: "Machine Learning", content: "Algorithms for pattern recognition" });
      const results = await store.search(["auto"], { query: "data science techniques", mode: "auto" });
      expect(results).toHaveLength(1);
      expect(typeof results[0]!.score).toBe("number");
      expect(embed.calls.at(-1)).toContain("data science techniques");
    });

    it("should combine vector and text search effectively (hybrid), best first", async () => {
      const { store } = await vectorStore();
      await store.put(["docs"], "doc1", { title: "Machine Learning Guide", content: "Comprehensive guide to machine learning algorithms and techniques" });
      await store.put(["docs"], "doc2", { title: "Data Science Handbook", content: "Statistical methods and data analysis for scientists" });
      await store.put(["docs"], "doc3", { title: "AI Research Paper", content: "Latest research in artificial intelligence and neural networks" });
      for (const vectorWeight of [0.9, 0.5, 0.1]) {
        const results = await store.search(["docs"], { mode: "hybrid", query: "machine learning algorithms", vectorWeight, limit: 10 });
        expect(results[0]?.key).toBe("doc1");
        expect(results.every((r, i) => i === 0 || results[i - 1]!.score! >= r.score!)).toBe(true);
      }
      const thresholded = await store.search(["docs"], { query: "neural networks research", mode: "hybrid", vectorWeight: 0.65, similarityThreshold: 0.25, limit: 5 });
      expect(thresholded.map((r) => r.key)).toEqual(["doc3"]);
    });
  });

  it("should apply vector migrations when vector indexing is configured (the official Migration System test)", async () => {
    const { store } = await vectorStore();
    expect((await sql("SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1", [store.schema])).map((r) => r.tablename)).toEqual([
      "checkpointer_store_migrations",
      "store_item_vectors",
      "store_items",
    ]);
    const idx = await sql("SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'store_item_vectors_embedding'", [store.schema]);
    expect(idx[0].indexdef).toMatch(/USING hnsw \(embedding .*vector_cosine_ops\) WITH \(m='16', ef_construction='200'\)/);
    // Setting up again changes nothing.
    expect((await store.setup()).vector).toMatchObject({ action: "unchanged" });
    // The extension went where other code looks for it (the type unqualified on the default search path).
    expect(await sql("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'")).toEqual([{ nspname: "public" }]);
  });

  describe("changing the index is a migration, never silent", () => {
    it("a store configured with other dimensions or metric is refused; migrateStore changes it; reindex makes the embeddings again", async () => {
      const schema = fresh();
      const { store } = await vectorStore({ schema });
      await store.put(["d"], "a", { content: "apples and pears" });
      await store.put(["d"], "b", { content: "engines and gears" });
      const bigger = new PostgresStore(target.db as pg.Pool, { schema, index: { dims: 32, embed: fakeEmbeddings(32), fields: ["content"] } });
      const refused = await bigger.setup().catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(StoreIndexMismatchError);
      expect(refused).toMatchObject({ current: { dims: DIMS, distanceMetric: "cosine", indexType: "hnsw" }, wanted: { dims: 32 } });
      // A dry run says what it would do, and does nothing.
      const plan = await migrateStore({ pool: target.db, schema, index: { dims: 32 }, changeIndex: true, dryRun: true });
      expect(plan.vector).toMatchObject({ action: "changed", reembed: true });
      expect(plan.vector!.sql.join("\n")).toMatch(/vector\(32\)/);
      expect((await store.search(["d"], { query: "apples", mode: "vector" }))[0]?.key).toBe("a");

      const changed = await migrateStore({ pool: target.db, schema, index: { dims: 32 }, changeIndex: true });
      expect(changed.vector).toMatchObject({ action: "changed", dims: 32, reembed: true });
      await bigger.setup();
      // The texts are kept; their embeddings are to be made again: until then vector search finds nothing.
      expect(await bigger.search(["d"], { query: "apples", mode: "vector" })).toEqual([]);
      expect(await bigger.reindex()).toEqual({ embedded: 2 });
      expect((await bigger.search(["d"], { query: "apples", mode: "vector" }))[0]?.key).toBe("a");
      expect(await bigger.reindex()).toEqual({ embedded: 0 });

      // Only the metric: the index is rebuilt, the embeddings stay.
      const l2 = await migrateStore({ pool: target.db, schema, index: { dims: 32, distanceMetric: "l2" }, changeIndex: true });
      expect(l2.vector).toMatchObject({ action: "changed", distanceMetric: "l2", reembed: false });
      const byL2 = new PostgresStore(target.db as pg.Pool, { schema, index: { dims: 32, embed: fakeEmbeddings(32), fields: ["content"], distanceMetric: "l2" } });
      await byL2.setup();
      expect((await byL2.search(["d"], { query: "engines", mode: "vector" }))[0]?.key).toBe("b");
      const idx = await sql("SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'store_item_vectors_embedding'", [schema]);
      expect(idx[0].indexdef).toMatch(/USING hnsw \(embedding .*vector_l2_ops\)/);
    });
  });

  describe("this store's own", () => {
    it("a batch of puts calls the embedder once; a delete takes the item's vectors; a put without text drops them", async () => {
      const { store, embed } = await vectorStore({ fields: ["text"] });
      await store.batch([
        { namespace: ["n"], key: "1", value: { text: "one fish" } },
        { namespace: ["n"], key: "2", value: { text: "two fish" } },
        { namespace: ["n"], key: "3", value: { text: "red fish" } },
      ]);
      expect(embed.calls).toEqual([["one fish", "two fish", "red fish"]]);
      const count = async () => Number((await sql(`SELECT count(*) AS n FROM ${store.schema}.store_item_vectors`))[0].n);
      expect(await count()).toBe(3);
      await store.delete(["n"], "1");
      expect(await count()).toBe(2);
      await store.put(["n"], "2", { other: "no text field" });
      expect(await count()).toBe(1);
      expect((await store.search(["n"], { query: "fish", mode: "vector" })).map((r) => r.key)).toEqual(["3"]);
    });

    it("a LangChain Embeddings object: embedDocuments for puts, embedQuery for the query", async () => {
      const calls: string[] = [];
      const inner = fakeEmbeddings(DIMS);
      const embeddings = {
        embedDocuments: async (texts: string[]) => (calls.push(`documents:${texts.length}`), inner(texts)),
        embedQuery: async (text: string) => (calls.push("query"), (await inner([text]))[0]!),
      };
      const store = new PostgresStore(target.db as pg.Pool, { schema: fresh(), index: { dims: DIMS, embed: embeddings, fields: ["text"] } });
      await store.setup({ adopt: false });
      await store.batch([
        { namespace: ["e"], key: "1", value: { text: "green tea" } },
        { namespace: ["e"], key: "2", value: { text: "black coffee" } },
      ]);
      expect((await store.search(["e"], { query: "coffee", mode: "vector" }))[0]?.key).toBe("2");
      expect(calls).toEqual(["documents:2", "query"]);
    });

    it("an embedder that returns the wrong dimensions is refused before anything is written", async () => {
      const wrong = Object.assign(async (texts: string[]) => texts.map(() => [1, 2, 3]), { calls: [] as string[][] });
      const { store } = await vectorStore({ embed: wrong });
      const err = await store.put(["w"], "k", { content: "text" }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidOptionsError);
      expect((err as InvalidOptionsError).option).toBe("index.embed");
      expect(await store.get(["w"], "k")).toBeNull();
    });

    it("vector search respects filters and namespace boundaries", async () => {
      const { store } = await vectorStore({ fields: ["text"] });
      await store.put(["a"], "in", { text: "blue whale", kind: "animal" });
      await store.put(["a"], "filtered", { text: "blue whale", kind: "toy" });
      await store.put(["ab"], "out", { text: "blue whale", kind: "animal" });
      expect((await store.search(["a"], { query: "blue whale", mode: "vector", filter: { kind: "animal" } })).map((r) => r.key)).toEqual(["in"]);
    });
  });
});

describe("PGlite without pgvector", () => {
  it("a store with index says the extension is missing, and changes nothing", async () => {
    const db = new PGlite();
    try {
      const store = new PostgresStore(db as unknown as PGliteLike, { index: { dims: 3, embed: fakeEmbeddings(3) } });
      await expect(store.setup({ adopt: false })).rejects.toBeInstanceOf(VectorExtensionMissingError);
      expect((await db.query("SELECT count(*)::int AS n FROM pg_tables WHERE tablename LIKE 'store%'")).rows).toEqual([{ n: 0 }]);
    } finally {
      await db.close();
    }
  });
});

describe("the embedded database, shared", () => {
  it("PostgresSaver.open() and PostgresStore.open() in one process share the folder; the last to close releases it", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "lgpg-store-"));
    const saved = process.env.DATABASE_URL;
    delete process.env.DATABASE_URL;
    try {
      const saver = await PostgresSaver.open({ dataDir });
      const store = await PostgresStore.open({ dataDir, index: { dims: 8, embed: fakeEmbeddings(8), fields: ["text"] } });
      await store.put(["mem"], "k", { text: "remember this" });
      await saver.end();
      expect((await store.search(["mem"], { query: "remember", mode: "vector" }))[0]?.key).toBe("k");
      await store.stop();
      // Released: another opener (as another process would) gets it, with the data.
      const again = await PostgresStore.open({ dataDir });
      expect((await again.get(["mem"], "k"))?.value).toEqual({ text: "remember this" });
      await again.stop();
    } finally {
      if (saved !== undefined) process.env.DATABASE_URL = saved;
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

