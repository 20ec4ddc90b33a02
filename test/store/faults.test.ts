/**
 * The official PostgresStore's faults (issue 29), each run against the
 * official store (@langchain/langgraph-checkpoint-postgres/store, installed
 * as a dev dependency) and against ours: the official store shows the fault,
 * ours does not. Each store gets its own schema of this file's database.
 */
import { randomBytes } from "node:crypto";
import { PostgresStore as Official } from "@langchain/langgraph-checkpoint-postgres/store";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { loadMigrations } from "../../src/db/migrations.js";
import { PostgresStore } from "../../src/store/index.js";
import { STORE_TRACK } from "../../src/store/migrations.js";
import { runScript } from "../helpers/cli.js";
import { testPool, withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("store-faults");
const opened: { stop(): Promise<void> | void }[] = [];
afterAll(async () => {
  for (const s of opened) await s.stop();
});
const fresh = () => `f_${randomBytes(4).toString("hex")}`;

async function both(): Promise<{ official: Official; ours: PostgresStore }> {
  const official = new Official({ connectionOptions: db.url, schema: fresh() });
  const ours = new PostgresStore({ connectionOptions: db.url, schema: fresh() });
  opened.push(official, ours);
  await official.setup();
  // Official tables are in this database (the other tests' schemas): start beside them, not adopting.
  await ours.setup({ adopt: false });
  return { official, ours };
}

describe("faults of the official store, fixed here", () => {
  it("search(['a']) must not return items of namespace ['ab'] (prefix of whole labels)", async () => {
    const { official, ours } = await both();
    for (const store of [official, ours]) {
      await store.put(["a"], "in", { v: 1 });
      await store.put(["ab"], "out", { v: 2 });
      await store.put(["a", "b"], "deeper", { v: 3 });
    }
    expect((await official.search(["a"])).map((i) => i.key).sort()).toEqual(["deeper", "in", "out"]);
    expect((await ours.search(["a"])).map((i) => i.key).sort()).toEqual(["deeper", "in"]);
    // The same boundary in listNamespaces' prefix and suffix.
    expect(await official.listNamespaces({ prefix: ["a"] })).toContainEqual(["ab"]);
    expect(await ours.listNamespaces({ prefix: ["a"] })).toEqual([["a"], ["a", "b"]]);
    expect(await official.listNamespaces({ suffix: ["b"] })).toContainEqual(["ab"]);
    expect(await ours.listNamespaces({ suffix: ["b"] })).toEqual([["a", "b"]]);
  });

  it("listNamespaces({ maxDepth: 1, limit: 2 }) truncates deeper namespaces before paging", async () => {
    const { official, ours } = await both();
    for (const store of [official, ours]) {
      await store.put(["a", "x"], "k", { v: 1 });
      await store.put(["b", "y"], "k", { v: 1 });
      await store.put(["c"], "k", { v: 1 });
    }
    expect(await official.listNamespaces({ maxDepth: 1, limit: 2 })).toEqual([]);
    expect(await ours.listNamespaces({ maxDepth: 1, limit: 2 })).toEqual([["a"], ["b"]]);
    expect(await ours.listNamespaces({ maxDepth: 1, limit: 2, offset: 2 })).toEqual([["c"]]);
  });

  it("search([]) searches everything, as the base class allows", async () => {
    const { official, ours } = await both();
    for (const store of [official, ours]) {
      await store.put(["a"], "1", { v: 1 });
      await store.put(["b", "c"], "2", { v: 2 });
    }
    await expect(official.search([])).rejects.toThrow("Namespace cannot be empty");
    expect((await ours.search([])).map((i) => i.key).sort()).toEqual(["1", "2"]);
  });

  it("10 concurrent setup() calls all succeed", async () => {
    const officialSchema = fresh();
    const oursSchema = fresh();
    const officials = Array.from({ length: 10 }, () => new Official({ connectionOptions: db.url, schema: officialSchema }));
    const ourStores = Array.from({ length: 10 }, () => new PostgresStore({ connectionOptions: db.url, schema: oursSchema }));
    opened.push(...officials, ...ourStores);
    // The official store's setups race on its CREATE statements and some usually fail, but how many (none,
    // on a fast enough server) is the scheduler's: only ours is held to all of them succeeding.
    await Promise.allSettled(officials.map((s) => s.setup()));
    const ours = await Promise.allSettled(ourStores.map((s) => s.setup({ adopt: false })));
    expect(ours.filter((r) => r.status === "rejected")).toEqual([]);
    // Each store migration recorded once.
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n, count(DISTINCT version)::int AS versions FROM ${oursSchema}.checkpointer_store_migrations`);
    expect(rows[0]).toEqual({ n: loadMigrations(STORE_TRACK).length, versions: loadMigrations(STORE_TRACK).length });
  });

  it("a pool the caller owns is used, and never ended", async () => {
    const pool = testPool({ connectionString: db.url, max: 2 });
    try {
      const schema = fresh();
      const store = new PostgresStore(pool, { schema });
      await store.setup({ adopt: false });
      await store.put(["a"], "k", { v: 1 });
      await store.stop();
      // The pool still works; a second store on it reads the item.
      expect((await pool.query("SELECT 1 AS one")).rows[0].one).toBe(1);
      expect((await new PostgresStore(pool, { schema }).get(["a"], "k"))?.value).toEqual({ v: 1 });
      // The official store only takes connection options: it makes its own pool and stop() ends that one.
      const official = new Official({ connectionOptions: db.url, schema: fresh() });
      await official.setup();
      const own = (official as unknown as { core: { pool: pg.Pool } }).core.pool;
      expect(own).not.toBe(pool);
      await official.stop();
      expect(own.ended).toBe(true);
    } finally {
      await pool.end();
    }
  });

  it("an idle connection terminated by the server does not crash the process (child processes)", async () => {
    const official = await runScript("test/fixtures/store/idle-error.ts", ["official", db.url, fresh()]);
    expect(official.code).not.toBe(0);
    expect(official.stderr).toMatch(/terminat/i);
    expect(official.stdout).not.toMatch(/survived/);
    const ours = await runScript("test/fixtures/store/idle-error.ts", ["ours", db.url, fresh()]);
    expect(ours.stderr).not.toMatch(/Unhandled|uncaught/i);
    expect({ code: ours.code, out: JSON.parse(ours.stdout.trim()) }).toEqual({ code: 0, out: { terminated: 1, survived: { v: 1 } } });
  });

  it("a comparison filter on a field that holds a string skips that item instead of failing the search", async () => {
    const { official, ours } = await both();
    for (const store of [official, ours]) {
      await store.put(["f"], "n", { score: 5 });
      await store.put(["f"], "s", { score: "high" });
    }
    await expect(official.search(["f"], { filter: { score: { $gt: 1 } } })).rejects.toThrow(/invalid input syntax for type numeric/);
    expect((await ours.search(["f"], { filter: { score: { $gt: 1 } } })).map((i) => i.key)).toEqual(["n"]);
  });

  it("namespace labels may contain '.', ':', '%', '_' and '\\\\', and stay apart", async () => {
    const { official, ours } = await both();
    for (const label of ["a.b", "100%", "a_c", "back\\slash"]) {
      await expect(official.put([label], "k", { v: 1 })).rejects.toThrow(/Namespace labels cannot contain/);
    }
    const labels = [["a.b"], ["100%"], ["a_c"], ["back\\slash"], ["a:b"], ["a", "b"], ["abc"]];
    for (const [i, ns] of labels.entries()) await ours.put(ns, "k", { i });
    for (const [i, ns] of labels.entries()) expect((await ours.get(ns, "k"))?.value).toEqual({ i });
    // LIKE's wildcards are plain characters here: "a_c" does not match "abc", "%" matches nothing else.
    expect((await ours.search(["a_c"])).map((i) => i.value)).toEqual([{ i: 2 }]);
    expect((await ours.search(["100%"])).map((i) => i.value)).toEqual([{ i: 1 }]);
    // "a:b" is one label, not the namespace ["a", "b"] (the official store joins labels with ":").
    expect((await ours.search(["a:b"])).map((i) => i.value)).toEqual([{ i: 4 }]);
    expect((await ours.listNamespaces()).length).toBe(labels.length);
    await official.put(["a", "b"], "k", { v: 1 });
    await expect(official.put(["a:b"], "k", { v: 2 })).resolves.toBeUndefined();
    // The official store cannot tell them apart: both are "a:b".
    expect((await official.get(["a", "b"], "k"))?.value).toEqual({ v: 2 });
  });
});
