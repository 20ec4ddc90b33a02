/**
 * PgBouncer in transaction-pooling mode (Debian's `pgbouncer`, started here in
 * front of a private server): the official conformance suite, graph runs,
 * lineage conflicts and concurrent migrations all go through it. Also pins
 * down what does not work, so the README's advice stays true:
 * - pg sends `statement_timeout` & co. as startup parameters, which PgBouncer
 *   refuses unless `ignore_startup_parameters` lists them (and then drops them);
 * - named prepared statements need PgBouncer >= 1.21 with `max_prepared_statements`.
 * Skips, saying why, when pgbouncer is not installed; fails instead under CI=true (.ci/run installs it).
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chown, mkdir, readFile, writeFile } from "node:fs/promises";
import net from "node:net";
import { join } from "node:path";
import { Command } from "@langchain/langgraph";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import type { CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BOUNDED_POOL, CheckpointConflictError, DatabaseOperationError, migrate, PostgresSaver } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { differential } from "../helpers/conformance.js";
import { addressGraph, approvalGraph, logGraph, mapReduceGraph, tid } from "../helpers/graphs.js";
import { missingProgram, skippable } from "../helpers/requirements.js";
import { freePort, PgServer } from "../helpers/server.js";

const PGBOUNCER = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer"].find((p) => existsSync(p));
const missing = missingProgram("pgbouncer", PGBOUNCER !== undefined, "apt-get install pgbouncer");

/** "1.18.0" -> [1, 18, 0] */
function bouncerVersion(): number[] {
  const out = execFileSync(PGBOUNCER!, ["--version"], { encoding: "utf8" });
  const m = /PgBouncer (\d+)\.(\d+)\.(\d+)/.exec(out);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : [0, 0, 0];
}
const atLeast = (v: number[], major: number, minor: number) => v[0]! > major || (v[0] === major && v[1]! >= minor);

/** The timeouts `BOUNDED_POOL` (and any pg config with them) sends in the startup packet. */
const STARTUP_TIMEOUTS = "statement_timeout,lock_timeout,idle_in_transaction_session_timeout";

interface BouncerOptions {
  poolSize?: number;
  ignoreStartupParameters?: string;
  queryWaitTimeout?: number;
  maxPreparedStatements?: number;
}

/** One pgbouncer process in front of `server`, as the server's OS user (pgbouncer refuses root). */
class Bouncer {
  private constructor(
    readonly port: number,
    readonly dir: string,
    private readonly child: ChildProcess,
    private readonly server: PgServer,
  ) {}

  static async start(server: PgServer, name: string, options: BouncerOptions = {}): Promise<Bouncer> {
    const dir = join(server.dir, `pgbouncer-${name}`);
    await mkdir(dir, { recursive: true });
    await server.own(dir);
    const port = await freePort();
    await writeFile(join(dir, "userlist.txt"), `"${server.user}" "${server.password}"\n`);
    const ini = [
      "[databases]",
      `* = host=127.0.0.1 port=${server.port}`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = scram-sha-256",
      `auth_file = ${join(dir, "userlist.txt")}`,
      "pool_mode = transaction",
      `default_pool_size = ${options.poolSize ?? 4}`,
      "max_client_conn = 500",
      `ignore_startup_parameters = ${options.ignoreStartupParameters ?? `extra_float_digits,${STARTUP_TIMEOUTS}`}`,
      `query_wait_timeout = ${options.queryWaitTimeout ?? 120}`,
      ...(options.maxPreparedStatements !== undefined ? [`max_prepared_statements = ${options.maxPreparedStatements}`] : []),
      `logfile = ${join(dir, "pgbouncer.log")}`,
      "",
    ].join("\n");
    await writeFile(join(dir, "pgbouncer.ini"), ini);
    for (const f of ["userlist.txt", "pgbouncer.ini"]) await server.own(join(dir, f));
    const { uid, gid } = server.processOptions;
    const child = spawn(PGBOUNCER!, [join(dir, "pgbouncer.ini")], { cwd: dir, uid, gid, stdio: "ignore" });
    const bouncer = new Bouncer(port, dir, child, server);
    const deadline = Date.now() + 30_000;
    while (!(await canConnect(port))) {
      if (child.exitCode !== null || Date.now() > deadline) {
        throw new Error(`pgbouncer did not start (exit ${child.exitCode}):\n${await bouncer.log()}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return bouncer;
  }

  /** URL of `database` through the bouncer. */
  url(database = "postgres"): string {
    const u = new URL(this.server.urlFor(database));
    u.port = String(this.port);
    return u.toString();
  }

  async log(): Promise<string> {
    return (await readFile(join(this.dir, "pgbouncer.log"), "utf8").catch(() => "")).trim().split("\n").slice(-20).join("\n");
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.kill("SIGINT"); // immediate shutdown
    await exited;
  }
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
}

describe.skipIf(missing)(skippable("PgBouncer, pool_mode = transaction", missing), () => {
  let server: PgServer;
  let bouncer: Bouncer;
  let version: number[];
  /** Client pool through the bouncer: more client connections than server connections. */
  let pool: pg.Pool;
  const direct = () => new pg.Pool({ connectionString: server.url, max: 2 });

  beforeAll(async () => {
    version = bouncerVersion();
    server = await PgServer.start({ label: "pgbouncer" });
    bouncer = await Bouncer.start(server, "main", { poolSize: 3 });
    // The same options a saver's own pool has (BOUNDED_POOL): they must pass the bouncer.
    pool = new pg.Pool({ ...BOUNDED_POOL, connectionString: bouncer.url(), max: 10 });
    console.log(`[pgbouncer] PgBouncer ${version.join(".")} in front of ${server.binaries.source}`);
  });
  afterAll(async () => {
    await pool?.end();
    await bouncer?.stop();
    await server?.destroy();
  });

  describe("official conformance suite through the bouncer (preparedStatements: false)", () => {
    const initializer: CheckpointSaverTestInitializer<PostgresSaver> = {
      checkpointerName: "langgraph-checkpoint-pg (pgbouncer)",
      beforeAllTimeout: 60_000,
      async beforeAll() {
        await migrate({ pool });
      },
      async createCheckpointer() {
        await pool.query("TRUNCATE checkpoints, checkpoint_writes, checkpoint_blobs, checkpoint_heads");
        return new PostgresSaver(pool, { preparedStatements: false });
      },
    };
    // The differential (test/helpers/conformance.ts): each statement the saver sends, unprepared, through the
    // bouncer (conformance.test.ts runs the whole suite on Postgres directly).
    differential(initializer);
  });

  describe("graphs, lineage and migrations through the bouncer", () => {
    let saver: PostgresSaver;
    beforeAll(async () => {
      await migrate({ pool });
      saver = new PostgresSaver(pool, { preparedStatements: false });
    });

    it("graph runs: the article's graph, an interrupt resumed, a map-reduce fan-out", async () => {
      expect(await addressGraph(saver).invoke({}, { configurable: { thread_id: tid("pgb-address") } })).toEqual({
        name: "pavaneeshwar",
        address: "Hyderabad residency",
      });
      const thread = tid("pgb-approval");
      await approvalGraph(saver).invoke({}, { configurable: { thread_id: thread } });
      expect(await approvalGraph(saver).invoke(new Command({ resume: "yes" }), { configurable: { thread_id: thread } })).toEqual({
        draft: "hello world",
        approved: "yes",
        published: true,
      });
      const calls = new Map<string, number>();
      const out = await mapReduceGraph(saver, calls).invoke({ items: ["a", "b", "c", "d", "e", "f"] }, { configurable: { thread_id: tid("pgb-map") } });
      expect(out.total).toBe("A,B,C,D,E,F");
    });

    it("many concurrent threads multiplexed over 3 server connections: every history intact", async () => {
      const threads = Array.from({ length: 12 }, (_, i) => tid(`pgb-log-${i}`));
      await Promise.all(
        threads.map(async (thread) => {
          const graph = logGraph(saver);
          for (let turn = 0; turn < 5; turn++) await graph.invoke({ word: `w${turn}` }, { configurable: { thread_id: thread } });
        }),
      );
      for (const thread of threads) {
        const state = await logGraph(saver).getState({ configurable: { thread_id: thread } });
        expect(state.values).toEqual({ word: "w4", log: ["w0", "w1", "w2", "w3", "w4"], turn: 5 });
      }
    });

    it("linear mode: of two concurrent children of the head exactly one commits", async () => {
      const linear = new PostgresSaver(pool, { lineage: "linear", preparedStatements: false });
      const thread = uuid6(-3);
      const root = makeCheckpoint({ x: 0 });
      const head = await linear.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, root, meta(-1), root.channel_versions);
      for (let round = 0; round < 10; round++) {
        const a = makeCheckpoint({ x: 1 }, { x: `${"2".padStart(32, "0")}.${Math.random()}` });
        const b = makeCheckpoint({ x: 2 }, { x: `${"2".padStart(32, "0")}.${Math.random()}` });
        const results = await Promise.allSettled([linear.put(head, a, meta(0), a.channel_versions), linear.put(head, b, meta(0), b.channel_versions)]);
        // After round 0 the head has moved on: both lose from then on.
        const won = results.filter((r) => r.status === "fulfilled").length;
        expect(won).toBe(round === 0 ? 1 : 0);
        for (const r of results) if (r.status === "rejected") expect(r.reason).toBeInstanceOf(CheckpointConflictError);
      }
      const { rows } = await pool.query("SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = $1", [thread]);
      expect(rows[0].n).toBe(2);
    });

    it("ten concurrent migrate() calls on a fresh schema: applied exactly once (the advisory lock is transaction-scoped)", async () => {
      const results = await Promise.all(Array.from({ length: 10 }, () => migrate({ pool, schema: "via_bouncer" })));
      expect(results.filter((r) => r.applied.length > 0)).toHaveLength(1);
      const saver2 = new PostgresSaver(pool, { schema: "via_bouncer", preparedStatements: false });
      expect(await addressGraph(saver2).invoke({}, { configurable: { thread_id: "x" } })).toMatchObject({ name: "pavaneeshwar" });
    });
  });

  describe("settings that matter", () => {
    it("pg's timeout startup parameters are refused unless ignore_startup_parameters lists them", async () => {
      const strict = await Bouncer.start(server, "strict", { ignoreStartupParameters: "extra_float_digits" });
      const p = new pg.Pool({ ...BOUNDED_POOL, connectionString: strict.url(), max: 1 });
      try {
        const saver = new PostgresSaver(p, { preparedStatements: false });
        const error = await saver.getTuple({ configurable: { thread_id: "x" } }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(DatabaseOperationError);
        expect(String((error as Error).cause)).toMatch(/unsupported startup parameter: (statement_timeout|lock_timeout|idle_in_transaction_session_timeout)/);
      } finally {
        await p.end();
        await strict.stop();
      }
    });

    it("ignored timeouts are dropped: set them on the role instead (ALTER ROLE ... SET), which the bouncer's server connections pick up", async () => {
      const { rows } = await pool.query("SHOW statement_timeout");
      expect(rows[0].statement_timeout).toBe("0"); // BOUNDED_POOL's 60s did not arrive
      const admin = direct();
      try {
        await admin.query("ALTER ROLE postgres SET statement_timeout = '60s'");
        await admin.query("ALTER ROLE postgres SET lock_timeout = '10s'");
        const fresh = await Bouncer.start(server, "role-settings", { poolSize: 1 });
        const p = new pg.Pool({ ...BOUNDED_POOL, connectionString: fresh.url(), max: 1 });
        try {
          expect((await p.query("SHOW statement_timeout")).rows[0].statement_timeout).toBe("1min");
          expect((await p.query("SHOW lock_timeout")).rows[0].lock_timeout).toBe("10s");
        } finally {
          await p.end();
          await fresh.stop();
        }
      } finally {
        await admin.query("ALTER ROLE postgres RESET statement_timeout");
        await admin.query("ALTER ROLE postgres RESET lock_timeout");
        await admin.end();
      }
    });

    it("a saturated bouncer pool is bounded by query_wait_timeout and surfaces as a retryable error", async () => {
      const tight = await Bouncer.start(server, "tight", { poolSize: 1, queryWaitTimeout: 1 });
      const p = new pg.Pool({ ...BOUNDED_POOL, connectionString: tight.url(), max: 2 });
      p.on("error", () => {});
      const saver = new PostgresSaver(p, { preparedStatements: false });
      try {
        await saver.getTuple({ configurable: { thread_id: "warm" } });
        const holder = await p.connect();
        await holder.query("BEGIN"); // pins the only server connection
        await holder.query("SELECT 1");
        const t0 = performance.now();
        const error = await saver.getTuple({ configurable: { thread_id: "x" } }).then(
          () => undefined,
          (e: unknown) => e,
        );
        const ms = performance.now() - t0;
        await holder.query("ROLLBACK");
        holder.release();
        expect(error).toBeInstanceOf(DatabaseOperationError);
        expect((error as DatabaseOperationError).retryable).toBe(true);
        expect(String((error as Error).cause)).toMatch(/query_wait_timeout/);
        // Generous for a busy machine; without query_wait_timeout the caller would wait for
        // pgbouncer's default (120 s) or BOUNDED_POOL's query_timeout (70 s).
        expect(ms).toBeLessThan(30_000);
        expect(await saver.getTuple({ configurable: { thread_id: "x" } })).toBeUndefined();
      } finally {
        await p.end();
        await tight.stop();
      }
    });

    it("named prepared statements: broken before PgBouncer 1.21; with >= 1.21 and max_prepared_statements they work", async () => {
      const supported = atLeast(version, 1, 21);
      const one = await Bouncer.start(server, "prepared", { poolSize: 1, ...(supported ? { maxPreparedStatements: 100 } : {}) });
      const p = new pg.Pool({ ...BOUNDED_POOL, connectionString: one.url(), max: 4 });
      p.on("error", () => {});
      try {
        // Several client connections share the one server connection: each prepares the same names.
        const prepared = new PostgresSaver(p, { preparedStatements: true });
        const results = await Promise.allSettled(Array.from({ length: 16 }, (_, i) => prepared.getTuple({ configurable: { thread_id: `p${i}` } })));
        const failures = results.filter((r): r is PromiseRejectedResult => r.status === "rejected").map((r) => r.reason as DatabaseOperationError);
        console.log(`[pgbouncer] ${version.join(".")}, preparedStatements: true: ${failures.length}/16 failed (${[...new Set(failures.map((f) => f.sqlState))].join(", ") || "none"})`);
        if (supported) {
          expect(failures).toEqual([]);
        } else {
          expect(failures.length).toBeGreaterThan(0);
          for (const f of failures) {
            expect(f).toBeInstanceOf(DatabaseOperationError);
            expect(["42P05", "26000"]).toContain(f.sqlState); // already exists / does not exist
          }
        }
        // preparedStatements: false always works, on the same bouncer.
        const plain = new PostgresSaver(p, { preparedStatements: false });
        const ok = await Promise.allSettled(Array.from({ length: 16 }, (_, i) => plain.getTuple({ configurable: { thread_id: `p${i}` } })));
        expect(ok.filter((r) => r.status === "rejected")).toEqual([]);
      } finally {
        await p.end();
        await one.stop();
      }
    });
  });
});
