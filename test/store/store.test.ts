/**
 * Behaviour of PostgresStore beyond the official tests: filter semantics,
 * batches, TTL and the sweeper, the statement budget (round trips counted by
 * the bench's protocol-parsing proxy), input refused before any SQL, pools.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AsyncBatchedStore, InMemoryStore, type BaseStore } from "@langchain/langgraph-checkpoint";
import { CountingProxy } from "../../bench/proxy.js";
import { InvalidInputError, PostgresStore } from "../../src/index.js";
import { nsKey } from "../../src/store/input.js";
import { storeStatements, sweepLock } from "../../src/store/sql/index.js";
import { storeDistributionSql, testCitus } from "../helpers/citus.js";
import { testPool, withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("store");
const fresh = () => `s_${randomBytes(4).toString("hex")}`;
const pools: pg.Pool[] = [];
afterAll(async () => {
  for (const p of pools) await p.end();
});
const pool = () => {
  const p = testPool({ connectionString: db.url, max: 4 });
  pools.push(p);
  return p;
};
async function store(options: ConstructorParameters<typeof PostgresStore>[1] = {}): Promise<PostgresStore> {
  const s = new PostgresStore(pool(), { schema: fresh(), ...options });
  await s.setup();
  // On Citus (npm run test:citus), distributed as docs/scaling-out.md says.
  if (testCitus()) for (const statement of storeDistributionSql(s.schema)) await db.pool.query(statement);
  return s;
}
const keys = (items: { key: string }[]) => items.map((i) => i.key).sort();

describe("filters", () => {
  let s: PostgresStore;
  beforeAll(async () => {
    s = await store();
    await s.batch([
      { namespace: ["f"], key: "int", value: { n: 1, tag: "x" } },
      { namespace: ["f"], key: "dec", value: { n: 1.5, tag: "y" } },
      { namespace: ["f"], key: "str", value: { n: "1", tag: "x" } },
      { namespace: ["f"], key: "big", value: { n: 10, tag: null } },
      { namespace: ["f"], key: "none", value: { other: true } },
      { namespace: ["f"], key: "obj", value: { n: { a: 1 }, tag: ["x", "y"] } },
    ]);
  });

  it("equality is JSON equality: numbers by value, never equal to strings", async () => {
    expect(keys(await s.search(["f"], { filter: { n: 1 } }))).toEqual(["int"]);
    expect(keys(await s.search(["f"], { filter: { n: 1.5 } }))).toEqual(["dec"]);
    expect(keys(await s.search(["f"], { filter: { n: "1" } }))).toEqual(["str"]);
    expect(keys(await s.search(["f"], { filter: { n: { $eq: 1.0 } } }))).toEqual(["int"]);
    expect(keys(await s.search(["f"], { filter: { tag: null } }))).toEqual(["big"]);
    expect(keys(await s.search(["f"], { filter: { n: { a: 1 } } }))).toEqual(["obj"]);
  });

  it("comparisons compare numbers as numbers and skip values of another type", async () => {
    expect(keys(await s.search(["f"], { filter: { n: { $gt: 1 } } }))).toEqual(["big", "dec"]);
    expect(keys(await s.search(["f"], { filter: { n: { $gte: 1, $lt: 10 } } }))).toEqual(["dec", "int"]);
    expect(keys(await s.search(["f"], { filter: { n: { $lte: 9 } } }))).toEqual(["dec", "int"]);
    // As strings, byte-wise: "1" < "2".
    expect(keys(await s.search(["f"], { filter: { n: { $lt: "2" } } }))).toEqual(["str"]);
  });

  it("$ne, $in, $nin, $exists; a missing field is unequal to everything", async () => {
    expect(keys(await s.search(["f"], { filter: { tag: { $ne: "x" } } }))).toEqual(["big", "dec", "none", "obj"]);
    expect(keys(await s.search(["f"], { filter: { n: { $in: [1, "1", 99] } } }))).toEqual(["int", "str"]);
    expect(keys(await s.search(["f"], { filter: { n: { $nin: [1, "1"] } } }))).toEqual(["big", "dec", "none", "obj"]);
    expect(keys(await s.search(["f"], { filter: { n: { $exists: false } } }))).toEqual(["none"]);
    expect(keys(await s.search(["f"], { filter: { tag: { $exists: true } } }))).toEqual(["big", "dec", "int", "obj", "str"]);
  });

  it("characters of every UTF-8 length, surrogate pairs included, in field names, operands and text queries", async () => {
    await s.put(["f", "u"], "emoji", { "é😀": "x😀 ünïcödé", list: ["😀"] });
    expect(keys(await s.search(["f", "u"], { filter: { "é😀": "x😀 ünïcödé" } }))).toEqual(["emoji"]);
    expect(keys(await s.search(["f", "u"], { filter: { "é😀": { $gte: "x😀" }, list: { $eq: ["😀"] } } }))).toEqual(["emoji"]);
    expect(keys(await s.search(["f", "u"], { filter: { "é😀": { $in: ["x😀 ünïcödé"] } } }))).toEqual(["emoji"]);
    expect(keys(await s.search(["f", "u"], { query: "x😀", mode: "text" }))).toEqual(["emoji"]);
  });

  it("a backslash before u0000 or ud800 is text, not an escape: stored, read and matched", async () => {
    const text = String.raw`C:\u0000\ud800 \\u0000`;
    await s.put(["f", "esc"], "path", { text, [text]: 1 });
    expect((await s.get(["f", "esc"], "path"))?.value).toEqual({ text, [text]: 1 });
    expect(keys(await s.search(["f", "esc"], { filter: { text } }))).toEqual(["path"]);
    expect(keys(await s.search(["f", "esc"], { filter: { text: { $in: [text] }, [text]: { $eq: 1 } } }))).toEqual(["path"]);
  });

  it("an unknown operator or a bad operand is refused, naming it", async () => {
    await expect(s.search(["f"], { filter: { n: { $regex: "x" } } })).rejects.toMatchObject({ name: "InvalidInputError", field: "search filter.n.$regex" });
    await expect(s.search(["f"], { filter: { n: { $gt: true } } })).rejects.toMatchObject({ field: "search filter.n.$gt" });
    await expect(s.search(["f"], { filter: { n: { $in: "x" } } })).rejects.toMatchObject({ field: "search filter.n.$in" });
  });
});

describe("batches", () => {
  it("reads see the store before the batch; of several writes of one item the last wins", async () => {
    const s = await store();
    await s.put(["b"], "k", { v: "old" });
    const results = await s.batch([
      { namespace: ["b"], key: "k", value: { v: 1 } },
      { namespace: ["b"], key: "k" },
      { namespace: ["b"], key: "k", value: { v: 2 } },
      { namespace: ["b"], key: "gone", value: { v: 3 } },
      { namespace: ["b"], key: "gone", value: null },
      { namespacePrefix: ["b"], limit: 10, offset: 0 },
      { matchConditions: [{ matchType: "prefix", path: ["b"] }], limit: 10, offset: 0 },
    ]);
    expect(results[1]).toMatchObject({ value: { v: "old" } });
    expect((results[5] as unknown as { key: string }[]).map((i) => i.key)).toEqual(["k"]);
    expect(results[6]).toEqual([["b"]]);
    expect((await s.get(["b"], "k"))?.value).toEqual({ v: 2 });
    expect(await s.get(["b"], "gone")).toBeNull();
  });

  it("concurrent puts of one item from parallel connections: each succeeds, one value remains", async () => {
    const s = await store();
    const others = await Promise.all(Array.from({ length: 8 }, async () => new PostgresStore(pool(), { schema: s.schema })));
    await Promise.all(others.map((o, i) => o.put(["c"], "k", { i })));
    const { i } = (await s.get(["c"], "k"))!.value as { i: number };
    expect(i).toBeGreaterThanOrEqual(0);
    expect((await s.search(["c"])).length).toBe(1);
  });
});

describe("TTL", () => {
  const expire = (s: PostgresStore, key: string) => db.pool.query(`UPDATE ${s.schema}.store_items SET expires_at = now() - interval '1 second' WHERE key = $1`, [key]);
  const expiry = async (s: PostgresStore, key: string) =>
    (await db.pool.query(`SELECT expires_at, ttl_minutes FROM ${s.schema}.store_items WHERE key = $1`, [key])).rows[0] as { expires_at: Date | null; ttl_minutes: number | null };

  it("an expired item is never returned, swept or not", async () => {
    const s = await store({ ttl: { defaultTtl: 10 } });
    await s.put(["t"], "old", { v: 1 });
    await s.put(["t", "x"], "live", { v: 2 });
    await expire(s, "old");
    expect(await s.get(["t"], "old")).toBeNull();
    expect(keys(await s.search(["t"]))).toEqual(["live"]);
    expect(await s.batch([{ namespace: ["t"], key: "old" }])).toEqual([null]);
    expect(await s.getStats()).toMatchObject({ totalItems: 2, expiredItems: 1 });
    // Namespaces are listed from the keys alone: one whose items expired, until they are swept.
    expect(await s.listNamespaces()).toEqual([["t"], ["t", "x"]]);
    expect(await s.sweepExpiredItems()).toBe(1);
    expect(await s.getStats()).toMatchObject({ totalItems: 1, expiredItems: 0 });
    expect(await s.listNamespaces()).toEqual([["t", "x"]]);
  });

  it("a read refreshes an item by its own TTL; an item without TTL stays without one", async () => {
    const s = await store({ ttl: { defaultTtl: 10 } });
    await s.put(["t"], "own", { v: 1 }, undefined, { ttl: 60 * 24 });
    await s.put(["t"], "default", { v: 1 });
    const plain = await store();
    await plain.put(["t"], "forever", { v: 1 });
    expect((await expiry(s, "own")).ttl_minutes).toBe(60 * 24);
    expect((await expiry(s, "default")).ttl_minutes).toBe(10);
    await db.pool.query(`UPDATE ${s.schema}.store_items SET expires_at = now() + interval '1 minute'`);
    await s.get(["t"], "own");
    await s.search(["t"], { filter: { v: 1 } });
    const own = (await expiry(s, "own")).expires_at!.getTime();
    expect(own - Date.now()).toBeGreaterThan(60 * 60_000 * 23);
    expect((await expiry(s, "default")).expires_at!.getTime() - Date.now()).toBeGreaterThan(5 * 60_000);
    await plain.get(["t"], "forever");
    expect(await expiry(plain, "forever")).toEqual({ expires_at: null, ttl_minutes: null });
  });

  it("refreshOnRead: false and refreshTtl: false leave expiries alone", async () => {
    const s = await store({ ttl: { defaultTtl: 10, refreshOnRead: false } });
    await s.put(["t"], "k", { v: 1 });
    await db.pool.query(`UPDATE ${s.schema}.store_items SET expires_at = now() + interval '1 minute'`);
    const before = (await expiry(s, "k")).expires_at!.getTime();
    await s.get(["t"], "k");
    await s.search(["t"]);
    expect((await expiry(s, "k")).expires_at!.getTime()).toBe(before);
    await s.search(["t"], { refreshTtl: true });
    expect((await expiry(s, "k")).expires_at!.getTime()).toBeGreaterThan(before);
  });

  /** A store (TTL 10 minutes) holding items "a" and "b" in namespace ["t"], both expired. */
  const twoExpired = async () => {
    const s = await store({ ttl: { defaultTtl: 10 } });
    await s.put(["t"], "a", { v: 1 });
    await s.put(["t"], "b", { v: 1 });
    await expire(s, "a");
    await expire(s, "b");
    return s;
  };

  it("one sweep at a time per schema: the sweeper's statement skips while another sweep holds the lock", async () => {
    const s = await twoExpired();
    const holder = await db.pool.connect();
    try {
      await holder.query("BEGIN");
      // The statement's own lock, held by "another process" mid-sweep.
      await holder.query(
        "SELECT pg_advisory_xact_lock(hashtext('langgraph-checkpoint-pg:store-sweep'), hashtext(current_database() || '.' || $1))",
        [s.schema],
      );
      expect((await db.pool.query(sweepLock, [s.schema])).rows[0]).toEqual({ got: false });
      // sweepExpiredItems() waits for it instead.
      const waiting = s.sweepExpiredItems();
      await waitFor(async () => {
        const { rows } = await db.pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%store-sweep%'");
        return rows.length > 0 ? true : undefined;
      });
      await holder.query("COMMIT");
      expect(await waiting).toBe(2);
    } finally {
      holder.release();
    }
  });

  it("a sweep gives way to a transaction holding an expired item: no deadlock, and a sweep by hand finishes once it commits", async () => {
    const s = await twoExpired();
    const holder = await db.pool.connect();
    try {
      await holder.query("BEGIN");
      await holder.query(`UPDATE ${s.schema}.store_items SET value = '{"v": 2}' WHERE key = 'a'`);
      const sweeping = s.sweepExpiredItems();
      // The sweep's delete waits for item a (having deleted b first, or not yet).
      await waitFor(async () => {
        const { rows } = await db.pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%DELETE FROM%store_items%'");
        return rows.length > 0 ? true : undefined;
      });
      // The holder now wants item b too: the sweep gives way (lock_timeout) instead of deadlocking with it.
      expect((await holder.query(`UPDATE ${s.schema}.store_items SET value = '{"v": 2}' WHERE key = 'b'`)).rowCount).toBe(1);
      await holder.query("COMMIT");
      expect(await sweeping).toBe(2);
      expect((await s.getStats()).totalItems).toBe(0);
    } finally {
      holder.release();
    }
  });

  it("the sweeper deletes expired items on its own, and stop() stops it", async () => {
    const s = await store({ ttl: { defaultTtl: 10, sweepIntervalMinutes: 0.001 } });
    await s.put(["t"], "a", { v: 1 });
    await expire(s, "a");
    await waitFor(async () => ((await s.getStats()).totalItems === 0 ? true : undefined));
    await s.stop();
    await s.put(["t"], "b", { v: 1 });
    expect((await s.getStats()).totalItems).toBe(1);
  });
});

describe("one statement per operation", () => {
  let proxy: CountingProxy;
  let counted: pg.Pool;
  beforeAll(async () => {
    const url = new URL(db.url);
    proxy = await CountingProxy.start(url.hostname, Number(url.port));
    counted = testPool({ connectionString: proxy.url(db.url), max: 2 });
    pools.push(counted);
  });
  afterAll(() => proxy.close());

  async function trips(fn: () => Promise<unknown>): Promise<number> {
    proxy.reset();
    await fn();
    return proxy.snapshot().roundTrips;
  }

  it("get, put, delete, search and listNamespaces: one round trip each (TTL refresh included); a batch: one per kind", async () => {
    const schema = fresh();
    await new PostgresStore(db.pool, { schema }).setup();
    const s = new PostgresStore(counted, { schema, ttl: { defaultTtl: 5, refreshOnRead: true } });
    await s.get(["warm"], "up"); // the schema check, once per store
    expect(await trips(() => s.put(["a", "b"], "k", { v: 1 }))).toBe(1);
    expect(await trips(() => s.get(["a", "b"], "k"))).toBe(1);
    expect(await trips(() => s.search(["a"], { filter: { v: 1 } }))).toBe(1);
    expect(await trips(() => s.search(["a"], { query: "x", mode: "text" }))).toBe(1);
    expect(await trips(() => s.listNamespaces({ prefix: ["a"], maxDepth: 1 }))).toBe(1);
    expect(await trips(() => s.delete(["a", "b"], "k"))).toBe(1);
    const ops = [
      ...Array.from({ length: 5 }, (_, i) => ({ namespace: ["n", String(i)], key: "k", value: { i } })),
      { namespace: ["n", "0"], key: "k", value: null },
      ...Array.from({ length: 5 }, (_, i) => ({ namespace: ["n", String(i)], key: "k" })),
      ...Array.from({ length: 3 }, (_, i) => ({ namespacePrefix: ["n"], filter: { i }, limit: 5, offset: 0 })),
      { matchConditions: [], limit: 10, offset: 0 },
      { matchConditions: [{ matchType: "suffix" as const, path: ["1"] }], limit: 10, offset: 0 },
    ];
    expect(await trips(() => s.batch(ops))).toBe(4);
  });
});

describe("input is refused before any SQL, naming the field", () => {
  // A pool on a port nothing listens on: any SQL would fail with a connection error instead.
  const nowhere = new PostgresStore(new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:1/none" }), { schema: "x" });
  const cases: [string, () => Promise<unknown>, string][] = [
    ["key not a string", () => nowhere.get(["a"], 5 as unknown as string), "get key"],
    ["NUL in a key", () => nowhere.put(["a"], "k\u0000", { v: 1 }), "put key"],
    ["NUL in a label", () => nowhere.get(["a\u0000"], "k"), "get namespace[0]"],
    ["U+0001 (the stored key's label separator) in a label", () => nowhere.put(["ok", "a\u0001b"], "k", { v: 1 }), "put namespace[1]"],
    ["a value that is an array", () => nowhere.put(["a"], "k", [1] as unknown as Record<string, unknown>), "put value"],
    ["NUL inside a value", () => nowhere.put(["a"], "k", { text: "a\u0000b" }), "put value"],
    ["a lone surrogate inside a value", () => nowhere.put(["a"], "k", { text: "\ud800" }), "put value"],
    ["NUL after a backslash inside a value", () => nowhere.put(["a"], "k", { text: "\\\u0000" }), "put value"],
    ["a negative limit", () => nowhere.search(["a"], { limit: -1 }), "search limit"],
    ["a TTL of zero", () => nowhere.put(["a"], "k", { v: 1 }, undefined, { ttl: 0 }), "put options.ttl"],
    ["a namespace too long", () => nowhere.get(["x".repeat(2000)], "k"), "get namespace"],
    ["a key too long", () => nowhere.get(["a"], "k".repeat(600)), "get key"],
    ["an unknown batch operation", () => nowhere.batch([{ nope: 1 } as never]), "batch operations[0]"],
    // Search inputs: Postgres text cannot hold NUL, and would hold U+FFFD for a lone surrogate.
    ["NUL in a search query", () => nowhere.search(["a"], { query: "a\u0000b" }), "search query"],
    ["a lone surrogate in a search query", () => nowhere.search(["a"], { query: "x\ud800", mode: "text" }), "search query"],
    ["NUL in a batch search's query", () => nowhere.batch([{ namespacePrefix: ["a"], query: "\u0000", limit: 1, offset: 0 }]), "batch operations[0] query"],
    ["NUL in a filter field name", () => nowhere.search(["a"], { filter: { "a\u0000b": 1 } }), 'search filter key "a\\u0000b"'],
    ["a lone surrogate in a filter field name", () => nowhere.search(["a"], { filter: { "\udc00": { $exists: true } } }), 'search filter key "\\udc00"'],
    ["NUL in a filter value", () => nowhere.search(["a"], { filter: { x: "a\u0000" } }), "search filter.x"],
    ["NUL in an $eq operand", () => nowhere.search(["a"], { filter: { x: { $eq: "a\u0000" } } }), "search filter.x.$eq"],
    ["a lone surrogate in a $gt operand", () => nowhere.search(["a"], { filter: { x: { $gt: "\ud800" } } }), "search filter.x.$gt"],
    ["NUL in an element of $in", () => nowhere.search(["a"], { filter: { x: { $in: ["ok", "a\u0000"] } } }), "search filter.x.$in"],
    ["a lone surrogate deep in an element of $nin", () => nowhere.search(["a"], { filter: { x: { $nin: [{ deep: ["\udfff"] }] } } }), "search filter.x.$nin"],
    ["NUL in a key of an object operand", () => nowhere.search(["a"], { filter: { x: { $ne: { "k\u0000": 1 } } } }), "search filter.x.$ne"],
    ["NUL in a batch search's filter field name", () => nowhere.batch([{ namespacePrefix: ["a"], filter: { "\u0000": 1 }, limit: 1, offset: 0 }]), 'batch operations[0] filter key "\\u0000"'],
  ];
  for (const [what, call, field] of cases) {
    it(what, async () => {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).field).toBe(field);
      // The input is named, never echoed: no NUL, no half of a character in the message.
      expect((err as InvalidInputError).message).not.toMatch(/[\u0000\ud800-\udfff]/);
    });
  }
});

describe('namespaces whose first label is "langgraph" (reserved by LangGraph), as in its InMemoryStore', () => {
  const ns = ["langgraph", "memories"];
  const reserved = 'Root label for namespace cannot be "langgraph"';

  it("get is null and delete does nothing, directly, in a batch and through a graph's store; put is refused by both", async () => {
    const s = await store();
    const mem = new InMemoryStore();
    const both = async <T>(call: (st: BaseStore) => Promise<T>) => [await call(mem), await call(s)];
    expect(await both((st) => st.get(ns, "k"))).toEqual([null, null]);
    expect(await both((st) => st.delete(ns, "k"))).toEqual([undefined, undefined]);
    expect(await both(async (st) => (await st.batch([{ namespace: ns, key: "k" }, { namespace: ns, key: "k", value: null }]))[0])).toEqual([null, null]);
    expect(await both((st) => st.search(ns))).toEqual([[], []]);
    // A graph hands its nodes the store wrapped in AsyncBatchedStore, whose get and delete send these to batch().
    const graphs = new AsyncBatchedStore(s);
    graphs.start();
    try {
      expect(await graphs.get(ns, "k")).toBeNull();
      await graphs.delete(ns, "k");
    } finally {
      await graphs.stop();
    }
    // Writes stay refused, with LangGraph's message (InMemoryStore's own batch() alone skips the check).
    await expect(mem.put(ns, "k", { v: 1 })).rejects.toThrow(reserved);
    await expect(s.put(ns, "k", { v: 1 })).rejects.toMatchObject({ name: "InvalidInputError", field: "put namespace", message: expect.stringContaining(reserved) });
    await expect(s.batch([{ namespace: ns, key: "k", value: { v: 1 } }])).rejects.toMatchObject({ field: "batch operations[0].namespace" });
  });

  it("an item there (stored by hand: no put can) is read and deleted as InMemoryStore reads and deletes one", async () => {
    const s = await store();
    const mem = new InMemoryStore();
    await mem.batch([{ namespace: ns, key: "k", value: { v: 1 } }]);
    await db.pool.query(`INSERT INTO ${s.schema}.store_items (ns_key, key, value) VALUES ($1, 'k', '{"v": 1}')`, [nsKey(ns)]);
    const read = async (st: BaseStore) => {
      const item = await st.get(ns, "k");
      return item && { namespace: item.namespace, key: item.key, value: item.value };
    };
    expect(await read(s)).toEqual(await read(mem));
    expect(await read(s)).toEqual({ namespace: ns, key: "k", value: { v: 1 } });
    await Promise.all([mem.delete(ns, "k"), s.delete(ns, "k")]);
    expect([await read(mem), await read(s)]).toEqual([null, null]);
  });
});

describe("the schema", () => {
  it("a store on your pool never migrates by itself: SchemaNotMigratedError says how", async () => {
    const s = new PostgresStore(db.pool, { schema: fresh() });
    await expect(s.get(["a"], "k")).rejects.toMatchObject({ name: "SchemaNotMigratedError", track: "store", message: expect.stringContaining("migrate --store") });
  });

  it("the official shape sets up on first use (ensureTables, default true), and not with ensureTables: false", async () => {
    const schema = fresh();
    const lazy = new PostgresStore({ connectionOptions: db.url, schema, ensureTables: false });
    await expect(lazy.get(["a"], "k")).rejects.toMatchObject({ name: "SchemaNotMigratedError" });
    const eager = new PostgresStore({ connectionOptions: db.url, schema });
    await eager.put(["a"], "k", { v: 1 });
    expect((await lazy.get(["a"], "k"))?.value).toEqual({ v: 1 });
    await Promise.all([lazy.stop(), eager.stop()]);
  });
});

async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("listNamespaces against a reference", () => {
  /** What listNamespaces must answer: match, truncate, distinct, sort (labels byte-wise), page. */
  function reference(all: string[][], o: { prefix?: string[]; suffix?: string[]; maxDepth?: number; limit: number; offset: number }): string[][] {
    const matches = (ns: string[], path: string[], at: "start" | "end") =>
      ns.length >= path.length && path.every((l, i) => l === "*" || l === ns[at === "start" ? i : ns.length - path.length + i]);
    const kept = all.filter((ns) => (!o.prefix || matches(ns, o.prefix, "start")) && (!o.suffix || matches(ns, o.suffix, "end")));
    const truncated = [...new Map(kept.map((ns) => ns.slice(0, o.maxDepth ?? ns.length)).map((ns) => [JSON.stringify(ns), ns])).values()];
    const cmp = (a: string[], b: string[]) => {
      for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return Buffer.compare(Buffer.from(a[i]!), Buffer.from(b[i]!));
      return a.length - b.length;
    };
    return truncated.sort(cmp).slice(o.offset, o.offset + o.limit);
  }

  it("matches it for namespaces of mixed depths and options of every kind", async () => {
    const s = await store();
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const labels = ["a", "ab", "a.b", "b", "x_y", "%", "z", "é"];
    const all = new Map<string, string[]>();
    for (let i = 0; i < 80; i++) {
      // Mostly up to 4 labels; some up to 12, past the depth where truncation switches method (sql/namespaces.ts).
      const ns = Array.from({ length: 1 + Math.floor(rand() * (i % 4 === 0 ? 12 : 4)) }, () => labels[Math.floor(rand() * labels.length)]!);
      all.set(JSON.stringify(ns), ns);
    }
    await s.batch([...all.values()].map((ns, i) => ({ namespace: ns, key: `k${i}`, value: { i } })));
    const namespaces = [...all.values()];
    const options = [];
    for (const prefix of [undefined, ["a"], ["a", "*"], ["*", "b"], ["a", "ab", "z"]]) {
      for (const suffix of [undefined, ["b"], ["*", "z"]]) {
        for (const maxDepth of [undefined, 1, 2, 3, 8, 9, 11, 64]) {
          for (const [limit, offset] of [[100, 0], [3, 0], [3, 2], [5, 7]] as const) options.push({ prefix, suffix, maxDepth, limit, offset });
        }
      }
    }
    for (const o of options) expect([JSON.stringify(o), await s.listNamespaces(o)]).toEqual([JSON.stringify(o), reference(namespaces, o)]);
  });
});
