import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { describe, expect, it } from "vitest";
import {
  InvalidOptionsError,
  latestVersion,
  loadMigrations,
  migrate,
  MigrationError,
  PostgresSaver,
  SchemaNotMigratedError,
  SchemaTooNewError,
  schemaVersion,
} from "../../src/index.js";
import { withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("migrate");

async function tables(schema: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ t: string }>(
    "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
    [schema],
  );
  return rows.map((r) => r.t);
}

describe("migrate", () => {
  it("creates the saver's tables and records itself in its own table on a fresh database", async () => {
    const result = await migrate({ pool: db.pool, schema: "fresh" });
    expect(result.fromVersion).toBe(0);
    expect(result.toVersion).toBe(latestVersion());
    expect(result.applied.map((m) => m.name)).toEqual(loadMigrations().map((m) => m.name));
    expect(await tables("fresh")).toEqual([
      "checkpoint_blobs",
      "checkpoint_heads",
      "checkpoint_tombstones",
      "checkpoint_writes",
      "checkpointer_migrations",
      "checkpointer_retention",
      "checkpoints",
    ]);
    // Never drizzle's shared default table.
    const { rowCount } = await db.pool.query("SELECT 1 FROM information_schema.tables WHERE table_name = '__drizzle_migrations'");
    expect(rowCount).toBe(0);
  });

  it("is idempotent", async () => {
    await migrate({ pool: db.pool, schema: "twice" });
    const again = await migrate({ pool: db.pool, schema: "twice" });
    expect(again.applied).toEqual([]);
    expect(again.fromVersion).toBe(latestVersion());
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM "twice".checkpointer_migrations');
    expect(rows[0].n).toBe(latestVersion());
  });

  it("applies each migration exactly once under 20 concurrent migrators", async () => {
    const pools = Array.from({ length: 20 }, () => new pg.Pool({ connectionString: db.url, max: 1 }));
    try {
      const results = await Promise.all(pools.map((pool) => migrate({ pool, schema: "racing" })));
      const appliers = results.filter((r) => r.applied.length > 0);
      expect(appliers).toHaveLength(1);
      expect(results.filter((r) => r.applied.length === 0)).toHaveLength(19);
      const { rows } = await db.pool.query('SELECT version, count(*)::int AS n FROM "racing".checkpointer_migrations GROUP BY version');
      expect(rows.every((r) => r.n === 1)).toBe(true);
      expect(rows).toHaveLength(latestVersion());
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it("works with a connection string and with schema names holding quotes, dashes and unicode", async () => {
    for (const schema of ['we"ird-Schema', "agents-prod", "ünï cödé", "Mixed.Case;drop"]) {
      await migrate({ connectionString: db.url, schema });
      expect(await tables(schema)).toContain("checkpoints");
      const saver = new PostgresSaver(db.pool, { schema });
      const config = await saver.put(
        { configurable: { thread_id: "t", checkpoint_ns: "" } },
        { v: 4, id: "1", ts: new Date().toISOString(), channel_values: { a: 1 }, channel_versions: { a: "1" }, versions_seen: {} },
        { source: "input", step: -1, parents: {} },
        { a: "1" },
      );
      expect((await saver.getTuple(config))?.checkpoint.channel_values).toEqual({ a: 1 });
    }
  });

  it("dry run reports the pending SQL and changes nothing", async () => {
    const result = await migrate({ pool: db.pool, schema: "dry", dryRun: true });
    expect(result.applied.length).toBe(latestVersion());
    expect(result.applied[0]!.sql).toContain("CREATE TABLE");
    expect(result.toVersion).toBe(0);
    const { rowCount } = await db.pool.query("SELECT 1 FROM pg_namespace WHERE nspname = 'dry'");
    expect(rowCount).toBe(0);
  });

  it("refuses bad schema names before any SQL", async () => {
    await expect(migrate({ pool: db.pool, schema: "" })).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(migrate({ pool: db.pool, schema: "x".repeat(64) })).rejects.toThrow(/63/);
    await expect(migrate({ pool: db.pool, schema: "pg_mine" })).rejects.toThrow(/reserved/);
  });

  it("a saver against an unmigrated schema fails with a typed error naming the command, and never runs DDL", async () => {
    const saver = new PostgresSaver(db.pool, { schema: "never_migrated" });
    const err = await saver.getTuple({ configurable: { thread_id: "t" } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SchemaNotMigratedError);
    expect((err as SchemaNotMigratedError).code).toBe("SCHEMA_NOT_MIGRATED");
    expect((err as Error).message).toMatch(/migrate/);
    expect(await tables("never_migrated")).toEqual([]);
    // Once migrated, the same saver instance works: the failed check is not cached.
    await migrate({ pool: db.pool, schema: "never_migrated" });
    expect(await saver.getTuple({ configurable: { thread_id: "t" } })).toBeUndefined();
  });

  it("a schema newer than the code is refused by migrate and by the saver", async () => {
    await migrate({ pool: db.pool, schema: "future" });
    await db.pool.query(`INSERT INTO "future".checkpointer_migrations (version, name, sha256) VALUES ($1, 'from_the_future', 'x')`, [
      latestVersion() + 1,
    ]);
    await expect(migrate({ pool: db.pool, schema: "future" })).rejects.toBeInstanceOf(SchemaTooNewError);
    const saver = new PostgresSaver(db.pool, { schema: "future" });
    await expect(saver.getTuple({ configurable: { thread_id: "t" } })).rejects.toBeInstanceOf(SchemaTooNewError);
    expect(await schemaVersion(db.pool, "future")).toBe(latestVersion() + 1);
  });

  it("refuses a schema whose applied migration was edited", async () => {
    await migrate({ pool: db.pool, schema: "tampered" });
    await db.pool.query(`UPDATE "tampered".checkpointer_migrations SET sha256 = 'edited' WHERE version = 1`);
    await expect(migrate({ pool: db.pool, schema: "tampered" })).rejects.toBeInstanceOf(MigrationError);
  });

  it("rolls back everything when a migration fails half way", async () => {
    // A table in the way makes the first CREATE TABLE fail.
    await db.pool.query('CREATE SCHEMA "blocked"; CREATE TABLE "blocked".checkpoint_writes (x int)');
    const err = await migrate({ pool: db.pool, schema: "blocked" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MigrationError);
    expect((err as MigrationError).migration).toBe(loadMigrations()[0]!.name);
    expect(await tables("blocked")).toEqual(["checkpoint_writes"]);
  });

  it("setup() on the saver applies the same migrations", async () => {
    const saver = new PostgresSaver(db.pool, { schema: "via_setup" });
    const result = await saver.setup();
    expect(result.toVersion).toBe(latestVersion());
    expect(await schemaVersion(db.pool, "via_setup")).toBe(latestVersion());
  });
});

describe("upgrading a schema with data", () => {
  it("0005_heads_table moves each lineage's head (the is_head row, not the greatest id) into checkpoint_heads, and threads go on", async () => {
    const schema = "before_heads";
    const role = "before_heads_app";
    const password = `pw-${Math.random().toString(36).slice(2)}`;
    const migrations = loadMigrations();
    const headsAt = migrations.findIndex((m) => m.name === "0005_heads_table");
    expect(headsAt).toBe(5);
    // A schema as the release before the heads table left it: migrations 1-5 applied and recorded.
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query(`CREATE SCHEMA ${schema}`);
      await client.query(`SET LOCAL search_path TO ${schema}`);
      await client.query("CREATE TABLE checkpointer_migrations (version integer PRIMARY KEY, name text NOT NULL, sha256 text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
      for (const m of migrations.slice(0, headsAt)) {
        for (const statement of m.statements) await client.query(statement);
        await client.query("INSERT INTO checkpointer_migrations (version, name, sha256) VALUES ($1, $2, $3)", [m.version, m.name, m.sha256]);
      }
      // Thread t: root -> a -> b, then a fork from root made c the head although b has the greatest id;
      // its subgraph namespace "sub:1" has one checkpoint, its own head.
      const cp = (id: string, value: string) => ({ v: 4, id, ts: "2025-01-01T00:00:00.000Z", channel_versions: { x: value }, versions_seen: {} });
      const rows: [string, string, string | null, string, boolean, boolean][] = [
        ["", "1", null, "v1", false, false],
        ["", "2", "1", "v2", false, false],
        ["", "4", "2", "v4", false, false],
        ["", "3", "1", "v3", true, true],
        ["sub:1", "1", null, "s1", true, false],
      ];
      for (const [ns, id, parent, version, head, pending] of rows) {
        await client.query(
          `INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata, is_head, has_pending_tasks)
           VALUES ('t', $1, $2, $3, $4, '{"source":"loop","step":0}', $5, $6)`,
          [ns, id, parent, cp(id, version), head, pending],
        );
        await client.query("INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, value) VALUES ('t', $1, 'x', $2, 'json', $3)", [
          ns,
          version,
          Buffer.from(JSON.stringify(`value ${version}`)),
        ]);
      }
      // An application role granted what grantStatements() granted before this release: the three tables.
      await client.query(`DROP ROLE IF EXISTS ${role}`);
      await client.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
      await client.query(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`);
      await client.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE checkpoints, checkpoint_writes, checkpoint_blobs TO ${role}`);
      await client.query(`GRANT SELECT ON TABLE checkpointer_migrations TO ${role}`);
      await client.query("COMMIT");
    } catch (err) {
      await client.query("ROLLBACK");
      throw err;
    } finally {
      client.release();
    }
    const result = await migrate({ pool: db.pool, schema });
    expect(result.applied.map((m) => m.name)).toEqual(["0005_heads_table", ...migrations.slice(headsAt + 1).map((m) => m.name)]);
    const { rows: heads } = await db.pool.query(
      `SELECT checkpoint_ns, checkpoint_id, has_pending_tasks, row_version::int AS rv FROM ${schema}.checkpoint_heads ORDER BY checkpoint_ns`,
    );
    expect(heads).toEqual([
      { checkpoint_ns: "", checkpoint_id: "3", has_pending_tasks: true, rv: 1 },
      { checkpoint_ns: "sub:1", checkpoint_id: "1", has_pending_tasks: false, rv: 1 },
    ]);
    const { rows: cols } = await db.pool.query(
      "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'checkpoints' AND column_name = 'is_head'",
      [schema],
    );
    expect(cols).toEqual([]);
    // The saver reads the moved head and moves it on (linear mode: the compare-and-set starts from the backfilled row).
    const saver = new PostgresSaver(db.pool, { schema, lineage: "linear" });
    const latest = await saver.getTuple({ configurable: { thread_id: "t" } });
    expect(latest?.checkpoint.id).toBe("3");
    expect(latest?.checkpoint.channel_values).toEqual({ x: "value v3" });
    const next = { ...latest!.checkpoint, id: "5", channel_versions: { x: "v5" }, channel_values: { x: "five" } };
    await saver.put(latest!.config, next, { source: "loop", step: 1, parents: {} }, { x: "v5" });
    expect((await saver.getTuple({ configurable: { thread_id: "t" } }))?.checkpoint.channel_values).toEqual({ x: "five" });
    await expect(saver.put(latest!.config, { ...next, id: "6" }, { source: "loop", step: 1, parents: {} }, {})).rejects.toMatchObject({
      code: "CHECKPOINT_CONFLICT",
      actualHead: "5",
    });
    // The role got the same rows privileges on the new table, so the application keeps working.
    const { rows: privs } = await db.pool.query(
      `SELECT string_agg(p, ',' ORDER BY p) AS privs FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p
        WHERE has_table_privilege($1, $2, p)`,
      [role, `${schema}.checkpoint_heads`],
    );
    expect(privs[0].privs).toBe("DELETE,INSERT,SELECT,UPDATE");
    const url = new URL(db.url);
    url.username = role;
    url.password = password;
    const appPool = new pg.Pool({ connectionString: url.toString(), max: 1 });
    try {
      const app = new PostgresSaver(appPool, { schema });
      const head = await app.getTuple({ configurable: { thread_id: "t" } });
      await app.put(head!.config, { ...next, id: "7", channel_values: { x: "seven" }, channel_versions: { x: "v7" } }, { source: "loop", step: 2, parents: {} }, { x: "v7" });
      expect((await app.getTuple({ configurable: { thread_id: "t" } }))?.checkpoint.channel_values).toEqual({ x: "seven" });
    } finally {
      await appPool.end();
      await db.pool.query(`DROP OWNED BY ${role}`);
      await db.pool.query(`DROP ROLE ${role}`);
    }
  });
});

describe("src/db/schema.ts and migrations/ agree", () => {
  it("drizzle-kit generate yields nothing new", async () => {
    // Generate into a copy so a disagreement never writes into the repo.
    const dir = mkdtempSync(join(tmpdir(), "drizzle-check-"));
    try {
      cpSync("migrations", join(dir, "migrations"), { recursive: true });
      const config = join(dir, "drizzle.config.ts");
      writeFileSync(
        config,
        `export default { dialect: "postgresql", schema: ${JSON.stringify(join(process.cwd(), "src/db/schema.ts"))}, out: "./migrations" };\n`,
      );
      const before = readdirSync(join(dir, "migrations")).sort();
      const { stdout, stderr } = await promisify(execFile)(join(process.cwd(), "node_modules/.bin/drizzle-kit"), ["generate", "--config", config], { cwd: dir });
      expect(stdout + stderr).toMatch(/No schema changes/);
      expect(readdirSync(join(dir, "migrations")).sort()).toEqual(before);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
