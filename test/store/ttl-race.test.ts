/**
 * Reads that refresh TTLs racing the sweeper (issue 37). The rule: a read
 * that returns an item leaves it stored with the refreshed expiry;
 * otherwise it does not return it. A read whose snapshot saw the item a
 * moment before its expiry, while the sweeper deleted it a moment after,
 * used to return it anyway: its refresh found the row deleted, and the item
 * was gone though its refreshed TTL had not passed.
 *
 * First the race held open: a sweep that deleted the item and has not
 * committed, a read waiting on its row lock; then a stress test without
 * anything held, reads at the expiry and a sweeper in a loop.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresStore } from "../../src/index.js";
import { nsKey } from "../../src/store/input.js";
import { storeStatements, sweepLockWaiting } from "../../src/store/sql/index.js";
import { storeDistributionSql, testCitus } from "../helpers/citus.js";
import { testPool, waitForLockWait, withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("store-ttl-race");
const pools: pg.Pool[] = [];
afterAll(async () => {
  for (const p of pools) await p.end();
});
/** The refreshed TTL outlasts every test here: no refreshed item may expire before it is checked. */
const TTL_MINUTES = 10;
let schemas = 0;
async function store(): Promise<PostgresStore> {
  const pool = testPool({ connectionString: db.url, max: 8 });
  pools.push(pool);
  const s = new PostgresStore(pool, { schema: `ttl_race_${schemas++}`, ttl: { defaultTtl: TTL_MINUTES, refreshOnRead: true } });
  await s.setup();
  // On Citus (npm run test:citus), distributed as docs/scaling-out.md says.
  if (testCitus()) for (const statement of storeDistributionSql(s.schema)) await db.pool.query(statement);
  return s;
}
/** The item as stored, or undefined. */
const stored = async (s: PostgresStore, key: string) =>
  (await db.pool.query<{ expires_at: Date }>(`SELECT expires_at FROM ${s.schema}.store_items WHERE key = $1`, [key])).rows[0];

describe("a refreshing read and a sweep that deleted its item first", () => {
  let s: PostgresStore;
  beforeAll(async () => {
    s = await store();
  });

  /**
   * `read` runs while a sweep holds the item deleted: the item expired for the sweep (its
   * expiry moved into the past, as time moves it), not yet for the read, whose snapshot is
   * taken after the sweep's delete and before its commit. The read waits on the row, then the sweep commits.
   */
  async function raced<T>(key: string, read: () => Promise<T>): Promise<T> {
    const sweep = await db.pool.connect();
    try {
      await sweep.query("BEGIN");
      await sweep.query(`UPDATE ${s.schema}.store_items SET expires_at = pg_catalog.now() - interval '1 second' WHERE key = $1`, [key]);
      await sweep.query(sweepLockWaiting, [s.schema]);
      expect((await sweep.query(storeStatements(s.schema).sweep, [1000])).rows[0]).toEqual({ n: 1 });
      const reading = read();
      reading.catch(() => undefined);
      await waitForLockWait(db.pool, `${s.schema}".store_items it SET expires_at`);
      await sweep.query("COMMIT");
      return await reading;
    } finally {
      sweep.release();
    }
  }

  it("get returns null: the item is gone", async () => {
    await s.put(["race"], "get", { v: 1 });
    expect(await raced("get", () => s.get(["race"], "get"))).toBeNull();
    expect(await stored(s, "get")).toBeUndefined();
  });

  it("a batch's gets return null for it, and the other items refreshed", async () => {
    await s.put(["race"], "batch", { v: 1 });
    await s.put(["race"], "other", { v: 1 });
    const [gone, other] = await raced("batch", () => s.batch([{ namespace: ["race"], key: "batch" }, { namespace: ["race"], key: "other" }]));
    expect(gone).toBeNull();
    expect(other?.key).toBe("other");
    expect((await stored(s, "other"))!.expires_at.getTime()).toBeGreaterThan(Date.now() + (TTL_MINUTES - 1) * 60_000);
  });

  it("search with refreshTtl leaves it out, the others in their order", async () => {
    for (const key of ["a", "searched", "c"]) await s.put(["race", "search"], key, { text: `needle ${key}` });
    const hits = await raced("searched", () => s.search(["race", "search"], { refreshTtl: true }));
    expect(hits.map((h) => h.key)).toEqual(["c", "a"]);
  });
});

describe("stress: reads at the expiry, a sweeper deleting in a loop", () => {
  /** Rounds of reads at an expiry; items per kind of read per round; items a slow read goes through besides. */
  const ROUNDS = 5;
  const ITEMS = 30;
  const HAY = 6000;

  it("every item a read returned is stored afterwards, its expiry later than the read", async () => {
    const s = await store();
    const sweeperPool = testPool({ connectionString: db.url, max: 1 });
    pools.push(sweeperPool);
    // Another process's sweeper, deleting expired items as fast as it can.
    const sweeper = new PostgresStore(sweeperPool, { schema: s.schema });
    // Slow reads hold their snapshot across the expiry (a text search through thousands of items, a batch
    // of thousands of gets reaching the items last): the sweeper deletes the items in between every time.
    // Plain gets meet the expiry by chance, a get's snapshot a moment before it, the sweeper's a moment after.
    for (let from = 0; from < HAY; from += 2000) {
      await s.batch(Array.from({ length: 2000 }, (_, i) => ({ namespace: ["stress", "search"], key: `hay${from + i}`, value: { text: `straw ${from + i}` } })));
    }
    const absent = Array.from({ length: HAY }, (_, i) => ({ namespace: ["stress", "batch"], key: `absent${i}` }));

    let sweeping = true;
    const sweeps = (async () => {
      let n = 0;
      for (; sweeping; n++) await sweeper.sweepExpiredItems();
      return n;
    })();
    /** Each item a read returned, with the time the read was sent. */
    const returned: { read: string; key: string; sentAt: number }[] = [];
    const read = async <T extends { key: string } | null>(kind: string, call: () => Promise<T[]>) => {
      const sentAt = Date.now();
      for (const item of await call()) if (item) returned.push({ read: kind, key: item.key, sentAt });
    };
    const expiring = async (keys: string[]) =>
      (await db.pool.query(`SELECT 1 FROM ${s.schema}.store_items WHERE key = ANY ($1) AND expires_at < pg_catalog.now() + interval '2 minutes' LIMIT 1`, [keys])).rows.length > 0;
    const running = async (marker: string) =>
      (await db.pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND position($1 in query) > 0", [marker])).rows.length > 0;

    try {
      for (let round = 0; round < ROUNDS; round++) {
        const keys = (kind: string) => Array.from({ length: ITEMS }, (_, i) => `r${round}-${kind}${i}`);
        const [searched, batched, got] = [keys("search"), keys("batch"), keys("get")];
        const all = [...searched, ...batched, ...got];
        await s.batch([
          ...searched.map((key) => ({ namespace: ["stress", "search"], key, value: { text: `needle ${key}`, round } })),
          ...batched.map((key) => ({ namespace: ["stress", "batch"], key, value: { round } })),
          ...got.map((key) => ({ namespace: ["stress", "get"], key, value: { round } })),
        ]);
        // Unrefreshed: a minute to go, where a refresh gives TTL_MINUTES.
        await db.pool.query(`UPDATE ${s.schema}.store_items SET expires_at = pg_catalog.now() + interval '1 minute' WHERE key = ANY ($1)`, [all]);
        const slow = [
          { marker: "jsonb_to_tsvector", call: () => read("search", () => s.search(["stress", "search"], { query: "needle", mode: "text", filter: { round }, limit: ITEMS, refreshTtl: true })) },
          { marker: "WITH ORDINALITY", call: () => read("batch", () => s.batch([...absent, ...batched.map((key) => ({ namespace: ["stress", "batch"], key }))])) },
        ].map(({ marker, call }) => {
          const r = { marker, seen: false, settled: false, done: call() };
          void r.done.finally(() => (r.settled = true));
          return r;
        });
        // The slow reads' snapshots are taken (they run) before the items expire.
        for (const r of slow) while (!r.seen && !r.settled) r.seen = await running(r.marker);
        // Only the items no read has refreshed (or is refreshing: never waiting for one, never undoing one). One
        // namespace per statement: Citus locks rows ahead only in a statement on one shard, and takes no VOLATILE
        // function in an UPDATE (the instant is read first).
        const { rows: soon } = await db.pool.query<{ at: Date }>("SELECT pg_catalog.clock_timestamp() + interval '5 milliseconds' AS at");
        for (const kind of ["search", "batch", "get"]) {
          await db.pool.query(
            `UPDATE ${s.schema}.store_items SET expires_at = $3
              WHERE ns_key = $2 AND key IN (SELECT key FROM ${s.schema}.store_items WHERE ns_key = $2 AND key = ANY ($1)
                                             AND expires_at < pg_catalog.now() + interval '2 minutes' FOR UPDATE SKIP LOCKED)`,
            [all, nsKey(["stress", kind]), soon[0]!.at],
          );
        }
        // Plain gets over the items, from 4 connections, until none of them is left to expire (each refreshed or swept).
        const gets = Array.from({ length: 4 }, async (_, worker) => {
          do {
            for (let i = worker; i < got.length; i += 4) await read("get", async () => [await s.get(["stress", "get"], got[i]!)]);
          } while (await expiring(got));
        });
        await Promise.all([...slow.map((r) => r.done), ...gets]);
        while (await expiring(all)) await sweeper.sweepExpiredItems();
      }
    } finally {
      sweeping = false;
      await sweeps;
    }
    expect(await sweeps).toBeGreaterThan(0);

    const { rows } = await db.pool.query<{ key: string; expires_at: Date }>(`SELECT key, expires_at FROM ${s.schema}.store_items WHERE key LIKE 'r%'`);
    const expiry = new Map(rows.map((r) => [r.key, r.expires_at.getTime()]));
    const of = (kind: string) => returned.filter((r) => r.read === kind);
    const lost = (kind: string) => of(kind).filter((r) => !(expiry.get(r.key)! > r.sentAt)).map((r) => r.key);
    expect(
      { get: lost("get"), batch: lost("batch"), search: lost("search") },
      `items returned: get ${of("get").length}, batch ${of("batch").length}, search ${of("search").length}`,
    ).toEqual({ get: [], batch: [], search: [] });
  });
});
