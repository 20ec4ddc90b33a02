/**
 * The official PostgresStore's own tests (langgraphjs,
 * libs/checkpoint-postgres/src/tests/store.int.test.ts), run against this
 * store: the ones that need no pgvector, on the test server. Each official
 * `describe` made a database per test; here each test gets a fresh schema of
 * this file's database, and stores are made with the official shapes
 * (`fromConnString`, `new PostgresStore({ connectionOptions, ... })`). The
 * vector ones run on PGlite in vector.test.ts. Where an official test read
 * the official tables with SQL, its twin reads ours. One official test is
 * deliberately not followed (labels with periods: see "labels" below).
 */
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { PostgresStore } from "../../src/store/index.js";
import { withTestDatabase } from "../helpers/db.js";
import { tableNames } from "../helpers/partitions.js";

const db = withTestDatabase("store-official");
const stores: PostgresStore[] = [];
const fresh = () => `s_${randomBytes(4).toString("hex")}`;
const open = (options: Parameters<typeof PostgresStore.fromConnString>[1] = {}) => {
  const store = PostgresStore.fromConnString(db.url, { schema: fresh(), ...options });
  stores.push(store);
  return store;
};
afterAll(async () => {
  await Promise.all(stores.map((s) => s.stop()));
});

describe("PostgresStore Batch Operations", () => {
  let store: PostgresStore;
  beforeEach(async () => {
    store = open();
    await store.setup();
  });

  it("should handle batch put and get operations", async () => {
    const results = await store.batch([
      { namespace: ["batch"], key: "item1", value: { data: "first" } },
      { namespace: ["batch"], key: "item2", value: { data: "second" } },
      { namespace: ["batch"], key: "item1" },
    ]);
    expect(results).toHaveLength(3);
    expect(results[0]).toBeUndefined();
    expect(results[1]).toBeUndefined();
    expect(results[2]).toBeDefined();
    // Reads see the store as it was before the batch (as InMemoryStore and the Python store do): a later get sees the put.
    expect(results[2]).toBeNull();
    expect((await store.get(["batch"], "item1"))?.value).toEqual({ data: "first" });
  });

  it("should handle batch with mixed valid and invalid operations", async () => {
    await expect(
      store.batch([
        { namespace: ["batch"], key: "item1", value: { data: "first" } },
        { namespace: [], key: "item2", value: { data: "invalid" } },
        { namespace: ["batch"], key: "item1" },
      ]),
    ).rejects.toThrow("Namespace cannot be empty");
    // Refused before any SQL: the valid put of the batch was not written either.
    expect(await store.get(["batch"], "item1")).toBeNull();
  });
});

describe("PostgresStore CRUD Operations", () => {
  let store: PostgresStore;
  beforeEach(async () => {
    store = open();
    await store.setup();
  });

  it("should store and retrieve a simple item", async () => {
    const namespace = ["crud", "simple"];
    await store.put(namespace, "item1", { foo: "bar", num: 42 });
    const item = await store.get(namespace, "item1");
    expect(item?.namespace).toEqual(namespace);
    expect(item?.key).toBe("item1");
    expect(item?.value).toEqual({ foo: "bar", num: 42 });
    expect(item?.createdAt).toBeInstanceOf(Date);
    expect(item?.updatedAt).toBeInstanceOf(Date);
  });

  it("should update an existing item", async () => {
    const namespace = ["crud", "update"];
    await store.put(namespace, "item2", { foo: "bar" });
    const originalItem = await store.get(namespace, "item2");
    await store.put(namespace, "item2", { foo: "baz", extra: 123 });
    const updatedItem = await store.get(namespace, "item2");
    expect(originalItem?.value).toEqual({ foo: "bar" });
    expect(updatedItem?.value).toEqual({ foo: "baz", extra: 123 });
    expect(updatedItem?.updatedAt.getTime()).toBeGreaterThan(originalItem?.updatedAt.getTime() || 0);
    expect(updatedItem?.createdAt.getTime()).toBe(originalItem?.createdAt.getTime());
  });

  it("should delete an item", async () => {
    await store.put(["crud", "delete"], "item3", { toDelete: true });
    expect(await store.get(["crud", "delete"], "item3")).not.toBeNull();
    await store.delete(["crud", "delete"], "item3");
    expect(await store.get(["crud", "delete"], "item3")).toBeNull();
  });

  it("should handle complex JSON values", async () => {
    const complexValue = { string: "test", number: 42, boolean: true, null: null, array: [1, 2, 3, "four"], nested: { deep: { value: "nested data" } } };
    await store.put(["crud", "complex"], "item4", complexValue);
    expect((await store.get(["crud", "complex"], "item4"))?.value).toEqual(complexValue);
  });

  it("should return null for non-existent items", async () => {
    expect(await store.get(["crud", "missing"], "nope")).toBeNull();
  });

  it("should not allow empty namespace", async () => {
    await expect(store.put([], "key", { foo: "bar" })).rejects.toThrow("Namespace cannot be empty");
  });

  it("labels: periods are allowed here (the official store refuses them; see faults.test.ts)", async () => {
    await store.put(["invalid.namespace"], "key", { foo: "bar" });
    expect((await store.get(["invalid.namespace"], "key"))?.namespace).toEqual(["invalid.namespace"]);
  });

  it("should not allow empty namespace label", async () => {
    await expect(store.put(["valid", ""], "key", { foo: "bar" })).rejects.toThrow("Namespace labels cannot be empty strings");
  });

  it("should not allow non-string namespace label", async () => {
    await expect(store.put(["valid", 123 as unknown as string], "key", { foo: "bar" })).rejects.toThrow("Namespace labels must be strings");
  });

  it("should not allow reserved namespace label", async () => {
    await expect(store.put(["langgraph"], "key", { foo: "bar" })).rejects.toThrow('Root label for namespace cannot be "langgraph"');
  });

  it("should support TTL options", async () => {
    await store.put(["ttl", "custom"], "tempItem", { data: "temporary data" }, undefined, { ttl: 5 });
    expect((await store.get(["ttl", "custom"], "tempItem"))?.value).toEqual({ data: "temporary data" });
  });
});

describe("PostgresStore Error Handling", () => {
  let store: PostgresStore;
  beforeEach(async () => {
    store = open();
    await store.setup();
  });

  it("should handle database connection errors gracefully", async () => {
    const invalidStore = new PostgresStore({ connectionOptions: "postgresql://invalid:invalid@localhost:9999/invalid" });
    stores.push(invalidStore);
    await expect(invalidStore.setup({ retry: false })).rejects.toThrow();
  });

  it("should handle malformed connection strings", () => {
    expect(() => stores.push(new PostgresStore({ connectionOptions: "not-a-valid-connection-string" }))).not.toThrow();
  });

  it("should throw error when using vector search mode without vector configuration", async () => {
    await expect(store.search(["docs"], { query: "test query", mode: "vector" })).rejects.toThrow(/Vector search requested but not configured/);
  });

  it("should throw error when using hybrid search mode without vector configuration", async () => {
    await expect(store.search(["docs"], { query: "test query", mode: "hybrid" })).rejects.toThrow(/Hybrid search requested but vector search not configured/);
  });

  it("should handle unknown search mode", async () => {
    // @ts-expect-error Testing invalid mode
    await expect(store.search(["docs"], { query: "test", mode: "invalid-mode" })).rejects.toThrow(/Unknown search mode/);
  });
});

describe("PostgresStore Namespace Listing", () => {
  let store: PostgresStore;
  beforeEach(async () => {
    store = open();
    await store.setup();
    await store.put(["docs", "v1"], "item1", { data: "test" });
    await store.put(["docs", "v2"], "item2", { data: "test" });
    await store.put(["cache", "temp"], "item3", { data: "test" });
  });

  it("should list all namespaces", async () => {
    const namespaces = await store.listNamespaces();
    expect(namespaces).toEqual([
      ["cache", "temp"],
      ["docs", "v1"],
      ["docs", "v2"],
    ]);
  });

  it("should list namespaces with prefix filter", async () => {
    const namespaces = await store.listNamespaces({ prefix: ["docs"] });
    expect(namespaces).toEqual([
      ["docs", "v1"],
      ["docs", "v2"],
    ]);
  });
});

describe("PostgresStore Search", () => {
  let store: PostgresStore;
  beforeEach(async () => {
    store = open();
    await store.setup();
    await store.put(["docs"], "doc1", {
      title: "JavaScript Guide",
      content: "Complete guide to JavaScript programming",
      category: "programming",
      difficulty: "beginner",
      tags: ["javascript", "web", "tutorial"],
    });
    await store.put(["docs"], "doc2", {
      title: "TypeScript Handbook",
      content: "Advanced TypeScript programming techniques",
      category: "programming",
      difficulty: "intermediate",
      tags: ["typescript", "javascript", "types"],
    });
    await store.put(["docs"], "doc3", {
      title: "Python Basics",
      content: "Introduction to Python programming language",
      category: "programming",
      difficulty: "beginner",
      tags: ["python", "basics"],
    });
    await store.put(["recipes"], "recipe1", {
      title: "Chocolate Cake",
      content: "Delicious chocolate cake recipe with detailed instructions",
      category: "dessert",
      difficulty: "easy",
      tags: ["chocolate", "cake", "baking"],
    });
  });

  it("should perform basic search with no options", async () => {
    const results = await store.search(["docs"]);
    // Newest update first.
    expect(results.map((r) => r.key)).toEqual(["doc3", "doc2", "doc1"]);
    expect(results.every((item) => item.namespace[0] === "docs")).toBe(true);
  });

  it("should search with simple filter", async () => {
    const results = await store.search(["docs"], { filter: { category: "programming" } });
    expect(results).toHaveLength(3);
  });

  it("should search with advanced filter operators", async () => {
    const results = await store.search(["docs"], { filter: { difficulty: { $eq: "beginner" } } });
    expect(results.map((r) => r.key).sort()).toEqual(["doc1", "doc3"]);
  });

  it("should search with multiple filter conditions", async () => {
    const results = await store.search(["docs"], { filter: { category: "programming", difficulty: { $ne: "beginner" } } });
    expect(results.map((r) => r.key)).toEqual(["doc2"]);
  });

  it("should search with $in operator", async () => {
    const results = await store.search(["docs"], { filter: { difficulty: { $in: ["beginner", "intermediate"] } } });
    expect(results).toHaveLength(3);
  });

  it("should apply limit and offset", async () => {
    const page1 = await store.search(["docs"], { limit: 2, offset: 0 });
    const page2 = await store.search(["docs"], { limit: 2, offset: 2 });
    expect(page1.map((r) => r.key)).toEqual(["doc3", "doc2"]);
    expect(page2.map((r) => r.key)).toEqual(["doc1"]);
  });

  it("should return empty array for non-existent namespace", async () => {
    expect(await store.search(["nonexistent"])).toEqual([]);
  });

  it("should support text search mode", async () => {
    const results = await store.search(["docs"], { query: "JavaScript", mode: "text" });
    expect(results[0]?.key).toBe("doc1");
    expect(results.every((r) => typeof r.score === "number")).toBe(true);
  });

  it("should perform full-text search with auto mode defaulting to text", async () => {
    const results = await store.search(["docs"], { query: "programming", mode: "auto" });
    expect(results.map((r) => r.key).sort()).toEqual(["doc1", "doc2", "doc3"]);
  });

  it("should combine filtering with text search", async () => {
    const results = await store.search(["docs"], { query: "guide", filter: { difficulty: "beginner" }, mode: "text" });
    expect(results.map((r) => r.key)).toEqual(["doc1"]);
  });
});

describe("PostgresStore Statistics", () => {
  let store: PostgresStore;
  beforeEach(async () => {
    store = open();
    await store.setup();
  });

  it("should provide accurate store statistics", async () => {
    await store.put(["namespace1"], "key1", { data: "value1" });
    await store.put(["namespace1"], "key2", { data: "value2" });
    await store.put(["namespace2"], "key1", { data: "value3" });
    const stats = await store.getStats();
    expect(stats).toMatchObject({ totalItems: 3, namespaceCount: 2, expiredItems: 0 });
    expect(stats.oldestItem).toBeInstanceOf(Date);
    expect(stats.newestItem!.getTime()).toBeGreaterThanOrEqual(stats.oldestItem!.getTime());
  });

  it("should handle empty store statistics", async () => {
    expect(await store.getStats()).toEqual({ totalItems: 0, expiredItems: 0, namespaceCount: 0, oldestItem: null, newestItem: null });
  });
});

describe("PostgresStore TTL", () => {
  let store: PostgresStore;
  beforeEach(async () => {
    store = new PostgresStore({ connectionOptions: db.url, schema: fresh(), ttl: { defaultTtl: 1, refreshOnRead: true, sweepIntervalMinutes: 1 } });
    stores.push(store);
    await store.setup();
  });
  afterEach(() => store.stop());

  it("should support TTL configuration and sweep", async () => {
    await store.put(["test"], "ttl-item", { data: "expires" });
    const item = await store.get(["test"], "ttl-item");
    expect(item?.value).toEqual({ data: "expires" });
    // Nothing has expired yet: the sweep deletes nothing.
    expect(await store.sweepExpiredItems()).toBe(0);
  });

  it("should refresh TTL on read", async () => {
    await store.put(["test"], "refresh-item", { data: "refresh test" });
    const expiry = async () => (await db.pool.query(`SELECT expires_at FROM ${store.schema}.store_items WHERE key = 'refresh-item'`)).rows[0].expires_at as Date;
    const before = await expiry();
    await db.pool.query(`UPDATE ${store.schema}.store_items SET expires_at = expires_at - interval '30 seconds'`);
    expect(await store.get(["test"], "refresh-item")).toBeTruthy();
    expect((await expiry()).getTime()).toBeGreaterThanOrEqual(before.getTime());
    expect((await store.get(["test"], "refresh-item"))?.value).toEqual({ data: "refresh test" });
  });
});

describe("PostgresStore Migration System", () => {
  const tables = (schema: string) => tableNames(db.pool, schema);
  const versions = async (schema: string) => (await db.pool.query(`SELECT version, name FROM ${schema}.checkpointer_store_migrations ORDER BY version`)).rows;

  it("should properly track and apply store migrations", async () => {
    const store = open();
    await store.setup();
    expect(await versions(store.schema)).toEqual([
      { version: 1, name: "0000_store_init" },
      { version: 2, name: "0001_store_namespace_index" },
    ]);
    // The store's tables only: no checkpointer table, no vector table without `index`.
    expect(await tables(store.schema)).toEqual(["checkpointer_store_migrations", "store_items"]);
    await store.setup();
    expect(await versions(store.schema)).toHaveLength(2);
  });

  it("should handle migration failures gracefully", async () => {
    const store = open();
    await store.setup();
    await store.put(["test"], "key1", { data: "value1" });
    expect((await store.get(["test"], "key1"))?.value).toEqual({ data: "value1" });
  });

  it("should support multiple schemas with independent migrations", async () => {
    const store1 = open();
    const store2 = open();
    await store1.setup();
    await store2.setup();
    expect(await versions(store1.schema)).toEqual(await versions(store2.schema));
    await store1.put(["a"], "k", { in: 1 });
    expect(await store2.get(["a"], "k")).toBeNull();
  });
});
