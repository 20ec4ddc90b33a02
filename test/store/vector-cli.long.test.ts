/**
 * The CLI changing the store's vector index (`--dims`, `--metric`,
 * `--index-type`): printed with --dry-run, then run, never silent; a store
 * configured with the old shape refused after it; the command a refusal names,
 * run as written. On the embedded database with pgvector
 * (@electric-sql/pglite-pgvector), which the test server may lack. In
 * `npm run test:long`, not `npm test`: it starts PGlite in child processes,
 * minutes of CPU for what it adds to the everyday run (migrate.test.ts tests the
 * store's migrations and the rest of its CLI there).
 */
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PostgresStore, StoreIndexMismatchError } from "../../src/index.js";
import type { PGliteLike } from "../../src/db/db.js";
import { embeddedExtensions, openEmbedded } from "../../src/db/embedded.js";
import type { DistanceMetric, VectorIndexType } from "../../src/store/vector.js";
import { runCli, suggestedCommands } from "../helpers/cli.js";
import { fakeEmbeddings } from "../helpers/embeddings.js";

/**
 * The CLI on an embedded folder with pgvector, and this test, take turns on
 * it (one process holds a folder at a time): each CLI run ends before the
 * test opens the folder to look, and the test closes it before the next run.
 * The stores' embedder hashes each word to a dimension: the texts' words
 * fall on distinct dimensions at 64 and 128, so each query has one answer.
 */
// Each test starts PGlite with pgvector up to nine times (each CLI run, each look): on a loaded 2-core machine,
// minutes; the timeout is a failure detector, not a bound (see test/vitest.config.ts).
describe("the CLI changes the vector index (--dims, --metric, --index-type) on the embedded database with pgvector: printed, then run, never silent", { timeout: 360_000 }, () => {
  const schema = "memory";
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  const dataDirOf = () => {
    const dir = mkdtempSync(join(tmpdir(), "lgpg-store-cli-"));
    dirs.push(dir);
    return join(dir, "db");
  };
  const migrateCli = (dataDir: string, ...args: string[]) => runCli(["migrate", "--store-only", "--schema", schema, "--data-dir", dataDir, ...args]);
  async function onFolder<T>(dataDir: string, fn: (db: PGliteLike) => Promise<T>): Promise<T> {
    const { db, close } = await openEmbedded(dataDir, { extensions: await embeddedExtensions() });
    try {
      return await fn(db);
    } finally {
      await close();
    }
  }
  type Shape = { dims: number; distanceMetric?: DistanceMetric; indexType?: VectorIndexType };
  const storeOn = (db: PGliteLike, shape: Shape) =>
    new PostgresStore(db, { schema, index: { dims: shape.dims, embed: fakeEmbeddings(shape.dims), fields: ["text"], distanceMetric: shape.distanceMetric, indexType: shape.indexType } });
  /** The vector table as the catalog has it: the column's dimensions, the index's definition, the embeddings kept. */
  const table = async (db: PGliteLike) => ({
    dims: (await db.query<{ dims: number }>("SELECT atttypmod AS dims FROM pg_attribute WHERE attrelid = 'memory.store_item_vectors'::regclass AND attname = 'embedding'")).rows[0]?.dims,
    // Name, method, operator class (which pg_indexes leaves out when it is the method's default) and options of each index but the key.
    index: (
      await db.query<{ def: string }>(
        `SELECT concat_ws(' ', ic.relname, am.amname, opc.opcname, array_to_string(ic.reloptions, ',')) AS def
           FROM pg_index ix JOIN pg_class ic ON ic.oid = ix.indexrelid JOIN pg_am am ON am.oid = ic.relam JOIN pg_opclass opc ON opc.oid = ix.indclass[0]
          WHERE ix.indrelid = 'memory.store_item_vectors'::regclass AND NOT ix.indisprimary ORDER BY 1`,
      )
    ).rows.map((r) => r.def),
    embedded: (await db.query<{ n: number }>("SELECT count(embedding)::int AS n FROM memory.store_item_vectors")).rows[0]!.n,
  });
  const refusal = (p: Promise<unknown>) => p.then(() => "no refusal", (e: unknown) => e);

  /** A folder whose store has a vector table of 64 dimensions (cosine, hnsw), made by the CLI. */
  async function folder(): Promise<string> {
    const dataDir = dataDirOf();
    const created = await migrateCli(dataDir, "--no-adopt-store", "--dims", "64");
    expect(created.stderr).toBe("");
    expect(created.stdout).toContain("Created the vector index: 64 dimensions, cosine, hnsw.\n");
    expect(created.code).toBe(0);
    return dataDir;
  }
  /** {@link folder}, with two embedded items, made once; its vector table then. */
  let withItems: Promise<{ dataDir: string; before: Awaited<ReturnType<typeof table>> }> | undefined;
  /**
   * A copy of {@link withItems}'s folder, closed (each PGlite start of its own costs seconds of CPU; a
   * closed data folder is files).
   */
  async function folderWithItems(): Promise<{ dataDir: string; before: Awaited<ReturnType<typeof table>> }> {
    withItems ??= (async () => {
      const dataDir = await folder();
      const before = await onFolder(dataDir, async (db) => {
        const store = storeOn(db, { dims: 64 });
        await store.put(["d"], "a", { text: "apples and pears" });
        await store.put(["d"], "b", { text: "engines and gears" });
        return table(db);
      });
      expect(before).toEqual({ dims: 64, index: ["store_item_vectors_embedding hnsw vector_cosine_ops m=16,ef_construction=200"], embedded: 2 });
      return { dataDir, before };
    })();
    const template = await withItems;
    const dataDir = dataDirOf();
    cpSync(template.dataDir, dataDir, { recursive: true });
    return { dataDir, before: template.before };
  }

  it("--dims N --dry-run prints the change and changes nothing; without --dry-run it runs it: the new dimensions serve, the old are refused", async () => {
    const { dataDir, before } = await folderWithItems();

    const dry = await migrateCli(dataDir, "--dims", "128", "--dry-run");
    expect(dry.stderr).toBe("");
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(
      [
        "-- the store is at store migration 0001; 0 store migration(s) pending. Nothing was applied.",
        "",
        "-- the vector table (changed: 128 dimensions, cosine, hnsw)",
        'ALTER TABLE "memory".store_item_vectors DROP COLUMN embedding;',
        'ALTER TABLE "memory".store_item_vectors ADD COLUMN embedding "public".vector(128);',
        'CREATE INDEX store_item_vectors_embedding ON "memory".store_item_vectors USING hnsw (embedding "public".vector_cosine_ops) WITH (m = 16, ef_construction = 200);',
        "-- The stored embeddings had other dimensions: make them again with `await store.reindex()` (the store configured with the new embedder).",
        "",
      ].join("\n"),
    );
    await onFolder(dataDir, async (db) => {
      expect(await table(db)).toEqual(before);
      // The store with the old dimensions works on; one with the new ones is refused until the change is run.
      const old = storeOn(db, { dims: 64 });
      expect((await old.setup()).vector).toMatchObject({ action: "unchanged" });
      expect((await old.search(["d"], { query: "apples", mode: "vector" }))[0]?.key).toBe("a");
      expect(await refusal(storeOn(db, { dims: 128 }).setup())).toMatchObject({ name: "StoreIndexMismatchError", current: { dims: 64 }, wanted: { dims: 128 } });
    });

    const run = await migrateCli(dataDir, "--dims", "128");
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      `The store in schema "memory" is up to date (store migration 0001) in embedded database in ${dataDir}.\n` +
        "Changed the vector index: 128 dimensions, cosine, hnsw.\n" +
        "The stored embeddings had other dimensions: make them again with `await store.reindex()` (the store configured with the new embedder).\n",
    );
    await onFolder(dataDir, async (db) => {
      // The texts are kept, their embeddings dropped with the old dimensions.
      expect(await table(db)).toEqual({ dims: 128, index: ["store_item_vectors_embedding hnsw vector_cosine_ops m=16,ef_construction=200"], embedded: 0 });
      const old = await refusal(storeOn(db, { dims: 64 }).setup());
      expect(old).toBeInstanceOf(StoreIndexMismatchError);
      expect(old).toMatchObject({ current: { dims: 128, distanceMetric: "cosine", indexType: "hnsw" }, wanted: { dims: 64 } });
      const store = storeOn(db, { dims: 128 });
      expect((await store.setup()).vector).toMatchObject({ action: "unchanged" });
      expect(await store.reindex()).toEqual({ embedded: 2 });
      await store.put(["d"], "c", { text: "pears in syrup" });
      expect((await store.search(["d"], { query: "engines", mode: "vector" }))[0]?.key).toBe("b");
      expect((await store.search(["d"], { query: "syrup", mode: "vector" }))[0]?.key).toBe("c");
      expect((await table(db)).embedded).toBe(3);
    });
  });

  it("--metric and --index-type: printed, then run (the index rebuilt, the embeddings kept); a store configured with the old ones is refused", async () => {
    const { dataDir, before } = await folderWithItems();

    const dryMetric = await migrateCli(dataDir, "--dims", "64", "--metric", "l2", "--dry-run");
    expect(dryMetric.code).toBe(0);
    expect(dryMetric.stdout).toContain(
      [
        "-- the vector table (changed: 64 dimensions, l2, hnsw)",
        'DROP INDEX IF EXISTS "memory".store_item_vectors_embedding;',
        'CREATE INDEX store_item_vectors_embedding ON "memory".store_item_vectors USING hnsw (embedding "public".vector_l2_ops) WITH (m = 16, ef_construction = 200);',
        "",
      ].join("\n"),
    );
    expect(dryMetric.stdout).not.toMatch(/reindex|ALTER TABLE/);
    await onFolder(dataDir, async (db) => {
      expect(await table(db)).toEqual(before);
      expect((await storeOn(db, { dims: 64 }).search(["d"], { query: "apples", mode: "vector" }))[0]?.key).toBe("a");
    });

    const metric = await migrateCli(dataDir, "--dims", "64", "--metric", "l2");
    expect(metric.stderr).toBe("");
    expect(metric.code).toBe(0);
    expect(metric.stdout).toContain("Changed the vector index: 64 dimensions, l2, hnsw.\n");
    expect(metric.stdout).not.toMatch(/reindex/);
    await onFolder(dataDir, async (db) => {
      expect(await table(db)).toEqual({ dims: 64, index: ["store_item_vectors_embedding hnsw vector_l2_ops m=16,ef_construction=200"], embedded: 2 });
      expect(await refusal(storeOn(db, { dims: 64 }).setup())).toMatchObject({
        name: "StoreIndexMismatchError",
        current: { dims: 64, distanceMetric: "l2", indexType: "hnsw" },
        wanted: { dims: 64, distanceMetric: "cosine", indexType: "hnsw" },
      });
      const store = storeOn(db, { dims: 64, distanceMetric: "l2" });
      expect((await store.setup()).vector).toMatchObject({ action: "unchanged" });
      // No reindex: the embeddings serve the new metric as they are.
      expect((await store.search(["d"], { query: "engines", mode: "vector" }))[0]?.key).toBe("b");
    });

    const dryType = await migrateCli(dataDir, "--dims", "64", "--metric", "l2", "--index-type", "ivfflat", "--dry-run");
    expect(dryType.code).toBe(0);
    expect(dryType.stdout).toContain(
      [
        "-- the vector table (changed: 64 dimensions, l2, ivfflat)",
        'DROP INDEX IF EXISTS "memory".store_item_vectors_embedding;',
        'CREATE INDEX store_item_vectors_embedding ON "memory".store_item_vectors USING ivfflat (embedding "public".vector_l2_ops) WITH (lists = 100);',
        "",
      ].join("\n"),
    );
    const type = await migrateCli(dataDir, "--dims", "64", "--metric", "l2", "--index-type", "ivfflat");
    expect(type.stderr).toBe("");
    expect(type.code).toBe(0);
    expect(type.stdout).toContain("Changed the vector index: 64 dimensions, l2, ivfflat.\n");
    await onFolder(dataDir, async (db) => {
      expect(await table(db)).toEqual({ dims: 64, index: ["store_item_vectors_embedding ivfflat vector_l2_ops lists=100"], embedded: 2 });
      expect(await refusal(storeOn(db, { dims: 64, distanceMetric: "l2" }).setup())).toMatchObject({
        name: "StoreIndexMismatchError",
        current: { indexType: "ivfflat" },
        wanted: { indexType: "hnsw" },
      });
      const store = storeOn(db, { dims: 64, distanceMetric: "l2", indexType: "ivfflat" });
      expect((await store.setup()).vector).toMatchObject({ action: "unchanged" });
      expect((await store.search(["d"], { query: "apples", mode: "vector" }))[0]?.key).toBe("a");
    });
  });

  it("after the CLI changed the index, a store still configured with the old shape is refused at its first operation, without setup() (the migration ran in CI)", async () => {
    const { dataDir } = await folderWithItems();
    const run = await migrateCli(dataDir, "--dims", "128", "--metric", "l2");
    expect(run.code).toBe(0);
    await onFolder(dataDir, async (db) => {
      const mismatch = { name: "StoreIndexMismatchError", current: { dims: 128, distanceMetric: "l2" } };
      // The old dimensions: a put and a search are refused, naming both shapes, instead of failing in pgvector or finding nothing.
      expect(await refusal(storeOn(db, { dims: 64 }).put(["d"], "c", { text: "figs" }))).toMatchObject({ ...mismatch, wanted: { dims: 64 } });
      expect(await refusal(storeOn(db, { dims: 64 }).search(["d"], { query: "apples", mode: "vector" }))).toMatchObject({ ...mismatch, wanted: { dims: 64 } });
      // The old metric alone: a search is refused, instead of ranking by another metric than the index's.
      expect(await refusal(storeOn(db, { dims: 128 }).search(["d"], { query: "apples", mode: "vector" }))).toMatchObject({ ...mismatch, wanted: { dims: 128, distanceMetric: "cosine" } });
      // The new shape works (after reindex: the texts were kept).
      const store = storeOn(db, { dims: 128, distanceMetric: "l2" });
      expect(await store.reindex()).toEqual({ embedded: 2 });
      expect((await store.search(["d"], { query: "apples", mode: "vector" }))[0]?.key).toBe("a");
    });
  });

  it("a refused store's message names the CLI command that changes the index; run as written (on this folder), it changes the store's index only", async () => {
    const dataDir = await folder();
    const message = await onFolder(dataDir, async (db) => ((await refusal(storeOn(db, { dims: 128, distanceMetric: "inner_product" }).setup())) as Error).message);
    const [command] = suggestedCommands(message);
    expect(command).toEqual(["migrate", "--store-only", "--dims", "128", "--metric", "inner_product", "--index-type", "hnsw", "--dry-run", "--schema", "memory"]);
    // As written, on this folder (the library's error knows no --data-dir; the CLI's would carry it), without --dry-run.
    const run = await runCli([...command!.filter((w) => w !== "--dry-run"), "--data-dir", dataDir]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("Changed the vector index: 128 dimensions, inner_product, hnsw.\n");
    await onFolder(dataDir, async (db) => {
      expect((await table(db)).index).toEqual(["store_item_vectors_embedding hnsw vector_ip_ops m=16,ef_construction=200"]);
      // Only the store's tables: the checkpointer's were not asked for.
      expect((await db.query<{ t: string }>("SELECT tablename AS t FROM pg_tables WHERE schemaname = $1 ORDER BY 1", [schema])).rows.map((r) => r.t)).toEqual([
        "checkpointer_store_migrations",
        "store_item_vectors",
        "store_items",
      ]);
    });
  });
});
