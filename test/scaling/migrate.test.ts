/**
 * Hash partitioning by thread (issue 32, README "Scaling out"), at migration
 * time: the option checked before any SQL; the whole chain of migrations,
 * the checkpointer's and the store's, applied to a new schema partitioned;
 * a schema's layout kept, another one refused; migrations that come later
 * (the newest, 0008, onto a schema partitioned before it, and the kinds of
 * statement future migrations hold) applied to partitioned tables.
 */
import { randomBytes } from "node:crypto";
import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import pg from "pg";
import { describe, expect, it } from "vitest";
import {
  InvalidOptionsError,
  latestVersion,
  loadMigrations,
  migrate,
  migrateStore,
  PartitionsMismatchError,
  PostgresSaver,
  PostgresStore,
  schemaVersion,
} from "../../src/index.js";
import { COMPATIBILITY } from "../../src/db/compat.js";
import { CHECKPOINTER_TRACK } from "../../src/db/migrations.js";
import { PARTITIONS_SETTING, partitionStatements, planPartitions } from "../../src/db/partitions.js";
import { longText, makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { fakeEmbeddings } from "../helpers/embeddings.js";
import { runCli } from "../helpers/cli.js";
import { testPool, withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("scaling-migrate");
const fresh = () => `p_${randomBytes(4).toString("hex")}`;
/** A pool whose sessions set the partitions setting (empty: cleared, even under TEST_PARTITIONS, which sets it for the database). */
const poolWithSetting = (value: string) => testPool({ connectionString: db.url, max: 1, options: `-c ${PARTITIONS_SETTING}=${value}` });

/** Each table of `schema` and how it is partitioned: its key (`HASH (thread_id)`) and partition count; plain tables `plain`. */
async function layout(schema: string): Promise<Record<string, string>> {
  const { rows } = await db.pool.query<{ name: string; kind: string; key: string | null; n: number }>(
    `SELECT c.relname AS name, c.relkind AS kind, pg_get_partkeydef(c.oid) AS key,
            (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid)::int AS n
       FROM pg_class c WHERE c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1`,
    [schema],
  );
  return Object.fromEntries(rows.map((r) => [r.name, r.kind === "p" ? `${r.key} x ${r.n}` : "plain"]));
}

/** The tables of `schema` with a column named `column`. */
async function tablesWith(schema: string, column: string): Promise<string[]> {
  const { rows } = await db.pool.query(
    `SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = $2 AND NOT a.attisdropped
      WHERE c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1`,
    [schema, column],
  );
  return rows.map((r) => r.relname as string);
}

describe("the option", () => {
  it("a bad partitions value is an InvalidOptionsError naming it, before any SQL (the pools lead nowhere)", async () => {
    const nowhere = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:1/none", connectionTimeoutMillis: 2000 });
    nowhere.on("error", () => undefined);
    try {
      for (const bad of [0, 1, 1025, 2.5, Number.NaN, "16", null, true]) {
        const calls: [string, () => Promise<unknown>][] = [
          ["migrate", () => migrate({ pool: nowhere, partitions: bad as number, retry: false })],
          ["migrateStore", () => migrateStore({ pool: nowhere, partitions: bad as number, retry: false })],
          ["saver.setup", () => new PostgresSaver(nowhere).setup({ partitions: bad as number, retry: false })],
          ["store.setup", () => new PostgresStore(nowhere).setup({ partitions: bad as number, retry: false })],
          ["PostgresSaver.open", () => PostgresSaver.open({ databaseUrl: "postgres://postgres@127.0.0.1:1/none", partitions: bad as number })],
          ["PostgresStore.open", () => PostgresStore.open({ databaseUrl: "postgres://postgres@127.0.0.1:1/none", partitions: bad as number })],
        ];
        for (const [what, call] of calls) {
          const err = await Promise.resolve().then(call).catch((e: unknown) => e);
          expect(err, `${what} with ${String(bad)}`).toBeInstanceOf(InvalidOptionsError);
          expect((err as InvalidOptionsError).option, what).toBe("partitions");
        }
      }
    } finally {
      await nowhere.end();
    }
  });

  it("the CLI refuses a bad --partitions as bad usage (exit 2), and --partitions with --finish-adoption", async () => {
    for (const bad of ["1", "1025", "x", "2.5"]) {
      const run = await runCli(["migrate", "--partitions", bad, "--database-url", "postgres://postgres@127.0.0.1:1/none"]);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toMatch(/--partitions expects an integer from 2 to 1024/);
    }
    const step = await runCli(["migrate", "--partitions", "4", "--finish-adoption", "--database-url", "postgres://postgres@127.0.0.1:1/none"]);
    expect(step.code, step.stderr).toBe(2);
  });
});

describe("a new schema, partitioned", () => {
  it("every table with the thread key (the store's: the namespace key) is hash partitioned on it; bookkeeping stays plain; the files' checksums are kept", async () => {
    const schema = fresh();
    const result = await migrate({ pool: db.pool, schema, partitions: 4 });
    await migrateStore({ pool: db.pool, schema, partitions: 4 });
    expect(result.applied.map((m) => m.name)).toEqual(loadMigrations().map((m) => m.name));
    expect(await layout(schema)).toEqual({
      checkpoint_blobs: "HASH (thread_id) x 4",
      checkpoint_heads: "HASH (thread_id) x 4",
      checkpoint_tombstones: "HASH (thread_id) x 4",
      checkpoint_writes: "HASH (thread_id) x 4",
      checkpointer_migrations: "plain",
      checkpointer_retention: "plain",
      checkpointer_store_migrations: "plain",
      checkpoints: "HASH (thread_id) x 4",
      store_items: "HASH (ns_key) x 4",
    });
    // The rule, not a list: any table a migration creates with the key is partitioned.
    const byKey = Object.entries(await layout(schema)).filter(([, l]) => l !== "plain").map(([t]) => t);
    expect([...(await tablesWith(schema, "thread_id")), ...(await tablesWith(schema, "ns_key"))].sort()).toEqual(byKey.sort());
    // 0005's fillfactor went to each partition of the heads (a partitioned table takes no storage parameters).
    const { rows: ff } = await db.pool.query(
      `SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid WHERE i.inhparent = format('%I.checkpoint_heads', $1::text)::regclass ORDER BY 1`,
      [schema],
    );
    expect(ff).toEqual([0, 1, 2, 3].map((i) => ({ relname: `checkpoint_heads_p${i}`, reloptions: ["fillfactor=70"] })));
    // What is recorded is the shipped files' checksums: `status` and a plain `migrate` find the schema current.
    const { rows } = await db.pool.query(`SELECT version, sha256 FROM ${schema}.checkpointer_migrations ORDER BY version`);
    expect(rows).toEqual(loadMigrations().map((m) => ({ version: m.version, sha256: m.sha256 })));
    expect((await migrate({ pool: db.pool, schema })).applied).toEqual([]);
    expect((await migrate({ pool: db.pool, schema, partitions: 4 })).applied).toEqual([]);
    const status = await runCli(["status", "--schema", schema, "--database-url", db.url]);
    expect(status.code, status.stdout + status.stderr).toBe(0);
  });

  it("the saver and the store work on it; migration 0008's guard fires on the partitions", async () => {
    const schema = fresh();
    const saver = new PostgresSaver(db.pool, { schema, elementStorage: true });
    await saver.setup({ partitions: 3 });
    const store = new PostgresStore(db.pool, { schema });
    await store.setup({ partitions: 3 });
    const config = { configurable: { thread_id: "t1", checkpoint_ns: "" } };
    const messages = [longText("a"), longText("b")];
    const cp = makeCheckpoint({ messages });
    const stored = await saver.put(config, cp, meta(-1), cp.channel_versions);
    await saver.putWrites(stored, [["messages", "c"]], "task");
    const tuple = await saver.getTuple(config);
    expect(tuple?.checkpoint.channel_values).toEqual({ messages });
    expect(tuple?.pendingWrites).toEqual([["task", "messages", "c"]]);
    await store.put(["users", "u1"], "k", { v: 1 });
    expect((await store.get(["users", "u1"], "k"))?.value).toEqual({ v: 1 });
    // The sweep deletes what expired and nothing else: row places (ctid) repeat from partition to partition.
    for (let i = 2; i <= 12; i++) await store.put(["users", `u${i}`], "k", { v: i });
    const spread = await db.pool.query(`SELECT count(DISTINCT tableoid)::int AS n FROM ${schema}.store_items`);
    expect(spread.rows[0].n).toBe(3);
    await db.pool.query(`UPDATE ${schema}.store_items SET expires_at = now() - interval '1 second' WHERE ns_key = 'users' || chr(1) || 'u1'`);
    expect(await store.sweepExpiredItems()).toBe(1);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ${schema}.store_items`)).rows[0].n).toBe(11);
    // An element row deleted by hand meets 0008's BEFORE DELETE trigger, on whichever partition holds it.
    const elements = await db.pool.query(`SELECT count(*)::int AS n FROM ${schema}.checkpoint_blobs WHERE channel = '__elements__'`);
    expect(elements.rows[0].n).toBeGreaterThan(0);
    await expect(db.pool.query(`DELETE FROM ${schema}.checkpoint_blobs WHERE channel = '__elements__'`)).rejects.toMatchObject({ code: "LGE01" });
    await saver.deleteThread("t1");
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ${schema}.checkpoint_blobs`)).rows[0].n).toBe(0);
  });

  it("on the embedded database (PGlite) too; the vector table is partitioned with the items, by namespace", async () => {
    const embedded = new PGlite({ extensions: { vector } });
    try {
      const store = new PostgresStore(embedded as unknown as pg.Pool, { schema: "memory", index: { dims: 8, embed: fakeEmbeddings(8), fields: ["text"] } });
      await store.setup({ adopt: false, partitions: 4 });
      const { rows } = await embedded.query<{ name: string; key: string; n: number }>(
        `SELECT c.relname AS name, pg_get_partkeydef(c.oid) AS key, (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid)::int AS n
           FROM pg_class c WHERE c.relnamespace = 'memory'::regnamespace AND c.relkind = 'p' ORDER BY 1`,
      );
      expect(rows).toEqual([
        { name: "store_item_vectors", key: "HASH (ns_key)", n: 4 },
        { name: "store_items", key: "HASH (ns_key)", n: 4 },
      ]);
      for (let i = 0; i < 8; i++) await store.put(["users", `u${i}`], "k", { text: i % 2 ? "green tea" : "black coffee" });
      const found = await store.search(["users"], { query: "green tea", mode: "vector", limit: 3 });
      expect(found.map((f) => f.value.text)).toEqual(["green tea", "green tea", "green tea"]);
      await store.delete(["users", "u1"], "k"); // its vectors go with it (a foreign key between partitioned tables)
      expect((await embedded.query<{ n: number }>("SELECT count(*)::int AS n FROM memory.store_item_vectors")).rows[0]!.n).toBe(7);
    } finally {
      await embedded.close();
    }
  });

  it("--dry-run prints the partitioned SQL and creates nothing", async () => {
    const schema = fresh();
    const run = await runCli(["migrate", "--dry-run", "--partitions", "4", "--store", "--no-adopt-store", "--schema", schema, "--database-url", db.url]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`CREATE TABLE "checkpoints" (`);
    expect(run.stdout).toContain(`PARTITION BY HASH ("thread_id");`);
    expect(run.stdout).toContain(`CREATE TABLE "checkpoints_p3" PARTITION OF "checkpoints" FOR VALUES WITH (MODULUS 4, REMAINDER 3);`);
    expect(run.stdout).toContain(`ALTER TABLE "checkpoint_heads_p0" SET (fillfactor = 70);`);
    expect(run.stdout).toContain(`PARTITION BY HASH ("ns_key");`);
    expect(await layout(schema)).toEqual({});
  });

  it("a database or role setting partitions the schemas created there; the option wins; a bad setting is refused naming it", async () => {
    const five = poolWithSetting("5");
    const bad = poolWithSetting("lots");
    const plain = poolWithSetting("");
    try {
      const a = fresh();
      await new PostgresSaver(five, { schema: a }).setup();
      expect((await layout(a)).checkpoints).toBe("HASH (thread_id) x 5");
      const b = fresh();
      await migrate({ pool: five, schema: b, partitions: 2 });
      expect((await layout(b)).checkpoints).toBe("HASH (thread_id) x 2");
      // A schema that exists keeps its layout whatever the setting says.
      const c = fresh();
      await migrate({ pool: plain, schema: c });
      expect((await layout(c)).checkpoints).toBe("plain");
      await migrate({ pool: five, schema: c });
      expect((await layout(c)).checkpoints).toBe("plain");
      const err = await migrate({ pool: bad, schema: fresh(), retry: false }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidOptionsError);
      expect((err as InvalidOptionsError).option).toMatch(/^langgraph_checkpoint_pg\.partitions/);
    } finally {
      await Promise.all([five.end(), bad.end(), plain.end()]);
    }
  });
});

describe("a schema's partitioning is decided when it is created", () => {
  it("partitions on a schema with plain tables, or another count on a partitioned one, is refused and changes nothing", async () => {
    const plain = fresh();
    const setting = poolWithSetting("");
    try {
      await migrate({ pool: setting, schema: plain });
    } finally {
      await setting.end();
    }
    const before = await layout(plain);
    expect(before.checkpoints).toBe("plain");
    const err = await migrate({ pool: db.pool, schema: plain, partitions: 8 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PartitionsMismatchError);
    expect(err).toMatchObject({ code: "PARTITIONS_MISMATCH", schema: plain, track: "checkpointer", requested: 8, found: 0, retryable: false });
    expect((err as Error).message).toMatch(/decided when it is first migrated.*Nothing was changed/);
    expect(await layout(plain)).toEqual(before);
    const partitioned = fresh();
    await migrateStore({ pool: db.pool, schema: partitioned, partitions: 4 });
    await expect(migrateStore({ pool: db.pool, schema: partitioned, partitions: 8 })).rejects.toMatchObject({ name: "PartitionsMismatchError", track: "store", found: 4 });
    const cli = await runCli(["migrate", "--partitions", "8", "--schema", plain, "--database-url", db.url]);
    expect(cli.code, cli.stdout).toBe(1);
    expect(cli.stderr).toMatch(/was created .* not \d+: a schema's partitioning is decided when it is first migrated/);
  });
});

describe("migrations that come after a schema was partitioned", () => {
  it("0008_elements_guard applies to a schema partitioned at 0007, and its trigger guards every partition", async () => {
    const schema = fresh();
    const migrations = loadMigrations();
    const guardAt = migrations.findIndex((m) => m.name === "0008_elements_guard");
    expect(guardAt).toBe(8);
    // The schema as a release that ended at 0007 would have partitioned it: the same rule applied to 0000-0007, recorded.
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query(`CREATE SCHEMA ${schema}`);
      await client.query(`SET LOCAL search_path TO ${schema}`);
      await client.query(
        "CREATE TABLE checkpointer_migrations (version integer PRIMARY KEY, name text NOT NULL, sha256 text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(), compatible_from integer)",
      );
      const partitioned = new Map<string, number>();
      for (const m of migrations.slice(0, guardAt)) {
        for (const statement of partitionStatements(m.statements, { key: "thread_id", count: 4 }, partitioned)) await client.query(statement);
        await client.query("INSERT INTO checkpointer_migrations (version, name, sha256, compatible_from) VALUES ($1, $2, $3, $4)", [
          m.version,
          m.name,
          m.sha256,
          COMPATIBILITY[m.version]!.compatibleFrom,
        ]);
      }
      // Element rows on several partitions, written before the guard existed.
      await client.query(
        `INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, value)
         SELECT 'thread-' || g, '', '__elements__', 'h' || g, 'msgpack', '\\x01' FROM generate_series(1, 20) g`,
      );
      await client.query("COMMIT");
    } finally {
      client.release();
    }
    expect(await schemaVersion(db.pool, schema)).toBe(guardAt);
    const { applied } = await migrate({ pool: db.pool, schema });
    expect(applied.map((m) => m.name)).toEqual(migrations.slice(guardAt).map((m) => m.name));
    expect(applied[0]!.name).toBe("0008_elements_guard");
    expect(await schemaVersion(db.pool, schema)).toBe(latestVersion());
    const spread = await db.pool.query(`SELECT count(DISTINCT tableoid)::int AS n FROM ${schema}.checkpoint_blobs`);
    expect(spread.rows[0].n).toBeGreaterThan(1);
    for (let g = 1; g <= 20; g++) {
      await expect(db.pool.query(`DELETE FROM ${schema}.checkpoint_blobs WHERE thread_id = $1`, [`thread-${g}`])).rejects.toMatchObject({ code: "LGE01" });
    }
  });

  it("the statements later migrations are made of apply to partitioned tables: ADD COLUMN, CREATE INDEX, a new table with the key, storage parameters, row and statement triggers", async () => {
    const schema = fresh();
    await migrate({ pool: db.pool, schema, partitions: 4 });
    // A migration as drizzle-kit and a hand-written part would write it (unqualified; the runner sets search_path).
    const future = [
      `ALTER TABLE "checkpoints" ADD COLUMN "labels" text[];`,
      `CREATE INDEX "checkpoint_writes_channel" ON "checkpoint_writes" USING btree ("thread_id","channel");`,
      `CREATE TABLE "checkpoint_notes" (
	"thread_id" text COLLATE "C" NOT NULL,
	"note" text NOT NULL,
	CONSTRAINT "checkpoint_notes_pkey" PRIMARY KEY("thread_id","note")
);`,
      `-- Hand-written: room for updates in place.
ALTER TABLE "checkpoint_notes" SET (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.05);`,
      `CREATE FUNCTION "checkpoint_no_notes"() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN RAISE EXCEPTION USING ERRCODE = 'LGX01', MESSAGE = 'no'; END $f$;`,
      `CREATE TRIGGER "checkpoint_no_notes" BEFORE DELETE ON "checkpoint_writes" FOR EACH ROW WHEN (OLD."channel" = 'kept') EXECUTE FUNCTION "checkpoint_no_notes"();`,
      `CREATE TABLE "checkpointer_settings" ("name" text PRIMARY KEY, "value" text);`,
    ];
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query(`SET LOCAL search_path TO ${schema}`);
      // What applyTrack does: the layout read back from the schema, the statements rewritten by the same rule.
      const plan = await planPartitions(client, schema, CHECKPOINTER_TRACK, { requested: undefined, fresh: false });
      expect(plan.layout).toEqual({ key: "thread_id", count: 4 });
      for (const statement of partitionStatements(future, plan.layout, plan.partitioned)) await client.query(statement);
      await client.query("COMMIT");
    } finally {
      client.release();
    }
    const tables = await layout(schema);
    expect(tables.checkpoint_notes).toBe("HASH (thread_id) x 4");
    expect(tables.checkpointer_settings).toBe("plain");
    const cols = await db.pool.query(
      `SELECT count(*)::int AS n FROM pg_attribute a JOIN pg_inherits i ON i.inhrelid = a.attrelid
        WHERE i.inhparent = format('%I.checkpoints', $1::text)::regclass AND a.attname = 'labels'`,
      [schema],
    );
    expect(cols.rows[0].n).toBe(4);
    const idx = await db.pool.query(
      `SELECT count(*)::int AS n FROM pg_index x JOIN pg_inherits i ON i.inhrelid = x.indrelid
        WHERE i.inhparent = format('%I.checkpoint_writes', $1::text)::regclass AND x.indexrelid::regclass::text LIKE '%channel%'`,
      [schema],
    );
    expect(idx.rows[0].n).toBe(4);
    const opts = await db.pool.query(`SELECT reloptions FROM pg_class WHERE oid = format('%I.checkpoint_notes_p2', $1::text)::regclass`, [schema]);
    expect(opts.rows[0].reloptions).toEqual(["fillfactor=80", "autovacuum_vacuum_scale_factor=0.05"]);
    const saver = new PostgresSaver(db.pool, { schema });
    for (let t = 0; t < 12; t++) {
      const config = { configurable: { thread_id: `t${t}`, checkpoint_ns: "" } };
      const cp = makeCheckpoint({ a: t });
      await saver.putWrites(await saver.put(config, cp, meta(-1), cp.channel_versions), [["kept", 1]], "task");
    }
    await expect(db.pool.query(`DELETE FROM ${schema}.checkpoint_writes WHERE channel = 'kept'`)).rejects.toMatchObject({ code: "LGX01" });
  });
});
