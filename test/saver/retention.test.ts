/**
 * Retention that runs by itself (src/saver/retention.ts): expired threads
 * disappear without anyone calling prune; two processes with retention on
 * prune once per interval between them (real child processes, runs counted in
 * checkpointer_retention and by their events, by the database's clock); it
 * stops on stopRetention() and end(); its timers never keep a process alive.
 */
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { RunnableConfig } from "@langchain/core/runnables";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvalidOptionsError, migrate, PostgresSaver, type RetentionEvent, type SaverEvent } from "../../src/index.js";
import { SCHEMA_LOCK_SQL } from "../../src/db/official.js";
import { ROOT } from "../helpers/cli.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { logGraph, tid } from "../helpers/graphs.js";

const db = withTestDatabase("retention");
const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
let pool: ReturnType<typeof testPool>;

beforeAll(async () => {
  for (const schema of ["public", "two_procs", "idle_proc"]) await migrate({ pool: db.pool, schema });
  pool = testPool({ connectionString: db.url, max: 6 });
});
afterAll(async () => {
  await pool?.end();
});

const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id } });

/** Polls `probe` until it gives a value (not undefined or false); `what` says what is waited for (a test that never gets it times out). */
async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined): Promise<Exclude<T, false>> {
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v as Exclude<T, false>;
    await new Promise((r) => setTimeout(r, 20));
  }
}

const retentionConnections = async () =>
  (await db.pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'langgraph-checkpoint-pg:retention'")).rows[0].n as number;

describe("the retention option", () => {
  it("is checked when the saver is made, each error naming retention.<field>, before any SQL", () => {
    const bad: [unknown, string][] = [
      [{ keepLast: 5 }, "retention.every"],
      [{ every: "soon", keepLast: 5 }, "retention.every"],
      [{ every: "1m" }, "retention.keepLast/olderThan/idleFor/threadTtl"],
      [{ every: "1m", keepLast: 0 }, "retention.keepLast"],
      [{ every: "1m", keepLast: 5, cron: "* * *" }, "retention.cron"],
      [{ every: "1m", keepLast: 5, start: "yes" }, "retention.start"],
      ["10m", "retention"],
    ];
    for (const [retention, option] of bad) {
      let err: unknown;
      try {
        new PostgresSaver(pool, { retention: retention as never });
      } catch (e) {
        err = e;
      }
      expect(err, option).toBeInstanceOf(InvalidOptionsError);
      expect(err, option).toMatchObject({ option });
    }
  });

  it("expired threads disappear without anyone calling prune, leaving their tombstones; a thread in use stays; stopRetention() and end() close its pool", async () => {
    const events: SaverEvent[] = [];
    const writer = new PostgresSaver(pool);
    const [old, fresh] = [tid("old"), tid("fresh")];
    for (const t of [old, fresh]) await logGraph(writer).invoke({ word: "hi" }, cfg(t));
    await db.pool.query("UPDATE checkpoints SET created_at = now() - interval '2 days' WHERE thread_id = $1", [old]);
    await db.pool.query("UPDATE checkpoint_writes SET created_at = now() - interval '2 days' WHERE thread_id = $1", [old]);
    const saver = new PostgresSaver(pool, { retention: { every: "200ms", idleFor: "1d" }, onEvent: (e) => void events.push(e) });
    try {
      await until("the old thread is gone", async () => (await writer.getTuple(cfg(old))) === undefined);
      const runs = await until("a run reported", () => {
        const r = events.filter((e): e is Extract<RetentionEvent, { type: "retention" }> => e.type === "retention");
        return r.length > 0 && r.some((e) => e.threadsExpired > 0) ? r : undefined;
      });
      expect(runs[0]).toMatchObject({ schema: "public", aborted: false });
      expect(Date.parse(runs[0]!.finishedAt)).toBeGreaterThanOrEqual(Date.parse(runs[0]!.startedAt));
      expect((await db.pool.query("SELECT count(*)::int AS n FROM checkpoint_tombstones WHERE thread_id = $1", [old])).rows[0].n).toBe(1);
      expect(await writer.getTuple(cfg(fresh))).toBeDefined();
      expect(events.filter((e) => e.type === "retentionFailed")).toEqual([]);
      await saver.stopRetention();
      await until("its connections are closed", async () => (await retentionConnections()) === 0);
      await saver.startRetention();
      const before = events.length;
      await until("it runs again", () => events.length > before);
    } finally {
      await saver.end();
    }
    await until("its connections are closed after end()", async () => (await retentionConnections()) === 0);
  });

  it("startRetention() without the option says how to give it; with options it starts", async () => {
    const saver = new PostgresSaver(pool);
    await expect(saver.startRetention()).rejects.toMatchObject({ option: "retention" });
    await expect(saver.startRetention({ every: "1m" } as never)).rejects.toBeInstanceOf(InvalidOptionsError);
    const events: SaverEvent[] = [];
    const observed = new PostgresSaver(pool, { retention: { every: "150ms", keepLast: 10, start: false }, onEvent: (e) => void events.push(e) });
    try {
      await observed.startRetention();
      await until("a run", () => events.some((e) => e.type === "retention"));
    } finally {
      await observed.end();
    }
  });
});

describe("retention started before its schema is migrated (issue 39)", () => {
  /** Holds `schema`'s migration lock (the first thing setup() takes) until the returned function is called. */
  async function holdMigrationLock(schema: string): Promise<() => Promise<void>> {
    const client = await db.pool.connect();
    await client.query("BEGIN");
    await client.query(SCHEMA_LOCK_SQL, [schema]);
    return async () => {
      await client.query("COMMIT");
      client.release();
    };
  }

  const starts: [string, (schema: string, onEvent: (e: SaverEvent) => void) => Promise<PostgresSaver>][] = [
    [
      "new PostgresSaver(pool, { retention }), then setup()",
      async (schema, onEvent) => {
        const saver = new PostgresSaver(pool, { schema, retention: { every: "200ms", keepLast: 5 }, onEvent });
        await saver.setup();
        return saver;
      },
    ],
    ["PostgresSaver.open({ retention })", (schema, onEvent) => PostgresSaver.open({ databaseUrl: db.url, schema, retention: { every: "200ms", keepLast: 5 }, onEvent, log: false })],
  ];
  for (const [how, start] of starts) {
    it(`${how}: the first check says it waits for the migration, the first run comes after it, none fails`, async () => {
      const schema = `fresh_${Math.random().toString(36).slice(2, 8)}`;
      const events: SaverEvent[] = [];
      // setup() waits on the lock while retention checks (every 50 ms): the order the 3 of 4 fresh schemas had.
      const release = await holdMigrationLock(schema);
      const started = start(schema, (e) => void events.push(e));
      try {
        const first = await until("retention's first word", () => events.find((e) => e.type.startsWith("retention")));
        expect(first).toMatchObject({ type: "retentionWaiting", schema });
      } finally {
        await release();
      }
      const saver = await started;
      try {
        await until("a run", () => events.some((e) => e.type === "retention"));
        expect(events.filter((e) => e.type === "retentionFailed")).toEqual([]);
        expect(events.filter((e) => e.type === "retentionWaiting")).toHaveLength(1);
      } finally {
        await saver.end();
      }
    });
  }
});

interface Child {
  pid: number;
  events: Extract<RetentionEvent, { type: "retention" }>[];
  failures: unknown[];
  ready: Promise<void>;
  stop(): Promise<number | null>;
  exited: Promise<number | null>;
}

function child(mode: "run" | "idle", schema: string, every: string): Child {
  const proc = spawn(process.execPath, ["--import", TSX, join(ROOT, "test/fixtures/retention/process.ts"), mode, db.url, schema, every], { cwd: ROOT, stdio: "pipe" });
  const out: Child = {
    pid: proc.pid!,
    events: [],
    failures: [],
    ready: undefined as never,
    exited: new Promise((resolve) => proc.on("close", resolve)),
    async stop() {
      proc.stdin.end();
      return out.exited;
    },
  };
  let stderr = "";
  let buffer = "";
  let markReady!: () => void;
  out.ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    void out.exited.then((code) => reject(new Error(`retention process exited (${code}) before it was ready: ${stderr.slice(-2000)}`)));
  });
  proc.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  proc.stdout.setEncoding("utf8").on("data", (d: string) => {
    buffer += d;
    let nl: number;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const msg = JSON.parse(buffer.slice(0, nl)) as { ready?: true; type?: string };
      buffer = buffer.slice(nl + 1);
      if (msg.ready) markReady();
      else if (msg.type === "retention") out.events.push(msg as never);
      else out.failures.push(msg);
    }
  });
  return out;
}

describe("two processes with retention on", () => {
  it("prune once per interval between them, one at a time, by the database's clock", { timeout: 120_000 }, async () => {
    const every = 1000;
    const saver = new PostgresSaver(pool, { schema: "two_procs" });
    for (let i = 0; i < 5; i++) await logGraph(saver).invoke({ word: "hi" }, cfg(tid("busy")));
    const procs = [child("run", "two_procs", `${every}ms`), child("run", "two_procs", `${every}ms`)];
    try {
      await Promise.all(procs.map((p) => p.ready));
      await until("six runs between them", () => procs.reduce((n, p) => n + p.events.length, 0) >= 6);
    } finally {
      expect(await Promise.all(procs.map((p) => p.stop()))).toEqual([0, 0]);
    }
    expect(procs.flatMap((p) => p.failures)).toEqual([]);
    const runs = procs.flatMap((p) => p.events).sort((a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt));
    // Each run is counted once in the table, whichever process ran it.
    const { rows } = await db.pool.query("SELECT runs FROM two_procs.checkpointer_retention WHERE job = 'prune'");
    expect(Number(rows[0].runs)).toBe(runs.length);
    for (let i = 1; i < runs.length; i++) {
      const [prev, next] = [runs[i - 1]!, runs[i]!];
      // Never two runs at once, never two within one interval (the database's clock, microseconds).
      expect(Date.parse(next.startedAt), `run ${i}`).toBeGreaterThanOrEqual(Date.parse(prev.finishedAt));
      expect(Date.parse(next.startedAt) - Date.parse(prev.startedAt), `run ${i}`).toBeGreaterThanOrEqual(every);
    }
  });

  it("a process with retention on and nothing else to do exits by itself (its timers never keep it alive)", { timeout: 60_000 }, async () => {
    const idle = child("idle", "idle_proc", "1h");
    await idle.ready;
    expect(await idle.exited).toBe(0);
  });
});
