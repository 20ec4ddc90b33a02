/**
 * Least privilege: the schema owner migrates and grants; the application role
 * gets only what `grantStatements` gives it. Every saver operation works as
 * that role, and every store operation where the store is migrated (issue 37);
 * DDL (and migrating) does not.
 */
import { randomBytes } from "node:crypto";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CheckpointConflictError, grantStatements, InvalidOptionsError, migrate, migrateStore, MigrationError, PostgresSaver, PostgresStore } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { addressGraph, approvalGraph, tid } from "../helpers/graphs.js";
import { Command } from "@langchain/langgraph";

const db = withTestDatabase("privileges");
// Roles are cluster-wide: unique names, dropped at the end.
const suffix = randomBytes(4).toString("hex");
const OWNER = `lgcp_owner_${suffix}`;
const APP = `lgcp_app ${suffix}`; // a space: the name must be quoted everywhere
const SCHEMA = "agents";
/** A schema with the checkpointer only, one with the store only, and one with neither. */
const PLAIN = "agents_plain";
const MEMORY = "memory";
const BARE = "bare";
const PASSWORD = `pw-${randomBytes(8).toString("hex")}`;

let ownerPool: pg.Pool;
let appPool: pg.Pool;

function urlAs(role: string): string {
  const u = new URL(db.url);
  u.username = encodeURIComponent(role);
  u.password = PASSWORD;
  return u.toString();
}

beforeAll(async () => {
  const dbName = new URL(db.url).pathname.slice(1);
  await db.pool.query(`CREATE ROLE ${pg.escapeIdentifier(OWNER)} LOGIN PASSWORD '${PASSWORD}'`);
  await db.pool.query(`CREATE ROLE ${pg.escapeIdentifier(APP)} LOGIN PASSWORD '${PASSWORD}'`);
  // The owner may create schemas in this database; the app role gets nothing but CONNECT (PUBLIC's default).
  await db.pool.query(`GRANT CREATE ON DATABASE ${pg.escapeIdentifier(dbName)} TO ${pg.escapeIdentifier(OWNER)}`);
  ownerPool = testPool({ connectionString: urlAs(OWNER), max: 2 });
  appPool = testPool({ connectionString: urlAs(APP), max: 4, application_name: "privileges-app" });
  await migrate({ pool: ownerPool, schema: SCHEMA });
  await migrateStore({ pool: ownerPool, schema: SCHEMA });
  for (const sql of grantStatements({ schema: SCHEMA, role: APP })) await ownerPool.query(sql);
});

/** Run `statements` as the pool's role, in order; the NOTICEs they raised. */
async function runAll(pool: pg.Pool, statements: string[]): Promise<string[]> {
  const client = await pool.connect();
  const notices: string[] = [];
  const onNotice = (n: { severity?: string; message?: string }) => n.severity === "NOTICE" && notices.push(n.message ?? "");
  client.on("notice", onNotice);
  try {
    for (const sql of statements) await client.query(sql);
  } finally {
    client.off("notice", onNotice);
    client.release();
  }
  return notices;
}

/** The role's privileges on the tables of `schema`, as the catalog lists them. */
async function tablePrivileges(schema: string): Promise<{ table_name: string; privs: string }[]> {
  const { rows } = await db.pool.query(
    `SELECT table_name, string_agg(privilege_type, ',' ORDER BY privilege_type) AS privs
       FROM information_schema.role_table_grants WHERE grantee = $1 AND table_schema = $2
      GROUP BY table_name ORDER BY table_name`,
    [APP, schema],
  );
  return rows;
}

afterAll(async () => {
  await appPool?.end();
  await ownerPool?.end();
  // Objects of the owner live in the test database: drop them there, then the roles.
  await db.pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA}, ${PLAIN}, ${MEMORY}, ${BARE} CASCADE`);
  await db.pool.query(`DROP OWNED BY ${pg.escapeIdentifier(OWNER)}, ${pg.escapeIdentifier(APP)}`);
  await db.pool.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(APP)}`);
  await db.pool.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(OWNER)}`);
});

describe("grantStatements", () => {
  it("grants USAGE on the schema, DML on the saver's tables, SELECT on the migrations table, EXECUTE on the write gate, the store's where it is migrated; names quoted", () => {
    expect(grantStatements({ schema: "we'i\"rd", role: "app; DROP TABLE x" })).toEqual([
      'GRANT USAGE ON SCHEMA "we\'i""rd" TO "app; DROP TABLE x"',
      'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "we\'i""rd".checkpoints, "we\'i""rd".checkpoint_writes, "we\'i""rd".checkpoint_blobs, "we\'i""rd".checkpoint_heads, "we\'i""rd".checkpoint_tombstones, "we\'i""rd".checkpointer_retention TO "app; DROP TABLE x"',
      'GRANT SELECT ON TABLE "we\'i""rd".checkpointer_migrations TO "app; DROP TABLE x"',
      'GRANT EXECUTE ON FUNCTION "we\'i""rd".checkpointer_thread_gate(text, text, text, text[], boolean), "we\'i""rd".checkpointer_put_gate(text, text, text, text, text, jsonb, boolean) TO "app; DROP TABLE x"',
      `DO $lgcp_grants$ BEGIN
  IF pg_catalog.to_regclass('"we''i""rd".checkpointer_store_migrations') IS NULL THEN
    RAISE NOTICE '%', 'schema "we''i""rd" holds no store (PostgresStore): nothing of it was granted; run these again once it is migrated (migrate --store)';
  ELSE
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "we'i""rd".store_items TO "app; DROP TABLE x";
    GRANT SELECT ON TABLE "we'i""rd".checkpointer_store_migrations TO "app; DROP TABLE x";
    REVOKE TRUNCATE, REFERENCES, TRIGGER ON TABLE "we'i""rd".store_items FROM "app; DROP TABLE x";
    IF pg_catalog.to_regclass('"we''i""rd".store_item_vectors') IS NOT NULL THEN
      GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "we'i""rd".store_item_vectors TO "app; DROP TABLE x";
      REVOKE TRUNCATE, REFERENCES, TRIGGER ON TABLE "we'i""rd".store_item_vectors FROM "app; DROP TABLE x";
    END IF;
  END IF;
END $lgcp_grants$`,
      'REVOKE CREATE ON SCHEMA "we\'i""rd" FROM "app; DROP TABLE x"',
      'REVOKE TRUNCATE, REFERENCES, TRIGGER ON TABLE "we\'i""rd".checkpoints, "we\'i""rd".checkpoint_writes, "we\'i""rd".checkpoint_blobs, "we\'i""rd".checkpoint_heads, "we\'i""rd".checkpoint_tombstones, "we\'i""rd".checkpointer_retention FROM "app; DROP TABLE x"',
      "DO $lgcp_grants$ BEGIN EXECUTE pg_catalog.format('REVOKE TEMPORARY ON DATABASE %I FROM %I', pg_catalog.current_database(), 'app; DROP TABLE x'); END $lgcp_grants$",
    ]);
    expect(grantStatements({ role: "app" })[0]).toBe('GRANT USAGE ON SCHEMA "public" TO "app"');
    for (const role of ["", "PUBLIC", "a\u0000b", "x".repeat(64), 42, "a$lgcp_grants$b"]) {
      expect(() => grantStatements({ role: role as string })).toThrow(InvalidOptionsError);
    }
    expect(() => grantStatements({ role: "app", schema: "pg_catalog" })).toThrow(InvalidOptionsError);
    expect(() => grantStatements({ role: "app", schema: "a$lgcp_grants$b" })).toThrow(InvalidOptionsError);
    for (const store of ["yes", 1, "all"]) expect(() => grantStatements({ role: "app", store: store as never })).toThrow(InvalidOptionsError);
    // store: false, the checkpointer's alone; store: "only", the store's alone, required.
    expect(grantStatements({ role: "app", store: false }).join("\n")).not.toMatch(/store/);
    const only = grantStatements({ role: "app", store: "only" }).join("\n");
    expect(only).not.toMatch(/checkpoints|checkpointer_migrations|checkpointer_thread_gate/);
    expect(only).toMatch(/RAISE EXCEPTION '%', 'schema "public" holds no store \(PostgresStore\): run migrate --store-only first'/);
  });

  it("are idempotent (running them twice is harmless)", async () => {
    for (const sql of grantStatements({ schema: SCHEMA, role: APP })) await ownerPool.query(sql);
  });
});

describe("the application role", () => {
  it("holds exactly the granted privileges (checked in the catalog)", async () => {
    expect(await tablePrivileges(SCHEMA)).toEqual([
      { table_name: "checkpoint_blobs", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "checkpoint_heads", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "checkpoint_tombstones", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "checkpoint_writes", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "checkpointer_migrations", privs: "SELECT" },
      { table_name: "checkpointer_retention", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "checkpointer_store_migrations", privs: "SELECT" },
      { table_name: "checkpoints", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "store_items", privs: "DELETE,INSERT,SELECT,UPDATE" },
    ]);
    // EXECUTE on the write gates by its own grant, not only PUBLIC's (which default privileges may take away).
    for (const gate of ["checkpointer_thread_gate(text, text, text, text[], boolean)", "checkpointer_put_gate(text, text, text, text, text, jsonb, boolean)"]) {
      const { rows: fns } = await db.pool.query(
        `SELECT a.privilege_type FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a
          WHERE p.oid = $1::regprocedure AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $2)`,
        [`${SCHEMA}.${gate}`, APP],
      );
      expect(fns, gate).toEqual([{ privilege_type: "EXECUTE" }]);
    }
    const { rows: who } = await appPool.query("SELECT current_user AS u, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user");
    expect(who[0]).toEqual({ u: APP, rolsuper: false, rolcreaterole: false, rolcreatedb: false });
  });

  it("runs every saver operation: put, putWrites, getTuple, list, getDeltaChannelHistory, deleteThread, graphs with interrupts", async () => {
    const saver = new PostgresSaver(appPool, { schema: SCHEMA });
    const thread = uuid6(-3);
    const root = makeCheckpoint({ msgs: ["a"] });
    const c1 = await saver.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, root, meta(-1), root.channel_versions);
    await saver.putWrites(c1, [["msgs", "b"]], "task-1", "");
    await saver.putWrites(c1, [["__error__", { message: "boom" }]], "task-2", ""); // special writes update in place
    await saver.putWrites(c1, [["__error__", { message: "boom 2" }]], "task-2", "");
    const child = makeCheckpoint({ msgs: ["a", "b"] }, { msgs: `${"2".padStart(32, "0")}.1` });
    const c2 = await saver.put(c1, child, meta(0), child.channel_versions);
    const tuple = await saver.getTuple(c1);
    expect(tuple?.pendingWrites).toEqual([
      ["task-1", "msgs", "b"],
      ["task-2", "__error__", { message: "boom 2" }],
    ]);
    expect((await saver.getTuple({ configurable: { thread_id: thread } }))?.checkpoint.id).toBe(child.id);
    const listed = [];
    for await (const t of saver.list({ configurable: { thread_id: thread } }, { filter: { source: "loop" } })) listed.push(t.checkpoint.id);
    expect(listed).toEqual([child.id]);
    const history = await saver.getDeltaChannelHistory({ config: c2, channels: ["msgs"] });
    expect(history.msgs?.seed).toEqual(["a"]);

    const graphThread = tid("priv-graph");
    expect(await addressGraph(saver).invoke({}, { configurable: { thread_id: graphThread } })).toEqual({ name: "pavaneeshwar", address: "Hyderabad residency" });
    const approvalThread = tid("priv-approval");
    await approvalGraph(saver).invoke({}, { configurable: { thread_id: approvalThread } });
    expect(await approvalGraph(saver).invoke(new Command({ resume: "yes" }), { configurable: { thread_id: approvalThread } })).toMatchObject({ published: true });

    await saver.deleteThread(thread);
    expect(await saver.getTuple({ configurable: { thread_id: thread } })).toBeUndefined();
  });

  it("linear mode: conflicts are detected (row locks and head moves work under the role)", async () => {
    const saver = new PostgresSaver(appPool, { schema: SCHEMA, lineage: "linear" });
    const thread = uuid6(-3);
    const root = makeCheckpoint({ x: 0 });
    const head = await saver.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, root, meta(-1), root.channel_versions);
    const a = makeCheckpoint({ x: 1 }, { x: `${"2".padStart(32, "0")}.1` });
    const b = makeCheckpoint({ x: 2 }, { x: `${"2".padStart(32, "0")}.2` });
    const results = await Promise.allSettled([saver.put(head, a, meta(0), a.channel_versions), saver.put(head, b, meta(0), b.channel_versions)]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const lost = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(lost?.reason).toBeInstanceOf(CheckpointConflictError);
  });

  it("cannot run DDL: CREATE, ALTER, DROP, TRUNCATE, CREATE SCHEMA all fail with 42501", async () => {
    const ddl = [
      `CREATE TABLE ${SCHEMA}.evil (id int)`,
      `CREATE TABLE public.evil (id int)`,
      `ALTER TABLE ${SCHEMA}.checkpoints ADD COLUMN evil int`,
      `ALTER TABLE ${SCHEMA}.checkpoints DISABLE TRIGGER ALL`,
      `DROP TABLE ${SCHEMA}.checkpoint_blobs`,
      `DROP INDEX ${SCHEMA}.checkpoints_lineage_created_at`,
      `TRUNCATE ${SCHEMA}.checkpoint_writes`,
      `CREATE INDEX evil ON ${SCHEMA}.checkpoints (created_at)`,
      `CREATE SCHEMA evil`,
      `CREATE FUNCTION ${SCHEMA}.evil() RETURNS int LANGUAGE sql AS 'SELECT 1'`,
      `INSERT INTO ${SCHEMA}.checkpointer_migrations (version, name, sha256) VALUES (999, 'evil', 'x')`,
      `DELETE FROM ${SCHEMA}.checkpointer_migrations`,
    ];
    for (const sql of ddl) {
      const error = await appPool.query(sql).then(
        () => undefined,
        (e: { code?: string }) => e,
      );
      expect({ sql, code: error?.code }).toEqual({ sql, code: "42501" });
    }
    // It cannot pass its privileges on either (a warning, and no effect).
    await appPool.query(`GRANT SELECT ON ${SCHEMA}.checkpoints TO PUBLIC`);
    const { rows } = await db.pool.query("SELECT 1 FROM information_schema.role_table_grants WHERE grantee = 'PUBLIC' AND table_schema = $1", [SCHEMA]);
    expect(rows).toHaveLength(0);
  });

  it("cannot migrate: setup() fails with a MigrationError whose cause is 42501, and changes nothing", async () => {
    const saver = new PostgresSaver(appPool, { schema: SCHEMA });
    // Already migrated: nothing to do, so nothing is attempted... except the lock and reads, which the role may do.
    // A schema the role does not own shows the refusal.
    const other = new PostgresSaver(appPool, { schema: "app_owned_nothing" });
    const error = await other.setup().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as MigrationError & { cause: { code?: string } }).cause.code).toBe("42501");
    const { rows } = await db.pool.query("SELECT 1 FROM pg_namespace WHERE nspname = 'app_owned_nothing'");
    expect(rows).toHaveLength(0);
    // On the migrated schema, setup() is a no-op that the role can run (it only reads).
    expect((await saver.setup()).applied).toEqual([]);
  });
});

describe("the store (issue 37)", () => {
  it("runs every store operation as the role, beside the saver: what opening does (setup, the schema check), put, get, search, listNamespaces, batch, delete, the TTL sweep, getStats", async () => {
    // The official config's shape sets up at start (ensureTables); open() sets up too; on the caller's pool, only the schema check.
    const official = new PostgresStore({ connectionOptions: urlAs(APP), schema: SCHEMA, ttl: { defaultTtl: 60 } });
    const opened = await PostgresStore.open({ databaseUrl: urlAs(APP), schema: SCHEMA, log: false });
    const mine = new PostgresStore(appPool, { schema: SCHEMA });
    try {
      await official.start();
      await official.put(["users", "u1"], "prefs", { food: "pasta", n: 1 });
      await opened.put(["users", "u2"], "note", { text: "likes hiking" });
      expect((await mine.get(["users", "u1"], "prefs"))?.value).toEqual({ food: "pasta", n: 1 });
      expect((await mine.search(["users"], { filter: { n: 1 } })).map((i) => i.key)).toEqual(["prefs"]);
      expect((await opened.search(["users"], { query: "hiking", mode: "text" })).map((i) => i.key)).toEqual(["note"]);
      expect(await mine.listNamespaces({ prefix: ["users"] })).toEqual([["users", "u1"], ["users", "u2"]]);
      const [item] = await mine.batch([{ namespace: ["users", "u2"], key: "note" }, { namespace: ["users", "u2"], key: "more", value: { x: 1 } }] as const);
      expect(item?.value).toEqual({ text: "likes hiking" });
      await official.delete(["users", "u1"], "prefs");
      expect(await mine.get(["users", "u1"], "prefs")).toBeNull();
      // The sweep (an advisory lock and a delete) as the role: the owner makes one item expire.
      await ownerPool.query(`UPDATE ${SCHEMA}.store_items SET expires_at = now() - interval '1 minute' WHERE key = 'more'`);
      expect(await mine.sweepExpiredItems()).toBe(1);
      expect(await mine.getStats()).toMatchObject({ totalItems: 1, namespaceCount: 1 });
      await mine.delete(["users", "u2"], "note");
    } finally {
      await official.stop();
      await opened.stop();
    }
  });

  it("a schema without the store: the statements run and say so, granting nothing of it; run again once it is migrated, the store works", async () => {
    await migrate({ pool: ownerPool, schema: PLAIN });
    const notices = await runAll(ownerPool, grantStatements({ schema: PLAIN, role: APP }));
    expect(notices).toEqual([`schema "${PLAIN}" holds no store (PostgresStore): nothing of it was granted; run these again once it is migrated (migrate --store)`]);
    expect((await tablePrivileges(PLAIN)).map((r) => r.table_name)).not.toContain("store_items");
    await migrateStore({ pool: ownerPool, schema: PLAIN });
    expect(await runAll(ownerPool, grantStatements({ schema: PLAIN, role: APP }))).toEqual([]);
    const store = new PostgresStore(appPool, { schema: PLAIN });
    await store.put(["a"], "k", { v: 1 });
    expect((await store.get(["a"], "k"))?.value).toEqual({ v: 1 });
  });

  it('store: "only", a schema holding the store alone: its grants, the vector table\'s when there is one; none of the checkpointer\'s; a schema without the store refused', async () => {
    await migrateStore({ pool: ownerPool, schema: MEMORY });
    // The vector table exists once a store with an index is set up (pgvector); its grants need only a table of that name.
    await ownerPool.query(`CREATE TABLE ${MEMORY}.store_item_vectors (ns_key text, key text, field_path text)`);
    expect(await runAll(ownerPool, grantStatements({ schema: MEMORY, role: APP, store: "only" }))).toEqual([]);
    expect(await tablePrivileges(MEMORY)).toEqual([
      { table_name: "checkpointer_store_migrations", privs: "SELECT" },
      { table_name: "store_item_vectors", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "store_items", privs: "DELETE,INSERT,SELECT,UPDATE" },
    ]);
    const store = new PostgresStore(appPool, { schema: MEMORY });
    await store.put(["a"], "k", { v: 1 });
    expect(await store.search(["a"])).toHaveLength(1);
    await ownerPool.query(`CREATE SCHEMA ${BARE}`);
    await expect(runAll(ownerPool, grantStatements({ schema: BARE, role: APP, store: "only" }))).rejects.toThrow(`schema "${BARE}" holds no store (PostgresStore): run migrate --store-only first`);
  });
});

describe("what grants takes away, and what stays (issue #15, row 11)", () => {
  it("TEMP: revoked from the role, and from PUBLIC on request; every saver operation still works", async () => {
    const dbName = pg.escapeIdentifier(new URL(db.url).pathname.slice(1));
    const canTemp = async () => (await db.pool.query("SELECT has_database_privilege($1, current_database(), 'TEMP') AS ok", [APP])).rows[0].ok as boolean;
    // Granted explicitly at some point, and held through PUBLIC (Postgres' default).
    await db.pool.query(`GRANT TEMPORARY ON DATABASE ${dbName} TO ${pg.escapeIdentifier(APP)}`);
    // Without revokePublicTemp the role's own grant goes, PUBLIC's stays: it still has TEMP.
    for (const sql of grantStatements({ schema: SCHEMA, role: APP })) await ownerPool.query(sql);
    expect(await canTemp()).toBe(true);
    // The database owner revokes it from PUBLIC as well.
    for (const sql of grantStatements({ schema: SCHEMA, role: APP, revokePublicTemp: true })) await db.pool.query(sql);
    expect(await canTemp()).toBe(false);
    const temp = await appPool.query("CREATE TEMP TABLE evil (id int)").catch((e: { code?: string }) => e);
    expect((temp as { code?: string }).code).toBe("42501");

    const saver = new PostgresSaver(appPool, { schema: SCHEMA });
    const thread = tid("priv-after-revoke");
    expect(await addressGraph(saver).invoke({}, { configurable: { thread_id: thread } })).toEqual({ name: "pavaneeshwar", address: "Hyderabad residency" });
    await saver.deleteThread(thread);
  });

  it("what stays: LOCK TABLE in any mode, which Postgres allows to any role that may UPDATE or DELETE (README, Least privilege)", async () => {
    const client = await appPool.connect();
    try {
      await client.query("BEGIN");
      await client.query(`LOCK TABLE ${SCHEMA}.checkpoints IN ACCESS EXCLUSIVE MODE`);
      await client.query("ROLLBACK");
    } finally {
      client.release();
    }
  });
});
