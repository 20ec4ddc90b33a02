/**
 * Issue 16: a pod that starts before its database. setup() retries what may
 * pass (connection refused, the database starting up) with backoff, reports
 * each attempt as a `retry` event, and succeeds once the database is up; it
 * gives up after the configured attempts with a retryable, typed error, typed
 * the way every operation types the same outage.
 *
 * Issue 28: the CLI's `migrate` waits the same way (`--wait`), one line per
 * attempt; `open()` says it is waiting once the wait lasts; and a failure says
 * what the server said (a wrong password), never the password.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseOperationError, latestVersion, migrate, MigrationError, PostgresSaver, PostgresStore, type SaverEvent } from "../../src/index.js";
import { failureText } from "../../src/errors.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { collect, runCli, spawnScript } from "../helpers/cli.js";
import { PgServer } from "../helpers/server.js";

type RetryEvent = Extract<SaverEvent, { type: "retry" }>;

describe("setup() before the database is up", () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await PgServer.start({ label: "startup" });
    await server.stop("fast");
  });
  afterAll(async () => {
    await server?.destroy();
  });

  async function until(condition: () => boolean): Promise<void> {
    while (!condition()) await new Promise((r) => setTimeout(r, 10));
  }

  it("gives up after the configured attempts with a retryable MigrationError; operations type the same outage as retryable", async () => {
    const pool = new pg.Pool({ connectionString: server.url });
    pool.on("error", () => undefined);
    try {
      const events: SaverEvent[] = [];
      const saver = new PostgresSaver(pool, { onEvent: (e) => events.push(e) });
      const err = await saver.setup({ retry: { attempts: 3, initialDelayMs: 10, maxDelayMs: 20 } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MigrationError);
      expect(err).toMatchObject({ code: "MIGRATION_FAILED", retryable: true, sqlState: undefined, cause: { code: "ECONNREFUSED" } });
      expect((err as Error).message).toMatch(/^migrating schema "public" failed \(connection error ECONNREFUSED\): connect ECONNREFUSED 127\.0\.0\.1:\d+; nothing was applied$/);
      const retries = events.filter((e): e is RetryEvent => e.type === "retry");
      expect(retries.map((e) => [e.attempt, e.attempts, e.code])).toEqual([
        [1, 3, "ECONNREFUSED"],
        [2, 3, "ECONNREFUSED"],
      ]);
      const op = await saver.getTuple({ configurable: { thread_id: "t" } }).catch((e: unknown) => e);
      expect(op).toBeInstanceOf(DatabaseOperationError);
      expect(op).toMatchObject({ retryable: true, cause: { code: "ECONNREFUSED" } });
      const viaUrl = await migrate({ connectionString: server.url, retry: false }).catch((e: unknown) => e);
      expect(viaUrl).toBeInstanceOf(MigrationError);
      expect(viaUrl).toMatchObject({ retryable: true, cause: { code: "ECONNREFUSED" } });
    } finally {
      await pool.end();
    }
  });

  it("started before the database, succeeds once it is up, reporting each attempt", async () => {
    const pool = new pg.Pool({ connectionString: server.url });
    pool.on("error", () => undefined);
    try {
      const events: SaverEvent[] = [];
      const saver = new PostgresSaver(pool, { onEvent: (e) => events.push(e) });
      const setup = saver.setup({ retry: { attempts: 250, initialDelayMs: 20, maxDelayMs: 200 } });
      const retries = () => events.filter((e): e is RetryEvent => e.type === "retry");
      await until(() => retries().length >= 2);
      await server.start();
      const result = await setup;
      expect(result.toVersion).toBe(latestVersion());
      expect(retries().map((e) => e.attempt)).toEqual(retries().map((_, i) => i + 1));
      expect(retries()[0]).toMatchObject({ type: "retry", operation: "setup", schema: "public", attempts: 250, code: "ECONNREFUSED" });
      for (const e of retries()) expect(e.delayMs).toBeLessThanOrEqual(200);
      const config = await saver.put({ configurable: { thread_id: "t", checkpoint_ns: "" } }, makeCheckpoint({ a: 1 }), meta(-1), { a: 1 });
      expect((await saver.getTuple(config))?.checkpoint.channel_values).toEqual({ a: 1 });
    } finally {
      await pool.end();
    }
  });

  it("the CLI's migrate waits for a server that starts later, saying so once per attempt; --wait 0 tries once", async () => {
    await server.stop("fast");
    const once = await runCli(["migrate", "--schema", "cli_wait", "--database-url", server.url, "--wait", "0"]);
    expect(once.code).toBe(1);
    expect(once.stderr.trim().split("\n")).toHaveLength(1);
    expect(once.stderr).toMatch(/^langgraph-checkpoint-pg migrate: Could not connect to postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/postgres \(connection error ECONNREFUSED\): connect ECONNREFUSED/);

    const child = spawnScript("src/cli/main.ts", ["migrate", "--schema", "cli_wait", "--database-url", server.url]);
    const done = collect(child);
    let stderr = "";
    child.stderr.on("data", (d: string) => (stderr += d));
    // Started only once the CLI has failed twice: it must be waiting, not have given up.
    await until(() => (stderr.match(/attempt \d+ failed/g) ?? []).length >= 2);
    await server.start();
    const r = await done;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Migrated schema "cli_wait" in postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/postgres from no migration: applied 0000_init/);
    const lines = r.stderr.trim().split("\n");
    expect(lines.length).toBeGreaterThanOrEqual(2);
    lines.forEach((line, i) =>
      expect(line).toMatch(
        new RegExp(`^langgraph-checkpoint-pg migrate: attempt ${i + 1} failed: Could not connect to \\S+ \\((connection error ECONNREFUSED|SQLSTATE 57P03)\\): .+; trying again in \\d+\\.\\d s \\(waiting up to 60s in all: --wait\\)$`),
      ),
    );
    expect(r.stderr).not.toContain(`:${server.password}@`);
  });

  it("the CLI's migrate --store-only waits the same way, one line per attempt", async () => {
    await server.stop("fast");
    const child = spawnScript("src/cli/main.ts", ["migrate", "--store-only", "--no-adopt-store", "--schema", "cli_store_wait", "--database-url", server.url, "--wait", "2m"]);
    const done = collect(child);
    let stderr = "";
    child.stderr.on("data", (d: string) => (stderr += d));
    await until(() => (stderr.match(/attempt \d+ failed/g) ?? []).length >= 2);
    await server.start();
    const r = await done;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Migrated the store in schema "cli_store_wait" in postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/postgres: applied 0000_store_init/);
    const lines = r.stderr.trim().split("\n");
    lines.forEach((line, i) =>
      expect(line).toMatch(
        new RegExp(`^langgraph-checkpoint-pg migrate: attempt ${i + 1} failed: Could not connect to \\S+ \\((connection error ECONNREFUSED|SQLSTATE 57P03)\\): .+; trying again in \\d+\\.\\d s \\(waiting up to 2m in all: --wait\\)$`),
      ),
    );
  });

  it("open() waiting for the database says so once it has waited two seconds, each attempt one line", async () => {
    await server.stop("fast");
    const lines: string[] = [];
    const opening = PostgresSaver.open({ databaseUrl: server.url, retry: { attempts: 100, initialDelayMs: 400, maxDelayMs: 800 }, log: (l) => lines.push(l) });
    await until(() => lines.length >= 2);
    await server.start();
    const saver = await opening;
    try {
      expect((await saver.getTuple({ configurable: { thread_id: "t" } }))?.checkpoint.channel_values).toEqual({ a: 1 });
    } finally {
      await saver.end();
    }
    for (const line of lines) {
      expect(line).toMatch(/^langgraph-checkpoint-pg: waiting for the database at 127\.0\.0\.1:\d+\/postgres: attempt \d+ of 100 failed \((ECONNREFUSED|57P03)\); trying again in \d+\.\d s$/);
    }
    // The first attempts, within two seconds, are silent: a database that answers soon is not announced.
    expect(Number(/attempt (\d+)/.exec(lines[0]!)![1])).toBeGreaterThan(1);
  });

  it("PostgresStore.open() waits the same way: the same line once it has waited two seconds, the retry events to onEvent, then set up", async () => {
    await server.stop("fast");
    const lines: string[] = [];
    const retries: RetryEvent[] = [];
    const opening = PostgresStore.open({
      databaseUrl: server.url,
      schema: "store_wait",
      retry: { attempts: 100, initialDelayMs: 400, maxDelayMs: 800 },
      log: (l) => lines.push(l),
      onEvent: (e) => void (e.type === "retry" && retries.push(e)),
    });
    await until(() => lines.length >= 2);
    await server.start();
    const store = await opening;
    try {
      await store.put(["a"], "k", { v: 1 });
      expect((await store.get(["a"], "k"))?.value).toEqual({ v: 1 });
    } finally {
      await store.stop();
    }
    for (const line of lines) {
      expect(line).toMatch(/^langgraph-checkpoint-pg: waiting for the database at 127\.0\.0\.1:\d+\/postgres: attempt \d+ of 100 failed \((ECONNREFUSED|57P03)\); trying again in \d+\.\d s$/);
    }
    expect(Number(/attempt (\d+)/.exec(lines[0]!)![1])).toBeGreaterThan(1);
    expect(retries.length).toBeGreaterThanOrEqual(lines.length);
    expect(retries[0]).toMatchObject({ type: "retry", operation: "setup", schema: "store_wait", attempts: 100 });
  });
});

describe("a failure says what the server said, never the password", () => {
  let server: PgServer;
  const role = `wrong_pw_${randomBytes(4).toString("hex")}`;
  const right = `right-${randomBytes(8).toString("hex")}`;
  const wrong = `wrong-${randomBytes(8).toString("hex")}`;
  beforeAll(async () => {
    server = await PgServer.start({ label: "wrong-password" });
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${right}'`);
    await admin.end();
  });
  afterAll(async () => {
    await server?.destroy();
  });

  it("a wrong password: setup(), migrate(), an operation, open() and the CLI give the server's message, at once", async () => {
    const url = server.urlFor("postgres", role, wrong);
    const said = `password authentication failed for user "${role}"`;
    const pool = new pg.Pool({ connectionString: url });
    pool.on("error", () => undefined);
    let setup: unknown;
    let op: unknown;
    try {
      const saver = new PostgresSaver(pool);
      setup = await saver.setup().catch((e: unknown) => e);
      expect(setup).toBeInstanceOf(MigrationError);
      expect(setup).toMatchObject({ sqlState: "28P01", retryable: false });
      expect((setup as Error).message).toBe(`migrating schema "public" failed (SQLSTATE 28P01): ${said}; nothing was applied`);
      op = await saver.getTuple({ configurable: { thread_id: "t" } }).catch((e: unknown) => e);
      expect(op).toBeInstanceOf(DatabaseOperationError);
      expect((op as Error).message).toBe(`saver (checking the schema version) failed: SQLSTATE 28P01 (${said})`);
    } finally {
      await pool.end();
    }
    const viaUrl = await migrate({ connectionString: url }).catch((e: unknown) => e);
    expect((viaUrl as Error).message).toBe(`could not connect to run migrate (SQLSTATE 28P01): ${said}`);
    const lines: string[] = [];
    const opened = await PostgresSaver.open({ databaseUrl: url, log: (l) => lines.push(l) }).catch((e: unknown) => e);
    expect((opened as Error).message).toBe(`migrating schema "public" failed (SQLSTATE 28P01): ${said}; nothing was applied`);
    expect(lines).toEqual([]); // not retryable: no waiting
    const cli = await runCli(["migrate", "--database-url", url]);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toBe(`langgraph-checkpoint-pg migrate: Could not connect to postgres://${role}:***@127.0.0.1:${server.port}/postgres (SQLSTATE 28P01): ${said}\n`);
    for (const text of [setup, op, viaUrl, opened].map((e) => (e as Error).message).concat(cli.stderr)) expect(text).not.toContain(wrong);
  });

  it("a data exception's server message quotes the value it refused: it stays out, the SQLSTATE stays in", async () => {
    const client = new pg.Client({ connectionString: server.url });
    await client.connect();
    try {
      const secret = `not-a-number-${randomBytes(4).toString("hex")}`;
      const err = await client.query("SELECT $1::int", [secret]).catch((e: unknown) => e);
      expect((err as Error).message).toContain(secret); // what the server said
      const ours = new DatabaseOperationError("getTuple", err);
      expect(ours.message).toBe("getTuple failed: SQLSTATE 22P02");
      const migration = new MigrationError(`migrating schema "public" failed ${failureText(err)}; nothing was applied`, { cause: err });
      expect(migration.message).toBe('migrating schema "public" failed (SQLSTATE 22P02); nothing was applied');
    } finally {
      await client.end();
    }
  });
});

