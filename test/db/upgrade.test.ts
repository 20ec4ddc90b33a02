/**
 * Issue 16: upgrading this package while instances of the previous release
 * still run. The previous release's code comes from git history
 * (test/helpers/release.ts) and writes in a child process while the newest
 * migration runs; the compatibility levels (src/db/compat.ts) decide what an
 * older release does on a newer schema.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { RunnableConfig } from "@langchain/core/runnables";
import pg from "pg";
import { describe, expect, it } from "vitest";
import {
  COMPATIBILITY,
  latestVersion,
  loadMigrations,
  migrate,
  migrationStatus,
  PostgresSaver,
  prune,
  SchemaTooNewError,
  schemaVersion,
  type SaverEvent,
} from "../../src/index.js";
import { migrationNumber } from "../../src/errors.js";
import { longText, makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { withTestDatabase } from "../helpers/db.js";
import { history, logGraph } from "../helpers/graphs.js";
import { releaseBefore, releaseBeforeAdding } from "../helpers/release.js";
import { startWriter, type Ack } from "../helpers/writers.js";

const db = withTestDatabase("upgrade");
const cfg = (thread_id: string, checkpoint_id?: string): RunnableConfig => ({ configurable: { thread_id, checkpoint_ns: "", ...(checkpoint_id ? { checkpoint_id } : {}) } });

/** Every acknowledged checkpoint is readable by this code, and each thread's head is its last acknowledged one. */
async function expectNothingLost(schema: string, acks: Ack[], threads: string[]): Promise<void> {
  const saver = new PostgresSaver(db.pool, { schema });
  for (const ack of acks) {
    const tuple = await saver.getTuple(cfg(ack.thread, ack.id));
    expect(tuple?.config.configurable?.checkpoint_id, `${ack.thread} ${ack.id}`).toBe(ack.id);
  }
  for (const thread of threads) {
    const mine = acks.filter((a) => a.thread === thread);
    expect(mine.length, thread).toBeGreaterThan(0);
    const head = await saver.getTuple(cfg(thread));
    expect(head?.config.configurable?.checkpoint_id, thread).toBe(mine.at(-1)!.id);
    // The history is exactly the acknowledged checkpoints, newest first, and the state adds up.
    const states = await history(logGraph(saver), cfg(thread));
    expect(states.map((s) => s.config.configurable?.checkpoint_id)).toEqual(mine.map((a) => a.id).reverse());
    const values = states[0]!.values as { log: string[]; turn: number };
    expect(values.log).toHaveLength(values.turn);
  }
}

/** Waits until the writer process is inside a checkpoint insert (sleeping in the slow_insert trigger). */
async function putInFlight(): Promise<void> {
  for (;;) {
    const { rows } = await db.pool.query(
      "SELECT 1 FROM pg_stat_activity WHERE application_name = 'writer:release' AND state = 'active' AND wait_event = 'PgSleep'",
    );
    if (rows.length > 0) return;
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("a saver at the previous migration level writing while the newest migration runs", () => {
  it("nothing acknowledged lost (and, the newest migration being additive, the previous release keeps working)", async () => {
    const newest = loadMigrations().at(-1)!;
    const previous = releaseBefore(newest.name);
    expect(previous.level).toBe(newest.version - 1);
    const schema = "rolling";
    const threads = ["t1", "t2", "t3"];
    const writer = startWriter(`release:${previous.dir}`, db.url, schema, threads);
    let applied: string[];
    try {
      await writer.ready;
      expect(await schemaVersion(db.pool, schema)).toBe(previous.level);
      await writer.waitForAcks(9);
      applied = (await migrate({ pool: db.pool, schema })).applied.map((m) => m.name);
      // It goes on writing after the migration committed.
      await writer.waitForAcks(writer.acks.length + 9);
    } finally {
      expect((await writer.stop()).code).toBe(0);
    }
    expect(applied).toEqual([newest.name]);
    if (COMPATIBILITY[newest.version]!.compatibleFrom <= previous.level) expect(writer.errors).toEqual([]);
    await expectNothingLost(schema, writer.acks, threads);
  });

  it("migration 0005 (which moved the heads) with writers of the release before it: each write is kept or fails loudly, none is lost", async () => {
    const previous = releaseBefore("0005_heads_table");
    const schema = "heads_move";
    const threads = ["h1", "h2"];
    const writer = startWriter(`release:${previous.dir}`, db.url, schema, threads);
    try {
      await writer.ready;
      await writer.waitForAcks(6);
      // Each of its checkpoint inserts now takes 300 ms, so a put is in flight when the migration starts
      // (0005 copies the heads, then drops the flag: a put committing in between used to be lost).
      await db.pool.query(`CREATE FUNCTION ${schema}.slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$`);
      await db.pool.query(`CREATE TRIGGER slow_insert BEFORE INSERT ON ${schema}.checkpoints FOR EACH ROW EXECUTE FUNCTION ${schema}.slow_insert()`);
      await writer.waitForAcks(writer.acks.length + 2);
      await putInFlight();
      await migrate({ pool: db.pool, schema });
      // That release writes checkpoints.is_head, which 0005 drops: its statements fail from now on.
      await writer.waitForErrors(2);
    } finally {
      expect((await writer.stop()).code).toBe(0);
    }
    expect(writer.errors.map((e) => e.sqlState)).toEqual(writer.errors.map(() => "42703")); // undefined column: loud, typed
    await expectNothingLost(schema, writer.acks, threads);
  });
});

describe("compatibility levels", () => {
  it("every migration declares one, and migrate records it", async () => {
    for (const m of loadMigrations()) expect(COMPATIBILITY[m.version], m.name).toBeDefined();
    await migrate({ pool: db.pool, schema: "levels" });
    const { rows } = await db.pool.query("SELECT version, compatible_from FROM levels.checkpointer_migrations ORDER BY version");
    expect(rows).toEqual(loadMigrations().map((m) => ({ version: m.version, compatible_from: COMPATIBILITY[m.version]!.compatibleFrom })));
  });

  it("a schema migrated by a newer release whose newer migration is additive: this code keeps working and says so", async () => {
    await migrate({ pool: db.pool, schema: "newer_ok" });
    // What a newer, additive migration leaves: a column this code does not know, recorded as compatible with any code.
    await db.pool.query("ALTER TABLE newer_ok.checkpoints ADD COLUMN next_release_column text");
    await db.pool.query("INSERT INTO newer_ok.checkpointer_migrations (version, name, sha256, compatible_from) VALUES ($1, 'next_additive', 'x', 0)", [
      latestVersion() + 1,
    ]);
    const events: SaverEvent[] = [];
    const saver = new PostgresSaver(db.pool, { schema: "newer_ok", onEvent: (e) => events.push(e) });
    const config = await saver.put(cfg("t"), makeCheckpoint({ a: 1 }), meta(-1), { a: 1 });
    expect((await saver.getTuple(config))?.checkpoint.channel_values).toEqual({ a: 1 });
    expect(events).toContainEqual({ type: "schemaNewer", schema: "newer_ok", schemaVersion: latestVersion() + 1, codeVersion: latestVersion() });
    // A deploy step of this (older) release runs migrate: nothing to do, no error.
    expect((await migrate({ pool: db.pool, schema: "newer_ok" })).applied).toEqual([]);
    expect((await migrationStatus({ pool: db.pool, schema: "newer_ok" })).state).toBe("newer-compatible");
  });

  it("a newer migration this code does not work with: refused with both levels, before anything is written", async () => {
    await migrate({ pool: db.pool, schema: "newer_no" });
    await db.pool.query("INSERT INTO newer_no.checkpointer_migrations (version, name, sha256, compatible_from) VALUES ($1, 'next_contract', 'x', $1)", [
      latestVersion() + 1,
    ]);
    const saver = new PostgresSaver(db.pool, { schema: "newer_no" });
    const err = await saver.put(cfg("t"), makeCheckpoint({ a: 1 }), meta(-1), { a: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SchemaTooNewError);
    expect(err).toMatchObject({ appliedVersion: latestVersion() + 1, knownVersion: latestVersion(), compatibleFrom: latestVersion() + 1 });
    // Named by file number (the newest shipped file is 0006 for 7 migrations), never by the count.
    expect((err as Error).message).toContain(`migration ${migrationNumber(latestVersion() + 1)}, newer than this code knows (${migrationNumber(latestVersion())})`);
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM newer_no.checkpoints");
    expect(rows[0].n).toBe(0);
    await expect(migrate({ pool: db.pool, schema: "newer_no" })).rejects.toBeInstanceOf(SchemaTooNewError);
    const status = await migrationStatus({ pool: db.pool, schema: "newer_no" });
    expect(status).toMatchObject({ state: "too-new", compatibleFrom: latestVersion() + 1 });
  });

  it("a running saver whose statements a newer (contract) migration broke fails with SchemaTooNewError, not an untyped error", async () => {
    await migrate({ pool: db.pool, schema: "contracted" });
    const saver = new PostgresSaver(db.pool, { schema: "contracted" });
    await saver.put(cfg("t"), makeCheckpoint({ a: 1 }), meta(-1), { a: 1 }); // checked once: running
    // What a contract migration does: drop what older code writes, record that older code no longer works.
    await db.pool.query("ALTER TABLE contracted.checkpoints DROP COLUMN ttl_seconds");
    await db.pool.query("INSERT INTO contracted.checkpointer_migrations (version, name, sha256, compatible_from) VALUES ($1, 'next_contract', 'x', $1)", [
      latestVersion() + 1,
    ]);
    const err = await saver.put(cfg("t"), makeCheckpoint({ a: 2 }), meta(0), { a: 2 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SchemaTooNewError);
    expect((err as SchemaTooNewError).cause).toMatchObject({ code: "42703" });
  });
});

describe("the tombstones migration and roles granted before it", () => {
  it("gives a role granted rows of checkpoints what the saver needs of the new tables and EXECUTE on the write gate; the role's saver deletes and writes", async () => {
    const tombstones = loadMigrations().find((m) => m.name.endsWith("_tombstones_retention"))!;
    const previous = releaseBefore(tombstones.name);
    const release = (await import(join(previous.dir, "src", "index.ts"))) as typeof import("../../src/index.js");
    const schema = "granted_before";
    await release.migrate({ pool: db.pool, schema });
    expect(await schemaVersion(db.pool, schema)).toBe(tombstones.version - 1);
    const role = `lgcp_app_${randomBytes(4).toString("hex")}`;
    await db.pool.query(`CREATE ROLE ${role} LOGIN PASSWORD 'pw'`);
    try {
      for (const sql of release.grantStatements({ schema, role })) await db.pool.query(sql);
      await migrate({ pool: db.pool, schema });
      const { rows } = await db.pool.query(
        `SELECT has_table_privilege($1, $2, 'SELECT, INSERT, UPDATE, DELETE') AS tombstones, has_table_privilege($1, $3, 'SELECT, INSERT, UPDATE') AS retention,
                has_function_privilege($1, $4, 'EXECUTE') AS gate, has_function_privilege($1, $5, 'EXECUTE') AS put_gate`,
        [
          role,
          `${schema}.checkpoint_tombstones`,
          `${schema}.checkpointer_retention`,
          `${schema}.checkpointer_thread_gate(text, text, text, text[], boolean)`,
          `${schema}.checkpointer_put_gate(text, text, text, text, text, jsonb, boolean)`,
        ],
      );
      expect(rows[0]).toEqual({ tombstones: true, retention: true, gate: true, put_gate: true });
      const url = new URL(db.url);
      url.username = role;
      url.password = "pw";
      const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
      try {
        const saver = new PostgresSaver(pool, { schema });
        const head = await saver.put(cfg("t"), makeCheckpoint({ a: 1 }), meta(-1), { a: 1 });
        await saver.deleteThread("t");
        await expect(saver.putWrites(head, [["a", 2]], "task")).rejects.toMatchObject({ code: "THREAD_DELETED" });
      } finally {
        await pool.end();
      }
    } finally {
      await db.pool.query(`DROP OWNED BY ${role}`);
      await db.pool.query(`DROP ROLE ${role}`);
    }
  });
});

describe("element rows and code that does not know them (issue 26 row 5)", () => {
  it("the release before element storage refuses the schema, and its prune's statement, run anyway, deletes no element row", async () => {
    const previous = releaseBeforeAdding("src/saver/elements.ts");
    const release = (await import(join(previous.dir, "src", "index.ts"))) as typeof import("../../src/index.js");
    const schema = "before_elements";
    await migrate({ pool: db.pool, schema });
    const saver = new PostgresSaver(db.pool, { schema, elementStorage: true });
    let config = cfg("chat");
    for (let i = 0; i < 8; i++) {
      const v = `-a${(i + 1).toString(36)}.00000001`;
      config = await saver.put(config, makeCheckpoint({ items: Array.from({ length: i + 1 }, (_, k) => longText(`message ${k}`)) }, { items: v }), meta(i - 1), { items: v });
    }
    const elements = async () => Number((await db.pool.query(`SELECT count(*) AS n FROM ${schema}.checkpoint_blobs WHERE channel = '__elements__'`)).rows[0].n);
    expect(await elements()).toBe(8);

    // Its prune checks the schema first, and refuses it.
    const err = await release.prune({ pool: db.pool, schema, keepLast: 5 }).catch((e: unknown) => e);
    expect((err as { code?: string }).code).toBe("SCHEMA_TOO_NEW");
    // Its statement, run as it ran it (nothing due but the collection), meets the guard.
    const { buildSql } = (await import(join(previous.dir, "src", "ops", "prune-sql.ts"))) as { buildSql: (s: string) => { round: (dry: boolean) => string } };
    const collect = [["chat"], null, null, false, 5, 0, 900, null, true, 1000];
    await expect(db.pool.query(buildSql(schema).round(false), collect)).rejects.toMatchObject({ code: "LGE01" });
    // So is a hand-written delete; this package's prune and deleteThread go through.
    await expect(db.pool.query(`DELETE FROM ${schema}.checkpoint_blobs WHERE thread_id = 'chat'`)).rejects.toMatchObject({ code: "LGE01" });
    expect(await elements()).toBe(8);
    expect((await saver.getTuple(cfg("chat")))!.checkpoint.channel_values).toEqual({ items: Array.from({ length: 8 }, (_, k) => longText(`message ${k}`)) });
    await prune({ pool: db.pool, schema, keepLast: 1, grace: 0 });
    expect((await saver.getTuple(cfg("chat")))!.checkpoint.channel_values).toEqual({ items: Array.from({ length: 8 }, (_, k) => longText(`message ${k}`)) });
    await saver.deleteThread("chat");
    expect(await elements()).toBe(0);
  });
});
