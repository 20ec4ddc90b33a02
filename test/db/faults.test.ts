/**
 * Faults against a real Postgres (a private server this file can stop, crash
 * and restart; a TCP proxy that stalls or kills connections): every failure is
 * a typed error within a bounded time, nothing is half-written, the pool heals
 * itself, and no client leaks.
 */
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BOUNDED_POOL,
  CheckpointConflictError,
  CheckpointerError,
  DatabaseOperationError,
  DeserializationError,
  migrate,
  PostgresSaver,
  type SaverEvent,
} from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { FaultProxy } from "../helpers/fault-proxy.js";
import { PgServer } from "../helpers/server.js";
import { chainAudit, type ChainAudit } from "../helpers/audit.js";

let server: PgServer;
/** Admin pool for assertions; it survives restarts (its idle clients die and are replaced). */
let admin: pg.Pool;

beforeAll(async () => {
  server = await PgServer.start({ label: "faults" });
  admin = new pg.Pool({ connectionString: server.url, max: 3, application_name: "faults-admin" });
  admin.on("error", () => {}); // idle clients die on every restart
  await migrate({ pool: admin });
});
afterAll(async () => {
  await admin?.end();
  await server?.destroy();
});

const cfg = (thread_id: string) => ({ configurable: { thread_id, checkpoint_ns: "" } });

/** A pool the way `PostgresSaver.fromConnString` makes one, with overrides. */
function boundedPool(url: string, name: string, extra: pg.PoolConfig = {}): pg.Pool {
  return new pg.Pool({ ...BOUNDED_POOL, connectionString: url, application_name: name, ...extra });
}

/** Rejects (with the settled error) or fails the test; also returns how long it took. */
async function failure(p: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const t0 = performance.now();
  try {
    await p;
  } catch (error) {
    return { error, ms: performance.now() - t0 };
  }
  throw new Error("expected the operation to fail");
}

/**
 * Upper bound for "fails promptly". The timeouts under test are 20-500 ms; a starved CI machine (CPU
 * hogs on two cores) adds seconds of scheduling delay on top. Still below the 10 s defaults of
 * BOUNDED_POOL (connectionTimeoutMillis, lock_timeout) and far below its statement_timeout and
 * query_timeout: a test whose own timeout were ignored still fails.
 */
const PROMPT_MS = 8_000;

/** Polls `check` until it holds; the time limit only turns a condition that never comes into a failure. */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Waits until a backend of `app` is blocked on a lock. */
const lockWaiter = (app: string) =>
  until(`${app} to wait for a lock`, async () => {
    const { rows } = await admin.query("SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", [app]);
    return rows.length > 0;
  });

/** Waits until no backend of `app` remains (a killed client's backend may still be finishing its statement). */
const gone = (app: string) =>
  until(`${app}'s backends to exit`, async () => {
    const { rows } = await admin.query("SELECT 1 FROM pg_stat_activity WHERE application_name = $1", [app]);
    return rows.length === 0;
  });

/** Locks a thread's head row from another session until `release()`. */
async function lockHead(threadId: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: server.url, application_name: "faults-blocker" });
  client.on("error", () => {}); // dies with the server in restart tests
  await client.connect();
  await client.query("BEGIN");
  await client.query("SELECT 1 FROM checkpoint_heads WHERE thread_id = $1 FOR UPDATE", [threadId]);
  return {
    release: async () => {
      await client.query("ROLLBACK").catch(() => {});
      await client.end().catch(() => {});
    },
  };
}

const audit = (threadId: string) => chainAudit(admin, threadId);

function expectIntact(a: ChainAudit) {
  expect(a).toMatchObject({ heads: 1, roots: 1, gaps: 0, missing_blobs: 0 });
  expect(a.chain).toBe(a.rows);
}

async function count(table: string, threadId: string): Promise<number> {
  const { rows } = await admin.query(`SELECT count(*)::int AS n FROM ${table} WHERE thread_id = $1`, [threadId]);
  return rows[0].n;
}

function expectRetryable(error: unknown) {
  expect(error).toBeInstanceOf(DatabaseOperationError);
  expect((error as DatabaseOperationError).code).toBe("DATABASE_ERROR");
  expect((error as DatabaseOperationError).retryable).toBe(true);
}

// ---------------------------------------------------------------------------

const StepState = Annotation.Root({ log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });

/** START -> a -> b -> c -> END; `b` waits at `gate` when one is set. */
function stepGraph(checkpointer: PostgresSaver, calls: Record<string, number>, gate: { at?: () => Promise<void> }) {
  const node = (name: string) => async () => {
    calls[name] = (calls[name] ?? 0) + 1;
    if (name === "b" && gate.at) await gate.at();
    return { log: [name] };
  };
  return new StateGraph(StepState)
    .addNode("a", node("a"))
    .addNode("b", node("b"))
    .addNode("c", node("c"))
    .addEdge(START, "a")
    .addEdge("a", "b")
    .addEdge("b", "c")
    .addEdge("c", END)
    .compile({ checkpointer });
}

describe("Postgres restarts", () => {
  it("in the middle of a graph run: the step in flight fails typed and retryable, the pool heals, the next invocation continues from the last commit", async () => {
    const events: SaverEvent[] = [];
    // The saver owns the pool and listens for idle-client errors itself: no crash on restart.
    const saver = PostgresSaver.fromConnString(server.url, { pool: { max: 4, application_name: "faults-restart" }, onEvent: (e) => events.push(e) });
    const calls: Record<string, number> = {};
    let entered!: () => void;
    const inB = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const gate: { at?: () => Promise<void> } = { at: () => (entered(), new Promise<void>((r) => (release = r))) };
    const graph = stepGraph(saver, calls, gate);
    const thread = uuid6(-3);
    const config = { configurable: { thread_id: thread }, durability: "sync" as const };
    try {
      const run = graph.invoke({ log: ["input"] }, config);
      run.catch(() => {});
      await inB;
      await server.stop("fast"); // idle clients get 57P01 and are dropped
      release();
      const { error, ms } = await failure(run);
      expectRetryable(error);
      expect(ms).toBeLessThan(PROMPT_MS);
      expect(events.filter((e) => e.type === "connectionError").length).toBeGreaterThan(0);

      // While it is down: every operation fails fast and typed, never hangs.
      const down = await failure(saver.getTuple(cfg(thread)));
      expectRetryable(down.error);
      expect(down.ms).toBeLessThan(PROMPT_MS);

      await server.start();
      // Nothing half-written: the last commit is the checkpoint after `a`.
      expectIntact(await audit(thread));
      const head = await saver.getTuple(cfg(thread));
      expect(head?.checkpoint.channel_values).toMatchObject({ log: ["input", "a"] });
      expect(head?.metadata?.step).toBe(1);

      // The same pool, no reconnect by hand: resume the run.
      gate.at = undefined;
      const final = await graph.invoke(null, config);
      expect(final).toEqual({ log: ["input", "a", "b", "c"] });
      expect(calls).toEqual({ a: 1, b: 2, c: 1 }); // a is not re-run; b ran again (its writes were never stored)
      const after = await audit(thread);
      expectIntact(after);
      expect(after.last_step).toBe(3);
    } finally {
      release?.();
      await saver.end();
    }
  });

  for (const mode of ["fast", "immediate"] as const) {
    it(`a put in flight when Postgres stops (${mode}) fails retryable; nothing of it is stored; retrying it after the restart commits it once`, async () => {
      const pool = boundedPool(server.url, `faults-inflight-${mode}`);
      const saver = new PostgresSaver(pool); // attaches the pool 'error' listener
      const thread = uuid6(-3);
      try {
        const root = makeCheckpoint({ x: "root" });
        const rootConfig = await saver.put(cfg(thread), root, meta(-1), root.channel_versions);
        const v = `${"2".padStart(32, "0")}.5`;
        const child = makeCheckpoint({ x: "child", y: "new" }, { x: v, y: v });
        const blocker = await lockHead(thread);
        const put = saver.put(rootConfig, child, meta(0), { x: v, y: v });
        put.catch(() => {});
        await lockWaiter(`faults-inflight-${mode}`);
        const t0 = performance.now();
        await server.stop(mode);
        // The stop terminates every backend at once, the lock holder's too: rarely, the waiting
        // put gets the lock and commits first. Either way it is all or nothing.
        const outcome = await put.then(
          () => ({ committed: true as const }),
          (error: unknown) => ({ committed: false as const, error }),
        );
        if (!outcome.committed) {
          expectRetryable(outcome.error);
          if (mode === "fast") expect((outcome.error as DatabaseOperationError).sqlState).toBe("57P01");
          expect(performance.now() - t0).toBeLessThan(PROMPT_MS);
        }
        await blocker.release();

        await server.start(); // crash recovery after an immediate stop
        expect(await count("checkpoints", thread)).toBe(outcome.committed ? 2 : 1);
        expect(await count("checkpoint_blobs", thread)).toBe(outcome.committed ? 3 : 1);
        const again = await saver.put(rootConfig, child, meta(0), { x: v, y: v });
        expect(again.configurable?.checkpoint_id).toBe(child.id);
        expect(await count("checkpoints", thread)).toBe(2);
        expect(await count("checkpoint_blobs", thread)).toBe(3);
        expectIntact(await audit(thread));
        expect((await saver.getTuple(cfg(thread)))?.checkpoint.channel_values).toEqual({ x: "child", y: "new" });
      } finally {
        await pool.end();
        // Never leave the server down for the tests after this one.
        if (!server.running) await server.start();
      }
    });
  }
});

describe("connections that die or stall", () => {
  let proxy: FaultProxy;
  beforeAll(async () => {
    proxy = await FaultProxy.start(server.port);
  });
  afterAll(async () => {
    await proxy?.close();
  });

  it("killed mid-statement: a retryable error; the statement is all or nothing; the same put retried commits exactly once", async () => {
    const app = "faults-kill";
    const pool = boundedPool(proxy.url(server.url), app);
    const saver = new PostgresSaver(pool);
    const thread = uuid6(-3);
    try {
      const root = makeCheckpoint({ x: "root" });
      const rootConfig = await saver.put(cfg(thread), root, meta(-1), root.channel_versions);
      const v = `${"2".padStart(32, "0")}.7`;
      const child = makeCheckpoint({ x: "child", y: "new" }, { x: v, y: v });
      const blocker = await lockHead(thread);
      const put = saver.put(rootConfig, child, meta(0), { x: v, y: v });
      put.catch(() => {});
      await lockWaiter(app);
      const connectionsBefore = proxy.connections;
      proxy.kill();
      const { error, ms } = await failure(put);
      expectRetryable(error);
      expect((error as DatabaseOperationError).sqlState).toBeUndefined();
      expect(ms).toBeLessThan(PROMPT_MS);
      // The orphaned backend still holds the whole statement: it commits or rolls back as one.
      await blocker.release();
      await gone(app);
      const stored = await count("checkpoints", thread);
      expect([1, 2]).toContain(stored);
      expect(await count("checkpoint_blobs", thread)).toBe(stored === 2 ? 3 : 1);
      // Not knowing whether it committed, the caller retries: a re-put of the same checkpoint is accepted once.
      await saver.put(rootConfig, child, meta(0), { x: v, y: v });
      expect(await count("checkpoints", thread)).toBe(2);
      expect(await count("checkpoint_blobs", thread)).toBe(3);
      expectIntact(await audit(thread));
      expect(proxy.connections).toBeGreaterThan(connectionsBefore); // the pool reconnected by itself
    } finally {
      await pool.end();
    }
  });

  it("killed in the middle of a migration transaction: the schema is migrated completely or not at all", async () => {
    const app = "faults-migrate-kill";
    const outcomes = { none: 0, complete: 0 };
    for (let i = 0; i < 12; i++) {
      const pool = new pg.Pool({ connectionString: proxy.url(server.url), application_name: app });
      pool.on("error", () => {});
      const schema = `killed_${i}`;
      const running = migrate({ pool, schema, retry: false }); // one attempt: its atomicity is what is tested
      running.catch(() => {});
      await new Promise((r) => setTimeout(r, i * 3));
      proxy.kill();
      await running.catch(() => {});
      await pool.end().catch(() => {});
      await gone(app);
      const { rows } = await admin.query(
        `SELECT (SELECT count(*) FROM pg_namespace WHERE nspname = $1)::int AS schemas,
                (SELECT count(*) FROM pg_tables WHERE schemaname = $1)::int AS tables`,
        [schema],
      );
      const { schemas, tables } = rows[0] as { schemas: number; tables: number };
      if (schemas === 0) {
        outcomes.none++;
        expect(tables).toBe(0);
      } else {
        outcomes.complete++;
        expect(tables).toBe(7); // six tables + checkpointer_migrations
        const { rows: v } = await admin.query(`SELECT max(version)::int AS v FROM ${schema}.checkpointer_migrations`);
        expect(v[0].v).toBeGreaterThan(0);
        const again = await migrate({ pool: admin, schema });
        expect(again.applied).toEqual([]);
      }
    }
    expect(outcomes.none + outcomes.complete).toBe(12);
    expect(outcomes.none).toBeGreaterThan(0); // the kills did land mid-way
  });

  it("a stalled link while connecting: bounded by connectionTimeoutMillis, a retryable error", async () => {
    const pool = boundedPool(proxy.url(server.url), "faults-stall-connect", { connectionTimeoutMillis: 300 });
    const saver = new PostgresSaver(pool);
    proxy.stall();
    try {
      const { error, ms } = await failure(saver.getTuple(cfg("stalled")));
      expectRetryable(error);
      expect(ms).toBeGreaterThanOrEqual(250);
      expect(ms).toBeLessThan(PROMPT_MS);
    } finally {
      proxy.resume();
      await pool.end();
    }
  });

  it("a link that stalls mid-query: bounded by query_timeout (client side), a retryable error; the dead client is dropped", async () => {
    const pool = boundedPool(proxy.url(server.url), "faults-stall-query", { query_timeout: 500 });
    const saver = new PostgresSaver(pool);
    try {
      const thread = uuid6(-3);
      const root = makeCheckpoint({ x: "root" });
      await saver.put(cfg(thread), root, meta(-1), root.channel_versions);
      expect(pool.totalCount).toBe(1);
      proxy.stall();
      const { error, ms } = await failure(saver.getTuple(cfg(thread)));
      expectRetryable(error);
      expect(ms).toBeGreaterThanOrEqual(450);
      expect(ms).toBeLessThan(PROMPT_MS);
      expect(pool.totalCount).toBe(0); // never handed out again
      proxy.resume();
      expect((await saver.getTuple(cfg(thread)))?.checkpoint.id).toBe(root.id);
    } finally {
      proxy.resume();
      await pool.end();
    }
  });

  it("pools the saver creates bound a stalled query on the client side too (statement_timeout cannot: the server's answer is lost)", () => {
    // Required: BOUNDED_POOL.query_timeout, a little above statement_timeout, so a
    // partitioned link fails the operation instead of hanging it until TCP gives up.
    expect(BOUNDED_POOL.query_timeout).toBeTypeOf("number");
    expect(BOUNDED_POOL.query_timeout!).toBeGreaterThan(BOUNDED_POOL.statement_timeout as number);
  });
});

/** A root, then a child put while another connection holds the head's lock: how that put fails, and how fast. */
async function putOnLockedHead(saver: PostgresSaver, thread: string) {
  const root = makeCheckpoint({ x: "root" });
  const rootConfig = await saver.put(cfg(thread), root, meta(-1), root.channel_versions);
  const blocker = await lockHead(thread);
  const child = makeCheckpoint({ x: "child" }, { x: `${"2".padStart(32, "0")}.1` });
  const result = await failure(saver.put(rootConfig, child, meta(0), child.channel_versions));
  await blocker.release();
  return result;
}

describe("lock and statement timeouts", () => {
  it("lock_timeout: a put waiting on a locked head fails with 55P03, retryable, having written nothing", async () => {
    const pool = boundedPool(server.url, "faults-lock-timeout", { lock_timeout: 300 });
    const saver = new PostgresSaver(pool);
    const thread = uuid6(-3);
    try {
      const { error, ms } = await putOnLockedHead(saver, thread);
      expectRetryable(error);
      expect((error as DatabaseOperationError).sqlState).toBe("55P03");
      expect(ms).toBeLessThan(PROMPT_MS);
      expect(await count("checkpoints", thread)).toBe(1);
      expect(await count("checkpoint_blobs", thread)).toBe(1);
    } finally {
      await pool.end();
    }
  });

  it("statement_timeout: a statement running too long fails with 57014, retryable, having written nothing", async () => {
    const pool = boundedPool(server.url, "faults-statement-timeout", { statement_timeout: 300, lock_timeout: 0 });
    const saver = new PostgresSaver(pool);
    const thread = uuid6(-3);
    try {
      const { error, ms } = await putOnLockedHead(saver, thread);
      expectRetryable(error);
      expect((error as DatabaseOperationError).sqlState).toBe("57014");
      expect(ms).toBeLessThan(PROMPT_MS);
      expect(await count("checkpoints", thread)).toBe(1);
    } finally {
      await pool.end();
    }
  });
});

describe("pool exhaustion", () => {
  it("callers wait connectionTimeoutMillis, then get a retryable DatabaseOperationError naming the cause", async () => {
    // The two clients are opened under the generous default timeout: on a starved machine opening
    // a connection can take longer than the 200 ms the waiting caller below gets.
    const pool = boundedPool(server.url, "faults-exhaust", { max: 2 });
    const saver = new PostgresSaver(pool);
    try {
      await saver.getTuple(cfg("warm-up")); // the schema check is done once
      const held = await Promise.all([pool.connect(), pool.connect()]);
      pool.options.connectionTimeoutMillis = 200; // read by pg-pool when a caller starts to wait
      const { error, ms } = await failure(saver.getTuple(cfg("exhausted")));
      expectRetryable(error);
      expect((error as Error).message).toMatch(/getTuple failed: connection error \(timeout exceeded when trying to connect\)/);
      expect(ms).toBeGreaterThanOrEqual(180);
      expect(ms).toBeLessThan(PROMPT_MS);
      held.forEach((c) => c.release());
      expect(await saver.getTuple(cfg("exhausted"))).toBeUndefined();
    } finally {
      await pool.end();
    }
  });

  it("500 failing operations of five kinds: each rejected typed, nothing of them written, no client leaked here or on the server", async () => {
    const app = "faults-leak";
    const max = 5;
    // pg-pool destroys the client after every SQL error, so most of these operations open a new
    // connection; they get the default connectionTimeoutMillis (10 s) for it (see `batch`).
    const pool = boundedPool(server.url, app, { max });
    const saver = new PostgresSaver(pool, { lineage: "linear" });
    // Lock timeouts (kind 4) come from a second pool. With a 20 ms lock_timeout on every client,
    // the stale puts of kind 1, which queue on the head row's lock, turn into lock timeouts
    // whenever a busy machine deschedules the backend holding that lock.
    const lockPool = boundedPool(server.url, app, { max, lock_timeout: 20 });
    const lockSaver = new PostgresSaver(lockPool, { lineage: "linear" });
    // Server-side failures in the middle of a put: a trigger refuses some threads
    // after the statement has already inserted the blobs.
    await admin.query(`CREATE OR REPLACE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.thread_id LIKE 'boom-%' THEN RAISE EXCEPTION 'refused by test trigger'; END IF; RETURN NEW; END $$`);
    await admin.query("DROP TRIGGER IF EXISTS refuse_boom ON checkpoints");
    await admin.query("CREATE TRIGGER refuse_boom BEFORE INSERT ON checkpoints FOR EACH ROW EXECUTE FUNCTION refuse_boom()");

    /** Every error class these operations may end in, and whether a retry could succeed. */
    const RETRYABLE = { conflict: true, refused: false, corrupt: false, "lock-timeout": true, connection: true } as const;
    type Kind = keyof typeof RETRYABLE;
    const kindOf = (err: unknown): Kind | string => {
      if (err instanceof CheckpointConflictError) return "conflict";
      if (err instanceof DeserializationError) return "corrupt";
      if (err instanceof DatabaseOperationError) {
        if (err.sqlState === undefined) return "connection";
        if (err.sqlState === "P0001") return "refused";
        if (err.sqlState === "55P03") return "lock-timeout";
        return `DatabaseOperationError ${err.sqlState}`;
      }
      return `${(err as Error)?.name}: ${(err as Error)?.message}`;
    };
    const seen: Record<string, number> = {};
    /**
     * `n` operations, `parallel` at a time; each must be rejected with a typed error of kind
     * `kind`, or (unless `orConnection` is false) with a retryable connection error. How many of
     * each is up to the scheduler: pg-pool destroys a client after an SQL error and frees its slot
     * before the close completes, so a lane that calls again at once opens a new client ahead of
     * the callers already queued, and those can wait out connectionTimeoutMillis when a batch
     * takes longer than that (on a busy machine: 5 of a batch of 200, once per queued caller).
     */
    const batch = async (kind: Kind, n: number, op: (i: number) => Promise<unknown>, { parallel = 2 * max, orConnection = true } = {}) => {
      const allowed: string[] = orConnection ? [kind, "connection"] : [kind];
      const counts: Record<string, number> = {};
      let next = 0;
      const lane = async () => {
        for (let i = next++; i < n; i = next++) {
          const { error } = await failure(op(i));
          const got = kindOf(error);
          expect(allowed, `operation ${i}`).toContain(got);
          expect((error as CheckpointerError).retryable, `retryable of ${got}`).toBe(RETRYABLE[got as Kind]);
          counts[got] = (counts[got] ?? 0) + 1;
        }
      };
      await Promise.all(Array.from({ length: parallel }, lane));
      expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(n);
      // The batch did exercise its failure, not only connection trouble.
      expect(counts[kind] ?? 0, `${kind} among ${JSON.stringify(counts)}`).toBeGreaterThan(0);
      for (const [k, c] of Object.entries(counts)) seen[k] = (seen[k] ?? 0) + c;
    };
    try {
      // 1. Lineage conflicts (stale parent).
      const thread = uuid6(-3);
      const root = makeCheckpoint({ x: 0 });
      const rootConfig = await saver.put(cfg(thread), root, meta(-1), root.channel_versions);
      const next = makeCheckpoint({ x: 1 }, { x: `${"2".padStart(32, "0")}.1` });
      await saver.put(rootConfig, next, meta(0), next.channel_versions);
      const stored = { checkpoints: await count("checkpoints", thread), blobs: await count("checkpoint_blobs", thread) };
      await batch("conflict", 100, () => {
        const stale = makeCheckpoint({ x: 2 }, { x: `${"2".padStart(32, "0")}.${Math.random()}` });
        return saver.put(rootConfig, stale, meta(0), stale.channel_versions);
      });
      // 2. Server errors mid-statement (the blobs CTE ran, then the trigger raised).
      await batch("refused", 100, (i) => {
        const cp = makeCheckpoint({ big: "x".repeat(1000) });
        return saver.put(cfg(`boom-${i}`), cp, meta(-1), cp.channel_versions);
      });
      // 3. Corrupt stored bytes.
      const corrupt = uuid6(-3);
      const cc = makeCheckpoint({ x: "fine" });
      await saver.put(cfg(corrupt), cc, meta(-1), cc.channel_versions);
      await admin.query("UPDATE checkpoint_blobs SET value = '\\xc1'::bytea WHERE thread_id = $1", [corrupt]);
      await batch("corrupt", 100, () => saver.getTuple(cfg(corrupt)));
      // 4. Lock timeouts.
      const blocker = await lockHead(thread);
      try {
        await batch("lock-timeout", 100, () => {
          const cp = makeCheckpoint({ x: 3 }, { x: `${"3".padStart(32, "0")}.${Math.random()}` });
          return lockSaver.put({ configurable: { ...cfg(thread).configurable, checkpoint_id: next.id } }, cp, meta(1), cp.channel_versions);
        });
      } finally {
        await blocker.release();
      }
      // 5. Pool exhaustion: every client held (opened under the generous timeout), 100 callers
      // time out waiting for one; nothing else can happen to them.
      const held = await Promise.all(Array.from({ length: max }, () => pool.connect()));
      pool.options.connectionTimeoutMillis = 150; // read by pg-pool when a caller starts to wait
      try {
        await batch("connection", 100, () => saver.getTuple(cfg(thread)), { parallel: 100, orConnection: false });
      } finally {
        pool.options.connectionTimeoutMillis = BOUNDED_POOL.connectionTimeoutMillis;
        held.forEach((c) => c.release());
      }
      expect(Object.values(seen).reduce((a, b) => a + b, 0)).toBe(500);
      console.log(`[faults] 500 failing operations: ${JSON.stringify(seen)}`);

      // Nothing of the rejected puts remains: the stale and lock-timed-out ones wrote nothing, the
      // refused ones rolled back as a whole (blobs included).
      expect(await count("checkpoints", thread)).toBe(stored.checkpoints);
      expect(await count("checkpoint_blobs", thread)).toBe(stored.blobs);
      const { rows: boom } = await admin.query(
        "SELECT (SELECT count(*) FROM checkpoint_blobs WHERE thread_id LIKE 'boom-%')::int + (SELECT count(*) FROM checkpoints WHERE thread_id LIKE 'boom-%')::int AS n",
      );
      expect(boom[0].n).toBe(0);

      // No leak in the pools...
      for (const p of [pool, lockPool]) {
        expect(p.waitingCount).toBe(0);
        expect(p.totalCount).toBeLessThanOrEqual(max);
        expect(p.idleCount).toBe(p.totalCount);
      }
      // ... nor on the server: exactly the pools' clients, none left in a transaction. The backend
      // of a destroyed client exits a moment after its socket closes: wait for it (a leaked one never goes).
      let states: string[] = [];
      await until(`${app}'s backends to be exactly the pools' idle clients`, async () => {
        const { rows } = await admin.query("SELECT state FROM pg_stat_activity WHERE application_name = $1", [app]);
        states = rows.map((r) => r.state as string);
        return states.length === pool.totalCount + lockPool.totalCount && states.every((s) => s === "idle");
      }).catch((err: Error) => {
        throw new Error(`${err.message}; the server has ${JSON.stringify(states)}, the pools ${pool.totalCount} + ${lockPool.totalCount}`);
      });
      // And both still work: the head never moved.
      expect((await saver.getTuple(cfg(thread)))?.checkpoint.id).toBe(next.id);
      expect((await lockSaver.getTuple(cfg(thread)))?.checkpoint.id).toBe(next.id);
    } finally {
      await admin.query("DROP TRIGGER IF EXISTS refuse_boom ON checkpoints");
      await pool.end();
      await lockPool.end();
    }
  });
});
