/**
 * Tracing (issue 42) with the real OpenTelemetry SDK: its in-memory exporters, its async-hooks
 * context manager (the one Node's SDK registers), real LangGraph graphs on a real Postgres. What
 * is checked: one span per saver and store call, each a child of the caller's active span, with the
 * database attributes and the saver's own facts; errors by code only; no thread id, value or
 * password in anything exported unless asked; and that the package without this entry never loads
 * @opentelemetry/api.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { context, type Tracer } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader, type ResourceMetrics } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { Annotation, END, START, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CheckpointConflictError, InvalidOptionsError, migrate, PostgresSaver, PostgresStore, prune } from "../../src/index.js";
import { instrument } from "../../src/otel/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { ROOT } from "../helpers/cli.js";
import { testPool, withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("otel");
const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const reader = new PeriodicExportingMetricReader({ exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE), exportIntervalMillis: 3_600_000 });
const meterProvider = new MeterProvider({ readers: [reader] });
const app: Tracer = tracerProvider.getTracer("app");
const contextManager = new AsyncLocalStorageContextManager();

// A role of its own, with a password no span may hold (the test server's own is "postgres", a word
// every span holds as "postgresql").
const role = `otel_${randomBytes(4).toString("hex")}`;
const password = `pw-${randomBytes(8).toString("hex")}`;
let pool: pg.Pool;

beforeAll(async () => {
  context.setGlobalContextManager(contextManager.enable());
  const database = new URL(db.url).pathname.slice(1);
  await db.pool.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
  await db.pool.query(`GRANT ALL ON DATABASE ${pg.escapeIdentifier(database)} TO ${role}`);
  const url = new URL(db.url);
  url.username = role;
  url.password = password;
  pool = testPool({ connectionString: url.toString() });
  await migrate({ pool, schema: "traced" });
  await new PostgresStore(pool, { schema: "traced" }).setup({ adopt: false });
});

afterAll(async () => {
  await pool.end();
  await db.pool.query(`DROP OWNED BY ${role}`);
  await db.pool.query(`DROP ROLE ${role}`);
  context.disable();
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
});

afterEach(() => spans.reset());

const named = (prefix: string) => spans.getFinishedSpans().filter((s) => s.name.startsWith(prefix));
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const marker = (what: string) => `${what}-${randomBytes(6).toString("hex")}`;

/** The 10-node graph of the bench (bench/graph.ts), each node opening a span of its own, as an instrumented node would. */
function tenNodes(checkpointer: PostgresSaver, value: string) {
  const State = Annotation.Root({ items: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const builder: any = new StateGraph(State);
  for (let i = 0; i < 10; i++) builder.addNode(`n${i}`, () => app.startActiveSpan(`step n${i}`, (span) => (span.end(), { items: [`${value}-${i}`] })));
  builder.addEdge(START, "n0");
  for (let i = 1; i < 10; i++) builder.addEdge(`n${i - 1}`, `n${i}`);
  builder.addEdge("n9", END);
  return builder.compile({ checkpointer });
}

/** Each of the saver's methods counted as LangGraph calls it, before the instrumentation wraps them. */
function counted<T extends object>(target: T, names: string[]): Map<string, number> {
  const calls = new Map<string, number>();
  const object = target as Record<string, (...args: unknown[]) => unknown>;
  for (const name of names) {
    const method = object[name]!;
    object[name] = function (this: unknown, ...args: unknown[]) {
      calls.set(name, (calls.get(name) ?? 0) + 1);
      return method.apply(this, args);
    };
  }
  return calls;
}

async function exported(): Promise<string> {
  const { resourceMetrics } = await reader.collect();
  const metrics = (resourceMetrics as ResourceMetrics).scopeMetrics.flatMap((s) => s.metrics);
  const finished = spans.getFinishedSpans().map((s) => ({ name: s.name, attributes: s.attributes, events: s.events, status: s.status, links: s.links }));
  return JSON.stringify({ spans: finished, metrics });
}

describe("the saver", () => {
  it("a 10-node graph invoked under an active span: one span per saver call, each a child of that span, with the database attributes and the saver's facts", async () => {
    const saver = new PostgresSaver(pool, { schema: "traced" });
    const calls = counted(saver, ["put", "putWrites", "getTuple", "list"]);
    instrument(saver, { tracerProvider, meterProvider, pool });
    const threadId = marker("user-alice");
    const graph = tenNodes(saver, marker("value"));
    const agent = await app.startActiveSpan("agent", async (span) => {
      await graph.invoke({ items: [] }, { configurable: { thread_id: threadId }, durability: "sync" });
      span.end();
      return span.spanContext().spanId;
    });
    const checkpoint = named("checkpoint.");
    for (const [name, n] of calls) expect({ name, spans: checkpoint.filter((s) => s.name === `checkpoint.${name}`).length }).toEqual({ name, spans: n });
    // The input's checkpoint, then one per step: the ten nodes' and the last (step 10, nothing to run).
    expect(calls.get("put")).toBe(12);
    expect(checkpoint.map(parentOf)).toEqual(checkpoint.map(() => agent));
    // The nodes' own spans are the agent's children too: the context flows through LangGraph.
    const steps = named("step ");
    expect(steps).toHaveLength(10);
    expect(new Set(steps.map(parentOf))).toEqual(new Set([agent]));
    for (const s of checkpoint) {
      expect(s.attributes).toMatchObject({ "db.system.name": "postgresql", "db.system": "postgresql", "db.namespace": "traced", "db.operation.name": s.name.slice("checkpoint.".length) });
      expect(s.attributes["langgraph.thread.id_hash"]).toMatch(/^[0-9a-f]{16}$/);
      expect(s.attributes["langgraph.thread.id"]).toBeUndefined();
    }
    const puts = checkpoint.filter((s) => s.name === "checkpoint.put");
    for (const s of puts) {
      expect(s.attributes["langgraph.bytes_written"]).toBeGreaterThan(0);
      expect(s.attributes["langgraph.checkpoint.ns"]).toBe("");
      expect(s.attributes["langgraph.attempts"]).toBe(1);
    }
    // Each step's writes rode the put that ended it (sync durability: issue 31).
    expect(puts.filter((s) => (s.attributes["langgraph.checkpoint.writes_coalesced"] as number) > 0).length).toBeGreaterThanOrEqual(9);
    for (const s of checkpoint.filter((s) => s.name === "checkpoint.putWrites")) expect(s.attributes["langgraph.checkpoint.writes"]).toBeGreaterThan(0);
  });

  it("metrics: each operation's duration, bytes written, and the pool's connections", async () => {
    const saver = instrument(new PostgresSaver(pool, { schema: "traced" }), { tracerProvider, meterProvider, pool });
    await tenNodes(saver, "m").invoke({ items: [] }, { configurable: { thread_id: marker("t") } });
    const { resourceMetrics } = await reader.collect();
    const metrics = new Map(resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]));
    const duration = metrics.get("db.client.operation.duration")!;
    expect(duration.descriptor.unit).toBe("s");
    const ops = duration.dataPoints.map((p) => p.attributes["db.operation.name"]);
    expect(ops).toEqual(expect.arrayContaining(["put", "putWrites", "getTuple"]));
    const bytes = metrics.get("langgraph.checkpoint.bytes_written")!.dataPoints.reduce((sum, p) => sum + (p.value as number), 0);
    expect(bytes).toBeGreaterThan(0);
    const connections = metrics.get("db.client.connection.count")!.dataPoints.map((p) => p.attributes["db.client.connection.state"]);
    expect(connections.sort()).toEqual(["idle", "used"]);
    expect(metrics.get("db.client.connection.pending_requests")).toBeDefined();
  });

  it("a failure: the span's status is an error, with the error's code and retryable, never its message; a conflict is counted", async () => {
    const saver = instrument(new PostgresSaver(pool, { schema: "traced", lineage: "linear" }), { tracerProvider, meterProvider });
    const threadId = marker("t");
    const first = makeCheckpoint({ a: 1 });
    const config = await saver.put({ configurable: { thread_id: threadId, checkpoint_ns: "" } }, first, meta(-1), first.channel_versions);
    const a = makeCheckpoint({ a: 2 }, { a: 2 });
    const b = makeCheckpoint({ a: 3 }, { a: 3 });
    await saver.put(config, a, meta(0), a.channel_versions);
    const refused = await saver.put(config, b, meta(0), b.channel_versions).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(CheckpointConflictError);
    const failed = named("checkpoint.put").filter((s) => s.status.code === 2);
    expect(failed).toHaveLength(1);
    const span = failed[0]!;
    expect(span.attributes).toMatchObject({ "error.type": "CHECKPOINT_CONFLICT", "langgraph.error.retryable": true, "langgraph.checkpoint.conflict": "head-moved" });
    expect(span.events.map((e) => e.attributes)).toEqual([{ "exception.type": "CheckpointConflictError", "exception.message": "CHECKPOINT_CONFLICT" }]);
    expect(JSON.stringify(span.events) + JSON.stringify(span.status)).not.toContain((refused as Error).message);
  });

  it("list's span lasts while it is read, and counts what it yielded, also when the caller stops early", async () => {
    const saver = instrument(new PostgresSaver(pool, { schema: "traced" }), { tracerProvider, meterProvider });
    const threadId = marker("t");
    await tenNodes(saver, "l").invoke({ items: [] }, { configurable: { thread_id: threadId } });
    spans.reset();
    let read = 0;
    await app.startActiveSpan("reader", async (span) => {
      for await (const _ of saver.list({ configurable: { thread_id: threadId } })) if (++read === 3) break;
      span.end();
    });
    const [list] = named("checkpoint.list");
    expect(list!.attributes["db.response.returned_rows"]).toBe(3);
    expect(parentOf(list!)).toBe(named("reader")[0]!.spanContext().spanId);
  });

  it("setup, deleteThread, copyThread and prune: spans with the migrations applied, the rows deleted or written", async () => {
    await instrument(new PostgresSaver(pool, { schema: "traced_setup" }), { tracerProvider, meterProvider }).setup();
    expect(named("checkpoint.setup")[0]!.attributes).toMatchObject({ "db.namespace": "traced_setup", "langgraph.migrations.from_version": 0 });
    expect(named("checkpoint.setup")[0]!.attributes["langgraph.migrations.applied"]).toBeGreaterThan(0);
    const saver = instrument(new PostgresSaver(pool, { schema: "traced" }), { tracerProvider, meterProvider });
    const threadId = marker("t");
    await tenNodes(saver, "d").invoke({ items: [] }, { configurable: { thread_id: threadId } });
    await saver.copyThread(threadId, `${threadId}-copy`);
    await saver.deleteThread(threadId);
    const tracedPrune = instrument(prune, { tracerProvider, meterProvider });
    await tracedPrune({ pool, schema: "traced", keepLast: 1, grace: 0 });
    expect(named("checkpoint.copyThread")[0]!.attributes["langgraph.rows_written"]).toBeGreaterThan(0);
    expect(named("checkpoint.copyThread")[0]!.attributes).toHaveProperty("langgraph.target_thread.id_hash");
    expect(named("checkpoint.deleteThread")[0]!.attributes["langgraph.rows_deleted"]).toBeGreaterThan(0);
    expect(named("checkpoint.prune")[0]!.attributes["langgraph.rows_deleted"]).toBeGreaterThan(0);
    expect(named("checkpoint.prune")[0]!.attributes["db.namespace"]).toBe("traced");
    // Instrumenting again changes nothing: one span per call still.
    spans.reset();
    instrument(saver, { tracerProvider, meterProvider });
    await saver.getTuple({ configurable: { thread_id: threadId } });
    expect(named("checkpoint.getTuple")).toHaveLength(1);
  });

  it("a retention run is a span of its own, a root: background work is no caller's child", async () => {
    const saver = instrument(new PostgresSaver(pool, { schema: "traced", retention: { every: "200ms", keepLast: 50, start: false } }), { tracerProvider, meterProvider });
    try {
      await app.startActiveSpan("startup", async (span) => {
        await saver.startRetention();
        span.end();
      });
      for (let i = 0; i < 100 && named("checkpoint.retention").length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      await saver.end();
    }
    const [run] = named("checkpoint.retention");
    expect(run!.attributes).toMatchObject({ "db.system.name": "postgresql", "db.namespace": "traced", "db.operation.name": "retention", "langgraph.retention.aborted": false });
    expect(parentOf(run!)).toBeUndefined();
  });

  it("bad options fail at once, naming the option", () => {
    const saver = new PostgresSaver(pool, { schema: "traced" });
    expect(() => instrument(saver, { ids: "foo" as "hash" })).toThrow(InvalidOptionsError);
    expect(() => instrument(saver, { ids: "foo" as "hash" })).toThrow(/option ids/);
    expect(() => instrument(saver, { threadIds: "raw" } as object)).toThrow(/option threadIds: is not an option of instrument\(\)/);
    expect(() => instrument({})).toThrow(/option target/);
    expect(() => instrument(saver, { tracerProvider: {} as never })).toThrow(/option tracerProvider/);
  });
});

describe("the store", () => {
  it("each call a span, a child of the caller's active span; namespaces hashed like thread ids; in a graph, LangGraph's batched calls are the store's batch spans, children of the invoke's span", async () => {
    const store = instrument(new PostgresStore(pool, { schema: "traced" }), { tracerProvider, meterProvider });
    const user = marker("user-bob");
    const value = marker("memory");
    const parent = await app.startActiveSpan("memories", async (span) => {
      await store.put(["users", user], "k", { text: value });
      await store.get(["users", user], "k");
      await store.search(["users", user]);
      await store.listNamespaces({ prefix: ["users"] });
      await store.batch([{ namespace: ["users", user], key: "k" }]);
      span.end();
      return span.spanContext().spanId;
    });
    const own = named("store.");
    expect(own.map((s) => s.name)).toEqual(["store.put", "store.get", "store.search", "store.listNamespaces", "store.batch"]);
    expect(own.map(parentOf)).toEqual(own.map(() => parent));
    expect(own[1]!.attributes).toMatchObject({ "db.system.name": "postgresql", "db.namespace": "traced", "db.operation.name": "get", "db.response.returned_rows": 1 });
    expect(own[0]!.attributes["langgraph.store.namespace_hash"]).toMatch(/^[0-9a-f]{16}$/);
    expect(own[4]!.attributes["langgraph.store.operations"]).toBe(1);

    spans.reset();
    const State = Annotation.Root({ recalled: Annotation<number> });
    const graph = new StateGraph(State)
      .addNode("recall", async (_s, config: LangGraphRunnableConfig) => ({ recalled: (await config.store!.search(["users", user])).length }))
      .addEdge(START, "recall")
      .addEdge("recall", END)
      .compile({ store });
    const agent = await app.startActiveSpan("agent", async (span) => {
      expect((await graph.invoke({ recalled: 0 })).recalled).toBe(1);
      span.end();
      return span.spanContext().spanId;
    });
    const batches = named("store.");
    expect(batches.map((s) => s.name)).toEqual(["store.batch"]);
    expect(parentOf(batches[0]!)).toBe(agent);
  });
});

describe("privacy", () => {
  it("by default nothing exported holds a thread id, a value, a store key's namespace or the password; with ids: \"raw\" the ids are there, the values still not", async () => {
    const run = async (options: object) => {
      spans.reset();
      const saver = instrument(new PostgresSaver(pool, { schema: "traced" }), { tracerProvider, meterProvider, pool, ...options });
      const store = instrument(new PostgresStore(pool, { schema: "traced" }), { tracerProvider, meterProvider, ...options });
      const threadId = marker("user-carol");
      const value = marker("secret-value");
      const user = marker("user-dave");
      await app.startActiveSpan("agent", async (span) => {
        await tenNodes(saver, value).invoke({ items: [] }, { configurable: { thread_id: threadId } });
        await store.put(["users", user], "k", { text: value });
        for await (const _ of saver.list({ configurable: { thread_id: threadId } }, { limit: 2 }));
        span.end();
      });
      // A failure that names the thread id in its message: its span must not.
      await saver.deleteThread("x".repeat(2000)).catch(() => undefined);
      return { text: await exported(), threadId, value, user };
    };
    const hashed = await run({});
    expect(hashed.text).toContain("checkpoint.put");
    expect(hashed.text).toContain('"error.type":"INVALID_INPUT"');
    for (const secret of [hashed.threadId, hashed.value, hashed.user, password, "x".repeat(100)]) expect(hashed.text).not.toContain(secret);
    const raw = await run({ ids: "raw" });
    expect(raw.text).toContain(raw.threadId);
    expect(raw.text).toContain(raw.user);
    for (const secret of [raw.value, password]) expect(raw.text).not.toContain(secret);
    const omitted = await run({ ids: "omit" });
    expect(omitted.text).not.toContain("langgraph.thread.id");
  });
});

describe("loading", () => {
  it("the package's main entry never loads @opentelemetry/api; the otel entry does", async () => {
    const loaded = async (entry: string) => {
      const dir = await mkdtemp(join(tmpdir(), "lgpg-otel-"));
      const log = join(dir, "modules.txt");
      try {
        const hook = new URL("../helpers/module-log.mjs", import.meta.url).href;
        const url = new URL(`../../src/${entry}`, import.meta.url).href;
        await promisify(execFile)(process.execPath, ["--import", "tsx", "--import", hook, "--input-type=module", "-e", `await import(${JSON.stringify(url)})`], {
          cwd: ROOT,
          env: { ...process.env, MODULE_LOG: log },
        });
        return (await readFile(log, "utf8")).split("\n").filter((m) => m.includes("/@opentelemetry/"));
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    };
    expect(await loaded("index.ts")).toEqual([]);
    expect((await loaded("otel/index.ts")).length).toBeGreaterThan(0);
  });
});
