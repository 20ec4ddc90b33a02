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
} from "../src/index.js";
import { withTestDatabase } from "./helpers/db.js";

const db = withTestDatabase("migrate");

async function tables(schema: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ t: string }>(
    "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
    [schema],
  );
  return rows.map((r) => r.t);
}

describe("migrate", () => {
  it("creates the three tables and records itself in its own table on a fresh database", async () => {
    const result = await migrate({ pool: db.pool, schema: "fresh" });
    expect(result.fromVersion).toBe(0);
    expect(result.toVersion).toBe(latestVersion());
    expect(result.applied.map((m) => m.name)).toEqual(loadMigrations().map((m) => m.name));
    expect(await tables("fresh")).toEqual(["checkpoint_blobs", "checkpoint_writes", "checkpointer_migrations", "checkpoints"]);
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

describe("src/schema.ts and migrations/ agree", () => {
  it("drizzle-kit generate yields nothing new", async () => {
    // Generate into a copy so a disagreement never writes into the repo.
    const dir = mkdtempSync(join(tmpdir(), "drizzle-check-"));
    try {
      cpSync("migrations", join(dir, "migrations"), { recursive: true });
      const config = join(dir, "drizzle.config.ts");
      writeFileSync(
        config,
        `export default { dialect: "postgresql", schema: ${JSON.stringify(join(process.cwd(), "src/schema.ts"))}, out: "./migrations" };\n`,
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
