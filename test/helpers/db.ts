/**
 * One fresh database per test file, on the server chosen by test/setup/global-setup.ts.
 *
 * @example
 * ```ts
 * const db = withTestDatabase("saver");
 * it("works", async () => {
 *   const { rows } = await db.pool.query("SELECT 1 AS one");
 *   expect(rows[0].one).toBe(1);
 * });
 * ```
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, inject } from "vitest";
import { PARTITIONS_SETTING } from "../../src/db/partitions.js";
import { citusDatabase, CITUS_DATABASE_PROPAGATION, lockWaitingSql, testCitus } from "./citus.js";
import { testPartitions } from "./partitions.js";
import { KNOWS_ELEMENTS_SQL } from "../../src/saver/element-codec.js";

export interface TestDatabase {
  /** Connection URL of the new database; make extra pools or clients from it. */
  url: string;
  /** A pool on the new database, owned by this helper: `drop()` ends it. */
  pool: pg.Pool;
  /** URL of the server's admin database (the one CREATE DATABASE runs from). */
  adminUrl: string;
  /**
   * Ends `pool` and drops the database WITH (FORCE). End your own pools first: FORCE terminates
   * their connections, and an idle pg client whose connection dies emits an `'error'` event.
   */
  drop(): Promise<void>;
}

/** Creates a uniquely named empty database; `label` only makes the name readable in `\l`. */
export async function createTestDatabase(label: string): Promise<TestDatabase> {
  const adminUrl = inject("pgAdminUrl");
  const slug = label.toLowerCase().replace(/[^a-z0-9]+/g, "_").slice(0, 30);
  // Random suffix: parallel files (and leftovers of killed runs on a shared server) never collide.
  const name = `t_${slug}_${randomBytes(5).toString("hex")}`;

  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${name}`;
  const url = dbUrl.toString();
  const citus = testCitus();

  await withAdmin(adminUrl, async (admin) => {
    if (citus) await admin.query(CITUS_DATABASE_PROPAGATION);
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
    // TEST_CITUS (test/helpers/citus.ts): a Citus database, migrated and distributed as docs/scaling-out.md says.
    if (citus) await citusDatabase(admin, url, name);
    // TEST_PARTITIONS (README "Tests"): every schema migrated in this database, by any test, gets its tables hash
    // partitioned, as a schema migrated with `partitions` does (src/db/partitions.ts, PARTITIONS_SETTING); and
    // JIT off, as README "Scaling out" advises for partitioned schemas (a fan-out read would compile for seconds).
    const partitions = testPartitions();
    if (partitions !== undefined) {
      await admin.query(`ALTER DATABASE ${pg.escapeIdentifier(name)} SET ${PARTITIONS_SETTING} = ${partitions}`);
      await admin.query(`ALTER DATABASE ${pg.escapeIdentifier(name)} SET jit = off`);
    }
  });

  const pool = testPool({ connectionString: url, application_name: `test:${slug}` });

  let dropped = false;
  return {
    url,
    pool,
    adminUrl,
    async drop() {
      if (dropped) return;
      dropped = true;
      await pool.end();
      // pool.end() resolves before its clients' sockets close, and the file's own pools (a store's, the official
      // one's, which have no 'error' listener left once ending) may still be closing: the FORCE drop would terminate
      // one mid-close, an uncaught error that fails the run. So first wait for the database's client backends to go
      // (bounded: one a test left open is then terminated, as before).
      await withAdmin(adminUrl, async (admin) => {
        for (const until = Date.now() + 5_000; Date.now() < until; await new Promise((r) => setTimeout(r, 20))) {
          const { rows } = await admin.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_catalog.pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
            [name],
          );
          if (rows[0]!.n === 0) return;
        }
      });
      const dropSql = `DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`;
      if (!citus) return withAdmin(adminUrl, (admin) => admin.query(dropSql)).then(() => undefined);
      // On Citus the drop reaches the workers too, where the coordinator's cached connections may still be closing:
      // a throwaway cluster keeps what it could not drop, and says so.
      await withAdmin(adminUrl, async (admin) => {
        await admin.query(CITUS_DATABASE_PROPAGATION);
        await admin.query(dropSql).catch((err: Error) => console.warn(`[citus] ${name} not dropped: ${err.message}`));
      });
    },
  };
}

/**
 * A pool on a test database that survives the database's FORCE drop. pool.end() resolves before
 * its clients' sockets are closed; the drop can then terminate one mid-close, and a client or a
 * pool without a listener would raise an uncaught 'error' that fails the whole run. An idle client
 * terminated by the server (a test that kills backends, the drop) is dropped by the pool, silently:
 * tests provoke it on purpose, and a connection lost that mattered fails the query that needed it.
 */
export function testPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on("connect", (client) => client.on("error", () => undefined));
  pool.on("error", () => undefined);
  return pool;
}

/**
 * Registers beforeAll/afterAll for the current file (or describe block) and returns an object whose
 * properties are readable from beforeAll on.
 */
export function withTestDatabase(label: string): Omit<TestDatabase, "drop"> {
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    db = await createTestDatabase(label);
  });
  afterAll(async () => {
    await db?.drop();
  });
  const current = (): TestDatabase => {
    if (!db) throw new Error(`withTestDatabase("${label}"): the database exists only from beforeAll on`);
    return db;
  };
  return {
    get url() {
      return current().url;
    },
    get pool() {
      return current().pool;
    },
    get adminUrl() {
      return current().adminUrl;
    },
  };
}

async function withAdmin<T>(adminUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * Resolves once a backend of the current database whose query contains `marker` waits on a lock
 * (a statement the test froze by holding a row it needs); throws after `timeoutMs` naming the marker.
 *
 * @example
 * ```ts
 * const pruning = prune({ pool, keepLast: 1, grace: 0 });
 * await waitForLockWait(db.pool, "prune: round");
 * ```
 */
export async function waitForLockWait(pool: pg.Pool, marker: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM ${lockWaitingSql()} a WHERE position($1 in a.query) > 0`,
      [marker],
    );
    if (rows[0].n > 0) return;
    if (Date.now() > deadline) throw new Error(`nobody waited on a lock running ${marker}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Run `text` in a transaction that says it knows element rows, as this package's deletes do
 * (migration 0008's guard refuses any other delete of one): for tests that delete them by hand, as
 * another process or a corruption would.
 *
 * @example
 * ```ts
 * await queryKnowingElements(db.pool, "DELETE FROM checkpoint_blobs WHERE thread_id = $1", [thread]);
 * ```
 */
export async function queryKnowingElements(pool: pg.Pool, text: string, values: unknown[] = []): Promise<pg.QueryResult> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query(KNOWS_ELEMENTS_SQL);
    const result = await client.query(text, values);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
