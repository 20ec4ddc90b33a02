/**
 * Least privilege: the schema owner migrates and grants; the application role
 * gets only what `grantStatements` gives it. Every saver operation works as
 * that role; DDL (and migrating) does not.
 */
import { randomBytes } from "node:crypto";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CheckpointConflictError, grantStatements, InvalidOptionsError, migrate, MigrationError, PostgresSaver } from "../../src/index.js";
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
  for (const sql of grantStatements({ schema: SCHEMA, role: APP })) await ownerPool.query(sql);
});

afterAll(async () => {
  await appPool?.end();
  await ownerPool?.end();
  // Objects of the owner live in the test database: drop them there, then the roles.
  await db.pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await db.pool.query(`DROP OWNED BY ${pg.escapeIdentifier(OWNER)}, ${pg.escapeIdentifier(APP)}`);
  await db.pool.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(APP)}`);
  await db.pool.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(OWNER)}`);
});

describe("grantStatements", () => {
  it("grants USAGE on the schema, DML on the saver's tables, SELECT on the migrations table, EXECUTE on the write gate; names quoted", () => {
    expect(grantStatements({ schema: 'we"ird', role: "app; DROP TABLE x" })).toEqual([
      'GRANT USAGE ON SCHEMA "we""ird" TO "app; DROP TABLE x"',
      'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "we""ird".checkpoints, "we""ird".checkpoint_writes, "we""ird".checkpoint_blobs, "we""ird".checkpoint_heads, "we""ird".checkpoint_tombstones, "we""ird".checkpointer_retention TO "app; DROP TABLE x"',
      'GRANT SELECT ON TABLE "we""ird".checkpointer_migrations TO "app; DROP TABLE x"',
      'GRANT EXECUTE ON FUNCTION "we""ird".checkpointer_thread_gate(text, text, text, text[], boolean), "we""ird".checkpointer_put_gate(text, text, text, text, text, jsonb, boolean) TO "app; DROP TABLE x"',
      'REVOKE CREATE ON SCHEMA "we""ird" FROM "app; DROP TABLE x"',
      'REVOKE TRUNCATE, REFERENCES, TRIGGER ON TABLE "we""ird".checkpoints, "we""ird".checkpoint_writes, "we""ird".checkpoint_blobs, "we""ird".checkpoint_heads, "we""ird".checkpoint_tombstones, "we""ird".checkpointer_retention FROM "app; DROP TABLE x"',
      "DO $lgcp_grants$ BEGIN EXECUTE pg_catalog.format('REVOKE TEMPORARY ON DATABASE %I FROM %I', pg_catalog.current_database(), 'app; DROP TABLE x'); END $lgcp_grants$",
    ]);
    expect(grantStatements({ role: "app" })[0]).toBe('GRANT USAGE ON SCHEMA "public" TO "app"');
    for (const role of ["", "PUBLIC", "a\u0000b", "x".repeat(64), 42, "a$lgcp_grants$b"]) {
      expect(() => grantStatements({ role: role as string })).toThrow(InvalidOptionsError);
    }
    expect(() => grantStatements({ role: "app", schema: "pg_catalog" })).toThrow(InvalidOptionsError);
  });

  it("are idempotent (running them twice is harmless)", async () => {
    for (const sql of grantStatements({ schema: SCHEMA, role: APP })) await ownerPool.query(sql);
  });
});

describe("the application role", () => {
  it("holds exactly the granted privileges (checked in the catalog)", async () => {
    const { rows } = await db.pool.query(
      `SELECT table_name, string_agg(privilege_type, ',' ORDER BY privilege_type) AS privs
         FROM information_schema.role_table_grants WHERE grantee = $1 AND table_schema = $2
        GROUP BY table_name ORDER BY table_name`,
      [APP, SCHEMA],
    );
    expect(rows).toEqual([
      { table_name: "checkpoint_blobs", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "checkpoint_heads", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "checkpoint_tombstones", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "checkpoint_writes", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "checkpointer_migrations", privs: "SELECT" },
      { table_name: "checkpointer_retention", privs: "DELETE,INSERT,SELECT,UPDATE" },
      { table_name: "checkpoints", privs: "DELETE,INSERT,SELECT,UPDATE" },
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
