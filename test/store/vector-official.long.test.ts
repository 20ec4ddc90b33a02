/**
 * The official store's fault, shown beside ours: changing the dimensions or
 * the metric of its vector index never migrates it (it sets up silently, then
 * fails every put and search, or ranks by the old metric), where ours refuses
 * at setup, naming both shapes. Both stores on PGlite with pgvector, the
 * official one through PGlite's node-postgres adapter. In `npm run test:long`,
 * not `npm test`: it starts PGlite with pgvector twice, in this process, tens of
 * seconds of CPU for what it adds to the everyday run (vector.test.ts tests ours
 * changing its index there).
 */
import { PGlite } from "@electric-sql/pglite";
import { createPgConfig } from "@electric-sql/pglite/node-postgres";
import { vector } from "@electric-sql/pglite-pgvector";
import { PostgresStore as Official } from "@langchain/langgraph-checkpoint-postgres/store";
import type pg from "pg";
import { describe, expect, it } from "vitest";
import { migrateStore, PostgresStore } from "../../src/index.js";
import type { PGliteLike } from "../../src/db/db.js";
import { embedText, fakeEmbeddings } from "../helpers/embeddings.js";

describe("the official store's fault: changing dims never migrates (both stores on PGlite, the official one through PGlite's node-postgres adapter)", () => {
  it("the official store sets up silently and then fails every put and search; ours refuses at setup, naming both shapes", async () => {
    const db = new PGlite({ extensions: { vector } });
    try {
      const opts = (dims: number) => ({ schema: "s", index: { dims, embed: fakeEmbeddings(dims), fields: ["text"] } });
      const official8 = new Official({ connectionOptions: createPgConfig(db) as unknown as pg.PoolConfig, ...opts(8) });
      await official8.setup();
      await official8.put(["d"], "k", { text: "hello" });
      const official16 = new Official({ connectionOptions: createPgConfig(db) as unknown as pg.PoolConfig, ...opts(16) });
      await expect(official16.setup()).resolves.toBeUndefined();
      await expect(official16.put(["d"], "k2", { text: "world" })).rejects.toThrow(/expected 8 dimensions, not 16/);
      await expect(official16.search(["d"], { query: "hello", mode: "vector" })).rejects.toThrow(/different vector dimensions/);

      const ours8 = new PostgresStore(db as unknown as PGliteLike, { ...opts(8), schema: "ours" });
      await ours8.setup({ adopt: false });
      await ours8.put(["d"], "k", { text: "hello" });
      const ours16 = new PostgresStore(db as unknown as PGliteLike, { ...opts(16), schema: "ours" });
      await expect(ours16.setup({ adopt: false })).rejects.toMatchObject({ name: "StoreIndexMismatchError", current: { dims: 8 }, wanted: { dims: 16 } });
      // Nothing changed: the store with the old dimensions works on.
      expect((await ours8.search(["d"], { query: "hello", mode: "vector" }))[0]?.key).toBe("k");
    } finally {
      await db.close();
    }
  });
});

describe("the official store's fault: changing the metric never migrates either (both stores on PGlite, the official one through PGlite's node-postgres adapter)", () => {
  it("the official store sets up silently, makes no index for the new metric and ranks by cosine still; ours refuses at setup, naming both shapes", async () => {
    const db = new PGlite({ extensions: { vector } });
    try {
      const dims = 8;
      const opts = (distanceMetric: "cosine" | "l2") => ({ schema: "s", index: { dims, embed: fakeEmbeddings(dims), fields: ["text"], distanceMetric } });
      const officialCosine = new Official({ connectionOptions: createPgConfig(db) as unknown as pg.PoolConfig, ...opts("cosine") });
      await officialCosine.setup();
      await officialCosine.put(["d"], "k", { text: "apples and gears" });
      const officialL2 = new Official({ connectionOptions: createPgConfig(db) as unknown as pg.PoolConfig, ...opts("l2") });
      await expect(officialL2.setup()).resolves.toBeUndefined();
      // No index for l2 was made: the cosine one is all there is.
      const indexes = await db.query<{ name: string }>("SELECT indexname AS name FROM pg_indexes WHERE schemaname = 's' AND tablename = 'store_vectors' ORDER BY 1");
      expect(indexes.rows.map((r) => r.name)).toEqual(["idx_store_vectors_embedding_cosine_hnsw", "store_vectors_pkey"]);
      // And its search ranks by cosine similarity, not by the l2 it was configured with.
      const [query, item] = [embedText("apples", dims), embedText("apples and gears", dims)];
      const cosine = query.reduce((sum, x, i) => sum + x * item[i]!, 0);
      const l2 = 1 / (1 + Math.hypot(...query.map((x, i) => x - item[i]!)));
      expect(cosine).not.toBeCloseTo(l2, 2);
      const [found] = await officialL2.search(["d"], { query: "apples", mode: "vector" });
      expect(found?.score).toBeCloseTo(cosine, 5);

      const ours = (distanceMetric: "cosine" | "l2") => new PostgresStore(db as unknown as PGliteLike, { ...opts(distanceMetric), schema: "ours" });
      const oursCosine = ours("cosine");
      await oursCosine.setup({ adopt: false });
      await oursCosine.put(["d"], "k", { text: "apples and gears" });
      await expect(ours("l2").setup({ adopt: false })).rejects.toMatchObject({
        name: "StoreIndexMismatchError",
        current: { distanceMetric: "cosine" },
        wanted: { distanceMetric: "l2" },
      });
      // Nor at its first operation without setup (the migration run elsewhere): never a search by another metric than the index's.
      await expect(ours("l2").search(["d"], { query: "apples", mode: "vector" })).rejects.toMatchObject({ name: "StoreIndexMismatchError" });
      // Nothing changed: the store with the old metric works on.
      expect((await oursCosine.search(["d"], { query: "apples", mode: "vector" }))[0]?.score).toBeCloseTo(cosine, 5);
      // Once migrated (the CLI's migrate --store-only --dims 8 --metric l2), the l2 store ranks by l2, the embeddings as they were.
      await migrateStore({ pool: db as unknown as PGliteLike, schema: "ours", index: { dims, distanceMetric: "l2" }, changeIndex: true });
      expect((await ours("l2").search(["d"], { query: "apples", mode: "vector" }))[0]?.score).toBeCloseTo(l2, 5);
    } finally {
      await db.close();
    }
  });
});
