/**
 * The store's statements (src/store/sql/) name tables and columns as written, not through a
 * builder: each is prepared here against a schema the store's migrations made (a quoted name), so a
 * name the schema does not have fails (as a misspelled column does below) before any store runs
 * it. The statements built per call are prepared in each shape their inputs give them. The vector
 * statements on PGlite with pgvector (the test server may not have it), the others on the server.
 */
import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import type pg from "pg";
import { expect, it } from "vitest";
import { migrateStore, PostgresStore } from "../../src/index.js";
import type { PGliteLike } from "../../src/db/db.js";
import { compileFilter } from "../../src/store/sql/filter.js";
import {
  Params,
  filterSearch,
  hybridSearch,
  listNamespaces,
  listingsOfBatch,
  refreshFound,
  reindexPage,
  reindexWrite,
  searchesOfBatch,
  storeStatements,
  textSearch,
  sweepLock,
  sweepLockWaiting,
  vectorExtension,
  vectorPlaceOf,
  vectorSearch,
  writeWithVectors,
  type VectorTuning,
} from "../../src/store/sql/index.js";
import { withTestDatabase } from "../helpers/db.js";
import { fakeEmbeddings } from "../helpers/embeddings.js";

const db = withTestDatabase("store-statements");
const SCHEMA = `we"ird 'schema`;
const FILTER = { status: "active", n: { $gt: 1, $lte: "z" }, tags: { $in: ["a"] }, gone: { $exists: false } };

/** Every statement whose text does not depend on pgvector, in each shape. */
function texts(): [string, string][] {
  const q = storeStatements(SCHEMA);
  const out: [string, string][] = [];
  for (const [name, statement] of Object.entries(q)) if (typeof statement === "string") out.push([name, statement]);
  out.push(["vectorExtension", vectorExtension], ["sweepLock", sweepLock], ["sweepLockWaiting", sweepLockWaiting]);
  const built = (name: string, build: (params: Params) => string) => out.push([name, build(new Params())]);
  const filter = (params: Params) => compileFilter(FILTER, "it.value", params, "filter");
  built("filterSearch (every namespace)", (params) => filterSearch(q.p, 0, { prefix: [], limit: 10, offset: 0 }, params));
  built("filterSearch (prefix, filter)", (params) => filterSearch(q.p, 0, { filter: filter(params), prefix: ["a", "b"], limit: 10, offset: 5 }, params));
  built("textSearch (prefix, filter)", (params) => textSearch(q.p, 0, { filter: filter(params), prefix: ["a"], text: { query: "tea 50%", language: "english" }, limit: 10, offset: 0 }, params));
  built("a batch's searches, refreshed", (params) => {
    const found = searchesOfBatch([
      filterSearch(q.p, 0, { prefix: ["a"], limit: 2, offset: 0 }, params),
      textSearch(q.p, 1, { prefix: [], text: { query: "tea", language: "simple" }, limit: 3, offset: 1 }, params),
    ]);
    return refreshFound(q.p, found, params.add([1], "int[]"));
  });
  const listing = (maxDepth?: number) => ({
    conditions: [
      { matchType: "prefix" as const, path: ["a", "*"] },
      { matchType: "suffix" as const, path: ["*", "z"] },
    ],
    maxDepth,
    limit: 10,
    offset: 0,
  });
  built("listNamespaces", (params) => listNamespaces(q.p, 0, { conditions: [], limit: 10, offset: 0 }, params));
  built("listNamespaces (a plain prefix)", (params) => listNamespaces(q.p, 0, { conditions: [{ matchType: "prefix", path: ["a"] }], limit: 10, offset: 0 }, params));
  built("listNamespaces (labels, depth 3)", (params) => listNamespaces(q.p, 0, listing(3), params));
  built("a batch's listings (depth 12, none)", (params) => listingsOfBatch([listNamespaces(q.p, 0, listing(12), params), listNamespaces(q.p, 1, listing(), params)]));
  return out;
}

async function prepare(run: (text: string) => Promise<unknown>, text: string): Promise<void> {
  try {
    await run(`PREPARE statement AS ${text}`);
  } finally {
    await run("DEALLOCATE ALL").catch(() => undefined);
  }
}

it("every statement prepares against the migrated schema; one naming a column it does not have does not", async () => {
  await migrateStore({ pool: db.pool, schema: SCHEMA });
  const client = await db.pool.connect();
  const run = (text: string) => client.query(text);
  try {
    const all = texts();
    expect(all.length).toBe(20);
    for (const [name, text] of all) await expect(prepare(run, text), name).resolves.toBeUndefined();
    const misspelled = storeStatements(SCHEMA).getRefreshing.replace("it.ttl_minutes * 60", "it.ttl_minute * 60");
    expect(misspelled).not.toBe(storeStatements(SCHEMA).getRefreshing);
    await expect(prepare(run, misspelled)).rejects.toMatchObject({ code: "42703" });
  } finally {
    client.release();
  }
});

it("every vector statement prepares against a store migrated with an index (pgvector in a schema of its own)", async () => {
  const pglite = new PGlite({ extensions: { vector } });
  try {
    await pglite.exec(`CREATE SCHEMA "ext's"; CREATE EXTENSION vector SCHEMA "ext's"`);
    const store = new PostgresStore(pglite as unknown as pg.Pool, { schema: SCHEMA, index: { dims: 3, embed: fakeEmbeddings(3) } });
    await store.setup({ adopt: false });
    const ext = (await pglite.query<{ schema: string }>(vectorExtension)).rows[0]!.schema;
    expect(ext).toBe("ext's");
    const p = vectorPlaceOf(SCHEMA, ext);
    const run = (text: string) => (pglite as unknown as PGliteLike).query(text);
    const out: [string, string][] = [
      ["writeWithVectors", writeWithVectors(p)],
      ["reindexPage", reindexPage(p)],
      ["reindexWrite", reindexWrite(p)],
    ];
    const tunings: VectorTuning[] = [
      { indexType: "hnsw", ef: undefined, probes: undefined, iterativeScan: false, fanout: 2 },
      { indexType: "hnsw", ef: 64, probes: undefined, iterativeScan: true, fanout: 1 },
      { indexType: "ivfflat", ef: undefined, probes: 5, iterativeScan: true, fanout: 1 },
      { indexType: "ivfflat", ef: undefined, probes: undefined, iterativeScan: false, fanout: 1 },
    ];
    const metrics = ["cosine", "l2", "inner_product"] as const;
    tunings.forEach((tuning, i) => {
      const metric = metrics[i % 3]!;
      const where = (params: Params, threshold?: number) => ({
        prefix: i % 2 ? [] : ["docs"],
        filter: compileFilter(i % 2 ? undefined : FILTER, "it.value", params, "filter"),
        query: [0.1, 0.2, 0.3],
        metric,
        threshold,
        limit: 10,
        offset: 2,
      });
      let params = new Params();
      out.push([`vectorSearch ${metric} ${tuning.indexType}`, vectorSearch(p, 0, where(params), tuning, params)]);
      params = new Params();
      out.push([`vectorSearch ${metric} ${tuning.indexType} threshold`, vectorSearch(p, 0, where(params, 0.5), tuning, params)]);
      params = new Params();
      out.push([`hybridSearch ${metric} ${tuning.indexType} threshold`, hybridSearch(p, 1, { ...where(params, 0.5), text: "tea", language: "english", weight: 0.7 }, tuning, params)]);
      params = new Params();
      out.push([`hybridSearch ${metric} ${tuning.indexType}`, hybridSearch(p, 1, { ...where(params), text: "tea", language: "english", weight: 0.7 }, tuning, params)]);
    });
    for (const [name, text] of out) await expect(prepare(run, text), name).resolves.toBeUndefined();
    await expect(prepare(run, reindexWrite(p).replace("v.field_path", "v.field"))).rejects.toMatchObject({ code: "42703" });
    await store.stop();
  } finally {
    await pglite.close();
  }
});

it("no ON CONFLICT ... DO UPDATE SET and no UPDATE ... SET calls now() beside a column or adds an interval to a timestamptz (Citus refuses STABLE functions there: issue 43)", () => {
  // A SET list: up to RETURNING, FROM, WHERE or the statement's (or its CTE's) end.
  const sets = texts().flatMap(([name, text]) => [...text.matchAll(/\bSET\s([\s\S]*?)(?=RETURNING|\bFROM\b|\bWHERE\b|\n\)|$)/g)].map((m) => [name, m[1]!] as const));
  expect(sets.length).toBeGreaterThanOrEqual(4);
  for (const [name, set] of sets) {
    // now() + interval and updated_at + interval are STABLE (timestamptz + interval); src/store/sql/time.ts's forms are not.
    expect(set, name).not.toMatch(/now\(\)\s*\+|updated_at\s*\+|\bnow\(\)\s*,/);
  }
});
