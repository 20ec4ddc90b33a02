/**
 * The store's migrations: their own track (numbered and recorded apart from
 * the checkpointer's), applied by the same runner, checked by the same gate;
 * created only for who asks (`setup()` of a store, `migrate --store`); and
 * adoption of the official store's items. The CLI changing the vector index
 * (`--dims`, `--metric`, `--index-type`) on the embedded database with pgvector:
 * vector-cli.long.test.ts (`npm run test:long`).
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { PostgresStore as Official } from "@langchain/langgraph-checkpoint-postgres/store";
import { afterAll, describe, expect, it } from "vitest";
import { loadMigrations, migrate, migrateStore, PostgresStore, SchemaTooNewError, STORE_COMPATIBILITY, StoreAdoptionRequiredError } from "../../src/index.js";
import { STORE_TRACK } from "../../src/store/migrations.js";
import { runCli } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";
import { tableNames } from "../helpers/partitions.js";

const db = withTestDatabase("store-migrate");
const fresh = () => `m_${randomBytes(4).toString("hex")}`;
const tables = (schema: string) => tableNames(db.pool, schema);
const stops: { stop(): Promise<void> | void }[] = [];
afterAll(async () => {
  for (const s of stops) await s.stop();
});

describe("src/store/schema.ts and migrations/store/ agree", () => {
  it("drizzle-kit generate yields nothing new", async () => {
    const dir = mkdtempSync(join(tmpdir(), "drizzle-store-check-"));
    try {
      cpSync("migrations/store", join(dir, "migrations/store"), { recursive: true });
      const config = join(dir, "drizzle.config.ts");
      writeFileSync(config, `export default { dialect: "postgresql", schema: ${JSON.stringify(join(process.cwd(), "src/store/schema.ts"))}, out: "./migrations/store" };\n`);
      const before = readdirSync(join(dir, "migrations/store")).sort();
      const { stdout, stderr } = await promisify(execFile)(join(process.cwd(), "node_modules/.bin/drizzle-kit"), ["generate", "--config", config], { cwd: dir });
      expect(stdout + stderr).toMatch(/No schema changes/);
      expect(readdirSync(join(dir, "migrations/store")).sort()).toEqual(before);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("two tracks, one schema", () => {
  it("every store migration declares its compatibility level", () => {
    const migrations = loadMigrations(STORE_TRACK);
    expect(migrations.map((m) => m.name)).toEqual(["0000_store_init", "0001_store_namespace_index"]);
    for (const m of migrations) expect(STORE_COMPATIBILITY[m.version], m.name).toBeDefined();
  });

  it("the store never creates the checkpointer's tables, the checkpointer never the store's; both share a schema", async () => {
    const schema = fresh();
    await migrate({ pool: db.pool, schema, adopt: false });
    const checkpointer = await tables(schema);
    expect(checkpointer).toEqual([
      "checkpoint_blobs",
      "checkpoint_heads",
      "checkpoint_tombstones",
      "checkpoint_writes",
      "checkpointer_migrations",
      "checkpointer_retention",
      "checkpoints",
    ]);
    await new PostgresStore(db.pool, { schema }).setup({ adopt: false });
    expect(await tables(schema)).toEqual([...checkpointer, "checkpointer_store_migrations", "store_items"].sort());
    const storeOnly = fresh();
    await migrateStore({ pool: db.pool, schema: storeOnly, adopt: false });
    expect(await tables(storeOnly)).toEqual(["checkpointer_store_migrations", "store_items"]);
    // Each track keeps its own numbering: the checkpointer's level is untouched by the store's rows.
    const { rows } = await db.pool.query(`SELECT max(version)::int AS v FROM ${schema}.checkpointer_migrations`);
    expect((await migrate({ pool: db.pool, schema })).toVersion).toBe(rows[0].v);
  });

  it("a store schema migrated by a newer release: refused unless its newer migrations say this code works with them", async () => {
    const schema = fresh();
    const store = new PostgresStore(db.pool, { schema });
    await store.setup({ adopt: false });
    const known = loadMigrations(STORE_TRACK).length;
    const future = known + 1;
    await db.pool.query(`INSERT INTO ${schema}.checkpointer_store_migrations (version, name, sha256, compatible_from) VALUES ($1, 'future', 'x', 0)`, [future]);
    const events: string[] = [];
    const reader = new PostgresStore(db.pool, { schema, onEvent: (e) => void events.push(e.type) });
    await reader.put(["a"], "k", { v: 1 });
    expect(events).toContain("schemaNewer");
    await db.pool.query(`UPDATE ${schema}.checkpointer_store_migrations SET compatible_from = $1 WHERE version = $1`, [future]);
    const refused = await new PostgresStore(db.pool, { schema }).get(["a"], "k").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SchemaTooNewError);
    expect(refused).toMatchObject({ track: "store", appliedVersion: future, knownVersion: known });
    await expect(migrateStore({ pool: db.pool, schema })).rejects.toBeInstanceOf(SchemaTooNewError);
  });

  it("an applied store migration that was edited is refused", async () => {
    const schema = fresh();
    await migrateStore({ pool: db.pool, schema, adopt: false });
    await db.pool.query(`UPDATE ${schema}.checkpointer_store_migrations SET sha256 = 'edited'`);
    await expect(migrateStore({ pool: db.pool, schema })).rejects.toThrow(/differs from the one shipped/);
  });

  it("the same trust checks: a schema where another role may create is refused, nothing changed", async () => {
    const schema = fresh();
    await db.pool.query(`CREATE SCHEMA ${schema}`);
    await db.pool.query(`GRANT CREATE ON SCHEMA ${schema} TO PUBLIC`);
    await expect(new PostgresStore(db.pool, { schema }).setup({ adopt: false })).rejects.toMatchObject({ name: "UnsafeSchemaError", roles: ["PUBLIC"] });
    expect(await tables(schema)).toEqual([]);
  });

  it("a dry run changes nothing and returns the SQL", async () => {
    const schema = fresh();
    const plan = await migrateStore({ pool: db.pool, schema, dryRun: true, adopt: false });
    expect(plan.applied.map((m) => m.name)).toEqual(["0000_store_init", "0001_store_namespace_index"]);
    expect(plan.applied[0]!.sql).toMatch(/CREATE TABLE "store_items"/);
    expect(await tables(schema)).toEqual([]);
  });
});

describe("adopting the official store", () => {
  it("refuses to start in its schema unless told; copies its items (namespaces, TTLs) into a new schema, and again what changed since", async () => {
    const from = fresh();
    const official = new Official({ connectionOptions: db.url, schema: from });
    stops.push(official);
    await official.setup();
    await official.put(["users", "u1"], "prefs", { theme: "dark" });
    await official.put(["users", "u2"], "prefs", { theme: "light" }, undefined, { ttl: 60 });
    const refused = await new PostgresStore(db.pool, { schema: from }).setup().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StoreAdoptionRequiredError);
    expect((refused as StoreAdoptionRequiredError).found[0]).toBe(from);
    expect(await tables(from)).not.toContain("store_items");
    // Another schema starts beside it (said once: test/ops/adopt-elsewhere.test.ts), empty until told to copy.
    const schema = fresh();
    const store = new PostgresStore(db.pool, { schema });
    await store.setup();
    expect(await store.get(["users", "u1"], "prefs")).toBeNull();

    const result = await store.setup({ adopt: { from } });
    expect(result.adoption).toMatchObject({ from, items: 2 });
    expect((await store.get(["users", "u1"], "prefs"))?.value).toEqual({ theme: "dark" });
    expect(await store.listNamespaces()).toEqual([["users", "u1"], ["users", "u2"]]);
    const ttl = (await db.pool.query(`SELECT ttl_minutes FROM ${schema}.store_items WHERE ns_key = E'users\\x01u2'`)).rows[0].ttl_minutes as number;
    expect(Math.round(ttl)).toBe(60);
    // The official tables are unchanged: official instances keep working until replaced.
    expect((await official.get(["users", "u1"], "prefs"))?.value).toEqual({ theme: "dark" });

    // An official instance still writes; copying again takes what it updated (the newer wins), and keeps ours.
    await official.put(["users", "u1"], "prefs", { theme: "solarized" });
    await store.put(["users", "u3"], "prefs", { theme: "ours" });
    const again = await migrateStore({ pool: db.pool, schema, adopt: { from } });
    expect(again.adoption?.items).toBe(1);
    expect((await store.get(["users", "u1"], "prefs"))?.value).toEqual({ theme: "solarized" });
    expect((await store.get(["users", "u3"], "prefs"))?.value).toEqual({ theme: "ours" });
  });
});

describe("the CLI", () => {
  it("migrate --store-only --dry-run prints the store's SQL; migrate --store applies both tracks", async () => {
    const schema = fresh();
    const dry = await runCli(["migrate", "--store-only", "--dry-run", "--no-adopt-store", "--schema", schema, "--database-url", db.url]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(/store migration 0000_store_init/);
    expect(await tables(schema)).toEqual([]);
    const run = await runCli(["migrate", "--store", "--no-adopt", "--no-adopt-store", "--schema", schema, "--database-url", db.url]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/Migrated the store/);
    expect(await tables(schema)).toContain("store_items");
    expect(await tables(schema)).toContain("checkpoints");
  });

  it("store flags without --store are a usage error", async () => {
    const run = await runCli(["migrate", "--dims", "3", "--database-url", db.url]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--dims is a store option/);
  });

  it("without pgvector, --dims says so (exit 1), and changes nothing", async (ctx) => {
    const { rows } = await db.pool.query("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'");
    if (rows.length > 0) ctx.skip("this server has pgvector, so the refusal cannot be shown on it; vector-cli.long.test.ts runs --dims on the embedded database with pgvector");
    const schema = fresh();
    const run = await runCli(["migrate", "--store-only", "--no-adopt-store", "--dims", "3", "--schema", schema, "--database-url", db.url]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/needs the pgvector extension/);
    expect(await tables(schema)).toEqual([]);
  });
});
