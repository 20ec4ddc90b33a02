/**
 * Diagnostics behind the benchmark numbers (not part of `npm run bench`):
 *
 *   DATABASE_URL=postgres://... node --import tsx bench/profile.ts [--sections=cpu,put,plans,stale,skew,storage]
 *
 * For each Postgres saver and operation it reports, per operation:
 *   - wall time, and the part spent waiting on pg queries (client.query start -> result),
 *     the rest being JS work in the saver (serialization, row decoding, ...);
 *   - CPU time of this node process and of all Postgres server processes (from /proc),
 *     which is what bounds throughput when many invokes run in parallel on 2 cores;
 *   - put: our put vs the statement it sends replayed with raw pg, with/without the WAL flush wait, and
 *     vs this package's JavaScript alone (each statement answered at once) and MemorySaver's put;
 *   - plans: the plans our prepared statements really run (auto_explain on the saver's own
 *     connection, so generic plans show) and how often they are re-planned;
 *   - stale: put / getTuple(latest) on a 10,000-checkpoint thread when statistics were never
 *     refreshed (what a young table looks like to the planner);
 *   - skew: getTuple/put on a 10,000-checkpoint thread among 100,000 short threads, current SQL vs a
 *     LATERAL primary-key blob lookup;
 *   - storage: per-table / per-column bytes of a growing chat thread, ours vs official.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { Session } from "node:inspector/promises";
import pg from "pg";
import { uuid6, type BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { dropAll, startServer } from "./db.js";
import { chatGraph, tenNodeGraph, type Durability } from "./graph.js";
import { createPgSaver, loadOurs, memorySaver, putReplayValues, saverOn, type PgSaverName } from "./savers.js";
import { cloneThread, tablesOf } from "./scale.js";
import { compare, fmtRatio, median, pairedRatio, type ContenderStats, type Ratio } from "./stats.js";
import { saverStatements } from "../src/saver/sql/index.js";
import { ChatThread } from "./workload.js";

// ---- time spent inside pg queries (every Client.query of this process)
let inQuery = 0;
let queries = 0;
const captured: { text: string; values: unknown[] }[] = [];
let capture = false;
/** While set: when each `put` of the saver under study was called, until its statement is sent (see `putWait`). */
let putCalls: number[] | undefined;
/** From a put's call to its statement being sent (ms), one per put. */
const putWait: number[] = [];
/** Per statement text: calls and client-side latency (query start -> result), while `perText` is set. */
let perText: Map<string, { n: number; ms: number }> | undefined;
const proto = pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
const original = proto.query;
proto.query = function (this: unknown, ...a: unknown[]) {
  const q = a[0] as { text?: string; values?: unknown[]; submit?: unknown } | string;
  if (q && typeof q === "object" && typeof q.submit === "function") return original.apply(this, a); // Query objects
  const t = performance.now();
  queries++;
  const text = typeof q === "string" ? q : (q.text ?? "");
  if (capture) captured.push(typeof q === "string" ? { text: q, values: (Array.isArray(a[1]) ? a[1] : []) as unknown[] } : { text: q.text ?? "", values: q.values ?? [] });
  const byText = perText;
  if (putCalls && text.includes("INSERT INTO") && text.includes("checkpoint_heads")) {
    const called = putCalls.shift();
    if (called !== undefined) putWait.push(t - called);
  }
  const done = () => {
    const ms = performance.now() - t;
    inQuery += ms;
    if (byText) {
      const e = byText.get(text) ?? { n: 0, ms: 0 };
      e.n++;
      e.ms += ms;
      byText.set(text, e);
    }
  };
  const cbAt = a.findIndex((x) => typeof x === "function");
  if (cbAt >= 0) {
    // pg-pool's pool.query passes a callback
    const cb = a[cbAt] as (...x: unknown[]) => void;
    a[cbAt] = (...x: unknown[]) => {
      done();
      cb(...x);
    };
    return original.apply(this, a);
  }
  const r = original.apply(this, a) as Promise<unknown>;
  r.then(done, done);
  return r;
};

// ---- CPU of the Postgres server processes (all of them: backends, WAL writer, ...)
const TICK_MS = 10; // USER_HZ = 100 on Linux
function postgresCpuMs(): number {
  let ticks = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      if (!comm.startsWith("postgres")) continue;
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(f[11]) + Number(f[12]); // utime, stime
    } catch {
      // process ended
    }
  }
  return ticks * TICK_MS;
}

/** CPU (ms) of the server processes serving `pids` (this database's backends), from /proc. */
function backendCpuMs(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // another host, or the backend ended
    }
  }
  return ticks * TICK_MS;
}

interface Profile {
  op: string;
  saver: string;
  wallMs: number;
  wallMeanMs: number;
  queryMs: number;
  jsMs: number;
  queries: number;
  nodeCpuMs: number;
  pgCpuMs: number;
}

/** `overlapping`: the op issues queries concurrently (graph, async durability), so "in queries" time is not a wall-time share. */
async function profile(op: string, saver: string, n: number, fn: (i: number) => Promise<unknown>, parallel = 1, overlapping = false): Promise<Profile> {
  for (let i = 0; i < 20; i++) await fn(1_000_000 + i);
  const walls: number[] = [];
  inQuery = 0;
  queries = 0;
  const cpu0 = process.cpuUsage();
  const pg0 = postgresCpuMs();
  const t0 = performance.now();
  for (let i = 0; i < n; i += parallel) {
    const s = performance.now();
    await Promise.all(Array.from({ length: parallel }, (_, k) => fn(i + k)));
    walls.push(performance.now() - s);
  }
  const total = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const pgCpu = postgresCpuMs() - pg0;
  const perOp = (x: number) => x / n;
  return {
    op,
    saver,
    wallMs: median(walls) / parallel,
    wallMeanMs: total / n,
    queryMs: parallel === 1 && !overlapping ? perOp(inQuery) : Number.NaN,
    jsMs: parallel === 1 && !overlapping ? perOp(total - inQuery) : Number.NaN,
    queries: perOp(queries),
    nodeCpuMs: perOp((cpu.user + cpu.system) / 1000),
    pgCpuMs: perOp(pgCpu),
  };
}

const SECTIONS = ["breakdown", "cpu", "put", "plans", "stale", "skew", "storage"] as const;
type Section = (typeof SECTIONS)[number];

async function cpuSection(adminUrl: string, names: PgSaverName[]): Promise<void> {
  const out: Profile[] = [];
  for (const name of names) {
    const h = await createPgSaver(name, adminUrl, `profile_${name}`);
    const read = new ChatThread(h.saver, "read");
    await read.build(100);
    const put = new ChatThread(h.saver, "put", { remember: false });
    const wt = new ChatThread(h.saver, "writes", { remember: false });
    await wt.put(0);
    const cfg = { configurable: { thread_id: "read", checkpoint_ns: "" } };
    out.push(await profile("put", name, 400, (i) => put.put(i)));
    out.push(await profile("putWrites", name, 400, (i) => wt.putWrites(i)));
    out.push(await profile("getTuple latest", name, 400, () => h.saver.getTuple(cfg)));
    out.push(
      await profile("list(10)", name, 200, async () => {
        for await (const _ of h.saver.list(cfg, { limit: 10 })) void _;
      }),
    );
    const g = tenNodeGraph(h.saver);
    out.push(await profile("graph async (per invoke)", name, 60, (i) => g.invoke(`ga-${i}`, "async"), 1, true));
    out.push(await profile("graph async x10 parallel (per invoke)", name, 200, (i) => g.invoke(`gp-${i}`, "async"), 10));
    await h.db.drop();
  }
  const none = tenNodeGraph(undefined);
  out.push(await profile("graph async (per invoke)", "no checkpointer", 60, (i) => none.invoke(`n-${i}`, "async"), 1, true));
  out.push(await profile("graph async x10 parallel (per invoke)", "no checkpointer", 200, (i) => none.invoke(`np-${i}`, "async"), 10));

  console.log("\n## Where the time goes (per operation)\n");
  console.log("Means per operation, except wall p50. in pg queries = client.query start -> result (network + server + commit); JS = wall - in queries (sequential ops only). CPU = whole node process (all threads) and all Postgres processes.\n");
  console.log("| op | saver | wall p50 ms | wall mean ms | in pg queries ms | JS ms | queries | node CPU ms | postgres CPU ms |");
  console.log("|---|---|--:|--:|--:|--:|--:|--:|--:|");
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : "-");
  for (const p of out) console.log(`| ${p.op} | ${p.saver} | ${f(p.wallMs)} | ${f(p.wallMeanMs)} | ${f(p.queryMs)} | ${f(p.jsMs)} | ${p.queries.toFixed(1)} | ${f(p.nodeCpuMs)} | ${f(p.pgCpuMs)} |`);
}

// ---------------------------------------------------------------- breakdown (issue 31)

/** The repository's root as profile URLs spell it (file:///.../). */
const ROOT = new URL("..", import.meta.url).href;

/**
 * Where a CPU profile sample's time goes: the innermost frame with a known home decides (node's own
 * modules and native builtins have none: their time goes to the JS that called them).
 */
function homeOf(url: string, fn: string): string | undefined {
  if (fn === "(garbage collector)") return "GC";
  if (fn === "(idle)") return "idle (profiler)";
  if (fn === "(program)") return "V8 and native code (program)";
  if (!url || url.startsWith("node:")) return undefined;
  if (url.includes("/node_modules/@msgpack/")) return "ours: serialization (msgpack)";
  if (/\/node_modules\/(pg|pg-[a-z-]+|postgres-[a-z-]+|pgpass)\//.test(url)) return "driver (pg: build messages, parse results)";
  if (/\/node_modules\/(@langchain|langsmith)\//.test(url) || url === `${ROOT}bench/graph.ts`) return "graph (LangGraph, LangChain, the nodes; the saver base class)";
  if (!url.startsWith(`${ROOT}src/`)) return url.startsWith(`${ROOT}bench/`) ? undefined : "other JS";
  const file = url.slice(`${ROOT}src/`.length);
  if (file.startsWith("serde/")) return "ours: serialization";
  if (/^saver\/(element-codec|elements|stored)\.ts/.test(file)) return "ours: elements (hashing, refs)";
  if (file === "saver/read.ts") return "ours: rows to tuples (read)";
  // Checking a call and building its statement's values: encode.ts, sql/, and in put.ts and writes.ts the functions
  // that encode (their anonymous callbacks included: most of those files' closures are theirs).
  if (/^saver\/(encode|sql\/.*)\.ts$/.test(file) || (/^saver\/(put|writes)\.ts$/.test(file) && /^(encode|carried|pack|referenced|rowKeys|uniqueElements|$)/.test(fn))) {
    return "ours: put/putWrites parameters";
  }
  return "ours: orchestration (call order, coalescing, pool checkout, errors)";
}
const NODE_INTERNALS = "node internals and native builtins (promises, sockets, timers)";

interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

/** Runs `fn` under V8's sampling profiler (every 250 µs); returns ms per home (see `homeOf`). */
async function profiled(fn: () => Promise<void>): Promise<Map<string, number>> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 250 });
  await session.post("Profiler.start");
  let stopped: { profile: { nodes: CpuProfileNode[]; samples: number[]; timeDeltas: number[] } };
  try {
    await fn();
  } finally {
    stopped = (await session.post("Profiler.stop")) as typeof stopped;
    session.disconnect();
  }
  const { profile } = stopped;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const homes = new Map<number, string>();
  const home = (id: number): string => {
    const known = homes.get(id);
    if (known) return known;
    const n = byId.get(id)!;
    const h = homeOf(n.callFrame.url, n.callFrame.functionName) ?? (parent.has(id) ? home(parent.get(id)!) : NODE_INTERNALS);
    homes.set(id, h);
    return h;
  };
  const ms = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const h = home(id);
    ms.set(h, (ms.get(h) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
  });
  return ms;
}

/**
 * A statement's text with what pg_stat_statements replaces by `$n` (string and number constants)
 * and the parameters themselves as `?`, whitespace collapsed: the same for our text and its entry.
 */
function signature(text: string): string {
  return text
    .replace(/'(?:[^']|'')*'/g, "?")
    .replace(/\$\d+|\b\d+(?:\.\d+)?\b/g, "?")
    .replace(/\s+/g, " ")
    .trim();
}

/** A statement's label: its name in src/saver/sql/ (`names`: by signature), else its first words. */
function statementLabel(text: string, names: Map<string, string>): string {
  const t = text.trim();
  return names.get(signature(t)) ?? (t.startsWith("WITH page") ? "listPage" : t.replace(/\s+/g, " ").slice(0, 48));
}

interface ServerStat {
  calls: number;
  execMs: number;
  planMs: number;
  plans: number;
  rows: number;
  walBytes: number;
}

/** pg_stat_statements of the current database, top-level statements, by label; undefined when the server has not loaded it. */
async function serverStats(pool: pg.Pool, names: Map<string, string>): Promise<Map<string, ServerStat> | undefined> {
  try {
    const { rows } = await pool.query<{ query: string; calls: string; exec: number; plan: number; plans: string; rows: string; wal: string }>(
      `SELECT query, calls, total_exec_time AS exec, total_plan_time AS plan, plans, rows, wal_bytes AS wal FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND toplevel`,
    );
    const out = new Map<string, ServerStat>();
    for (const r of rows) {
      const label = statementLabel(r.query, names);
      const e = out.get(label) ?? { calls: 0, execMs: 0, planMs: 0, plans: 0, rows: 0, walBytes: 0 };
      e.calls += Number(r.calls);
      e.execMs += r.exec;
      e.planMs += r.plan;
      e.plans += Number(r.plans);
      e.rows += Number(r.rows);
      e.walBytes += Number(r.wal);
      out.set(label, e);
    }
    return out;
  } catch {
    return undefined;
  }
}

/**
 * One 10-node invoke (bench/graph.ts), async and sync durability, on loopback, taken apart:
 * - wall time, paired and interleaved (stats.ts) with the same graph on MemorySaver (the limit),
 *   with no checkpointer, and with our saver on connections that do not wait for the WAL flush
 *   (synchronous_commit=off: what the flush costs on the critical path);
 * - node's CPU by home (V8's sampling profiler): the graph, our JS by part, the driver, GC;
 *   event-loop idle (performance.eventLoopUtilization): waiting for Postgres;
 * - per statement: calls, client latency (query start -> result), and the server's planning and
 *   execution time and WAL bytes (pg_stat_statements, when the server loaded it: see bench/README.md).
 */
async function breakdownSection(adminUrl: string, invokes: number): Promise<void> {
  const names = new Map<string, string>();
  for (const [name, text] of Object.entries(saverStatements("public"))) if (typeof text === "string") names.set(signature(text), name);
  const h = await createPgSaver("ours", adminUrl, "breakdown");
  let stats: pg.Pool | undefined = h.db.pool({ max: 1 });
  try {
    await stats.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    await stats.query("SELECT pg_stat_statements_reset()");
  } catch {
    stats = undefined;
  }
  // Planning time is tracked only when asked for (a superuser setting): on the saver's own connections.
  // Idle connections are kept (no idle timeout), so the backends whose CPU is counted stay the same.
  const tracked = saverOn("ours", h.db.pool({ max: 10, idleTimeoutMillis: 0, options: "-c pg_stat_statements.track_planning=on" }));
  const put = tracked.put.bind(tracked);
  tracked.put = (...a) => {
    putCalls?.push(performance.now());
    return put(...a);
  };
  const noFlush = saverOn("ours", h.db.pool({ max: 10, idleTimeoutMillis: 0, options: "-c synchronous_commit=off" }));
  const graphs = {
    memory: tenNodeGraph(memorySaver()),
    none: tenNodeGraph(undefined),
    ours: tenNodeGraph(tracked),
    noFlush: tenNodeGraph(noFlush),
  };
  let thread = 0;
  const invoke = (g: keyof typeof graphs, d: Durability) => async () => {
    const out = await graphs[g].invoke(`bd-${g}-${d}-${thread++}`, d);
    if (out.items.length !== 10) throw new Error(`${g} ${d}: ${out.items.length} items`);
  };
  type Column = { label: string; wall: number; ratio?: Ratio; noFlush: number; none: number; memory: number; cpu: Map<string, number>; nodeCpu: number; backendCpu: number; idle: number; putWaited: number; profiledWall: number; statements?: Map<string, { n: number; ms: number }>; server?: Map<string, ServerStat> };
  const columns: Column[] = [];
  for (const d of ["async", "sync"] as const) {
    const paired = await compare(
      [
        { name: "memory", op: invoke("memory", d) },
        { name: "ours", op: invoke("ours", d) },
        { name: "noFlush", op: invoke("noFlush", d) },
        { name: "none", op: invoke("none", d) },
      ],
      { rounds: 5, batches: 4, batchSize: 3, warmup: 5 },
    );
    for (const who of ["memory", "ours"] as const) {
      const run = invoke(who, d);
      for (let i = 0; i < 5; i++) await run();
      if (who === "ours" && stats) await stats.query("SELECT pg_stat_statements_reset()");
      const backends = (await h.pool.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")).rows.map((r) => r.pid);
      const byText = new Map<string, { n: number; ms: number }>();
      if (who === "ours") {
        perText = byText;
        putCalls = [];
        putWait.length = 0;
      }
      const pg0 = backendCpuMs(backends);
      const elu0 = performance.eventLoopUtilization();
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const sampled = await profiled(async () => {
        for (let i = 0; i < invokes; i++) await run();
      });
      const wall = performance.now() - t0;
      const used = process.cpuUsage(cpu0);
      const elu = performance.eventLoopUtilization(elu0);
      const backendCpu = (backendCpuMs(backends) - pg0) / invokes;
      perText = undefined;
      putCalls = undefined;
      const waited = putWait.reduce((t, x) => t + x, 0) / invokes;
      const server = who === "ours" && stats ? await serverStats(stats, names) : undefined;
      // On a busy machine a sample also counts time the thread waited for a core: each home's share
      // of the samples is applied to the CPU time the process really used.
      const busy = [...sampled].filter(([k]) => k !== "idle (profiler)").reduce((t, [, v]) => t + v, 0);
      const nodeCpu = (used.user + used.system) / 1000 / invokes;
      const cpu = new Map([...sampled].filter(([k]) => k !== "idle (profiler)").map(([k, v]) => [k, (v / busy) * nodeCpu]));
      columns.push({
        label: `${who === "memory" ? "MemorySaver" : "ours"}, ${d}`,
        wall: paired.get(who)!.p50,
        ratio: who === "ours" ? pairedRatio(paired.get("memory")!, paired.get("ours")!) : undefined,
        noFlush: paired.get("noFlush")!.p50,
        none: paired.get("none")!.p50,
        memory: paired.get("memory")!.p50,
        cpu,
        nodeCpu,
        backendCpu,
        putWaited: waited,
        idle: elu.idle / invokes,
        profiledWall: wall / invokes,
        statements: who === "ours" ? byText : undefined,
        server,
      });
    }
  }
  const f = (x: number | undefined, digits = 2) => (x === undefined || !Number.isFinite(x) ? "-" : x.toFixed(digits));
  // A server on this host: its backends' CPU is in /proc.
  const backendsSeen = existsSync("/proc/self/stat") && ["localhost", "127.0.0.1", "::1", "[::1]"].includes(new URL(adminUrl).hostname);
  console.log(`\n## Breakdown of one 10-node invoke (loopback; ms per invoke)\n`);
  console.log(
    "Wall: p50, interleaved with MemorySaver, no checkpointer and ours without the WAL flush wait (5 rounds x 4 batches x 3). " +
      `CPU: node's (process.cpuUsage) over ${invokes} invokes after those, under V8's sampling profiler (which slows node down: its wall is shown), shared out by the profile, each sample given to the innermost frame with a known home; ` +
      "idle: event loop idle (waiting for Postgres or timers).\n",
  );
  const head = `| | ${columns.map((c) => c.label).join(" | ")} |`;
  console.log(head);
  console.log(`|---|${columns.map(() => "--:").join("|")}|`);
  const row = (label: string, pick: (c: Column) => string) => console.log(`| ${label} | ${columns.map(pick).join(" | ")} |`);
  row("wall, p50 (paired)", (c) => f(c.wall));
  row("ours ÷ MemorySaver, time per invoke [95% CI]", (c) => (c.ratio ? fmtRatio(c.ratio) : ""));
  row("no checkpointer, p50 (the graph alone)", (c) => f(c.none));
  row("ours with synchronous_commit=off, p50", (c) => (c.label.startsWith("ours") ? f(c.noFlush) : ""));
  row("the WAL flush on the critical path (ours - ours without it)", (c) => (c.label.startsWith("ours") ? f(c.wall - c.noFlush) : ""));
  row("wall while profiled", (c) => f(c.profiledWall));
  row("puts: from put() called to its statement sent, all of them (profiled)", (c) => (c.label.startsWith("ours") ? f(c.putWaited) : ""));
  row("node CPU (profiled; process.cpuUsage)", (c) => f(c.nodeCpu));
  const homes = [...new Set(columns.flatMap((c) => [...c.cpu.keys()]))].sort();
  for (const k of homes) row(`· ${k}`, (c) => f(c.cpu.get(k)));
  row("event loop idle (profiled)", (c) => f(c.idle));
  row("server CPU of this database's backends (profiled; /proc)", (c) => (c.label.startsWith("ours") && backendsSeen ? f(c.backendCpu) : ""));
  for (const c of columns) {
    if (!c.statements) continue;
    console.log(`\n### Statements of one invoke, ${c.label}\n`);
    if (!c.server) console.log("(server columns: pg_stat_statements is not loaded on this server; bench/README.md says how to start one that has it)\n");
    console.log("| statement | calls per invoke | client latency, mean ms | server planning, mean ms | server execution, mean ms | rows per call | WAL bytes per call |\n|---|--:|--:|--:|--:|--:|--:|");
    const byLabel = new Map<string, { n: number; ms: number }>();
    for (const [text, e] of c.statements) {
      const label = statementLabel(text, names);
      const b = byLabel.get(label) ?? { n: 0, ms: 0 };
      b.n += e.n;
      b.ms += e.ms;
      byLabel.set(label, b);
    }
    let plan = 0;
    let exec = 0;
    for (const [label, e] of byLabel) {
      const s = c.server?.get(label);
      if (s) {
        plan += s.planMs / invokes;
        exec += s.execMs / invokes;
      }
      console.log(
        `| ${label} | ${f(e.n / invokes, 1)} | ${f(e.ms / e.n, 3)} | ${s ? f(s.planMs / Math.max(1, s.calls), 3) : "-"} | ${s ? f(s.execMs / Math.max(1, s.calls), 3) : "-"} | ${s ? f(s.rows / Math.max(1, s.calls), 1) : "-"} | ${s ? f(s.walBytes / Math.max(1, s.calls), 0) : "-"} |`,
      );
    }
    if (c.server) console.log(`\nServer time per invoke: planning ${f(plan)} ms, execution ${f(exec)} ms (the commit's WAL flush is in neither: see synchronous_commit=off above).`);
  }
  await h.db.drop();
}

/**
 * Where our put's time goes, interleaved: the saver's put; the very statement it sends, replayed
 * with raw pg (fresh id and versions each time); the same replay with synchronous_commit=off
 * (no wait for the WAL flush); and the single-row INSERT floor with and without the flush.
 */
async function putSection(adminUrl: string): Promise<void> {
  const h = await createPgSaver("ours", adminUrl, "put_breakdown");
  const noFlush = h.db.pool({ max: 1, options: "-c synchronous_commit=off" });
  const flush = h.db.pool({ max: 1 });
  await h.pool.query("CREATE TABLE floor_insert (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, k text NOT NULL, v bytea)");
  const thread = new ChatThread(h.saver, "put", { remember: false });
  await thread.put(0);
  captured.length = 0;
  capture = true;
  await thread.put(1);
  capture = false;
  const q = captured.find((c) => c.text.includes("INSERT INTO") && c.text.includes("checkpoint_blobs"))!;
  const replay = (pool: pg.Pool, tag: string) => {
    const next = putReplayValues(q.values, tag);
    return () => pool.query({ name: `replay_put`, text: q.text, values: next() });
  };
  const payload = Buffer.alloc(200, 7);
  const insert = (pool: pg.Pool) => (i: number) => pool.query({ name: "floor", text: "INSERT INTO floor_insert (k, v) VALUES ($1, $2)", values: [`r${i}`, payload] });
  // This package's JavaScript alone: a saver whose statements are answered at once, as the database would answer a
  // put whose parent is the head (no driver, no I/O); beside it MemorySaver's put of the same checkpoints.
  const alone = saverOn("ours", h.db.pool({ max: 1 })) as unknown as { ctx: { db: { run: (text: string, values: unknown[]) => Promise<unknown> } } };
  const aloneThread = new ChatThread(alone as unknown as BaseCheckpointSaver, "put-alone", { remember: false });
  await aloneThread.put(0);
  alone.ctx.db.run = async (_text, values) => ({ rows: [{ refused: null, head_id: values[3], ok: true, fast: true, moved: 1, inserted: 1, blobs: 2 }] });
  const memoryThread = new ChatThread(memorySaver(), "put-memory", { remember: false });
  const stats = await compare(
    [
      { name: "saver.put (ours)", op: (i) => thread.put(i + 2) },
      { name: "saver.put (ours), each statement answered at once: this package's JavaScript alone", op: (i) => aloneThread.put(i + 1) },
      { name: "MemorySaver's put of the same checkpoints", op: (i) => memoryThread.put(i) },
      { name: "its statement, raw pg", op: replay(flush, "a") },
      { name: "its statement, raw pg, synchronous_commit=off", op: replay(noFlush, "b") },
      { name: "single-row INSERT", op: insert(flush) },
      { name: "single-row INSERT, synchronous_commit=off", op: insert(noFlush) },
    ],
    { rounds: 5, batches: 8, batchSize: 25, warmup: 30 },
  );
  console.log("\n## put breakdown (interleaved, p50 of 5 rounds)\n\n| what | p50 ms | p99 ms |\n|---|--:|--:|");
  for (const st of stats.values()) console.log(`| ${st.name} | ${st.p50.toFixed(3)} | ${st.p99.toFixed(3)} |`);
  await h.db.drop();
}

/** The plans our prepared statements really run (auto_explain on the saver's own connection). */
async function plansSection(adminUrl: string): Promise<void> {
  const h = await createPgSaver("ours", adminUrl, "plans");
  const pool = h.db.pool({ max: 1 });
  const s = saverOn("ours", pool);
  const read = new ChatThread(s, "read");
  await read.build(100);
  const put = new ChatThread(s, "put", { remember: false });
  const cfg = { configurable: { thread_id: "read", checkpoint_ns: "" } };
  const byId = { configurable: { ...cfg.configurable, checkpoint_id: read.written[5]!.id } };
  const list = async () => {
    for await (const _ of s.list(cfg, { limit: 10 })) void _;
  };
  for (let i = 0; i < 10; i++) {
    await put.put(i);
    await put.putWrites(i);
    await s.getTuple(cfg);
    await s.getTuple(byId);
    await list();
  }
  const { rows } = await pool.query("SELECT name, generic_plans, custom_plans FROM pg_prepared_statements ORDER BY name");
  console.log("\n## Plan cache of our prepared statements (after 10 calls each, fresh tables)\n");
  console.log("| statement | generic plans | custom plans (re-planned each call) |\n|---|--:|--:|");
  for (const r of rows as { name: string; generic_plans: string; custom_plans: string }[]) console.log(`| ${r.name} | ${r.generic_plans} | ${r.custom_plans} |`);
  const c = await pool.connect();
  const notes: string[] = [];
  c.on("notice", (n: { message?: string }) => notes.push(n.message ?? ""));
  await c.query("LOAD 'auto_explain'");
  await c.query("SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_wal = on; SET client_min_messages = log");
  c.release();
  for (const [label, fn] of [
    ["put", () => put.put(100)],
    ["getTuple latest", () => s.getTuple(cfg)],
    ["getTuple by id", () => s.getTuple(byId)],
    ["putWrites", () => put.putWrites(100)],
    ["list(10)", list],
  ] as const) {
    notes.length = 0;
    await fn();
    const lines = notes.join("\n").split("\n");
    const first = lines.findIndex((l) => /\(cost=/.test(l));
    console.log(`\n### ${label}\n\n\`\`\`\n${lines.slice(Math.max(0, first)).join("\n")}\n\`\`\``);
  }
  await h.db.drop();
}

/** getTuple/put on a 10,000-checkpoint thread when the planner statistics were never refreshed. */
async function staleSection(adminUrl: string): Promise<void> {
  const h = await createPgSaver("ours", adminUrl, "stale");
  for (const t of ["checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_heads"]) await h.pool.query(`ALTER TABLE ${t} SET (autovacuum_enabled = off)`);
  const loader = saverOn("ours", h.db.pool({ max: 10, options: "-c synchronous_commit=off" }));
  const base = new ChatThread(loader, "base");
  await base.build(100);
  const long = new ChatThread(loader, "long", { remember: false });
  console.log("\n## Stale statistics (autovacuum off, never ANALYZEd): put cost as one thread grows\n");
  console.log("| thread length | put ms (mean of the last 2,000, synchronous_commit=off) |\n|--:|--:|");
  let t = performance.now();
  for (let i = 0; i < 10_000; i++) {
    await long.put(i);
    if (i % 2000 === 1999) {
      console.log(`| ${i + 1} | ${((performance.now() - t) / 2000).toFixed(3)} |`);
      t = performance.now();
    }
  }
  const measure = async (label: string) => {
    const st = await compare(
      [
        { name: "100", op: () => h.saver.getTuple({ configurable: { thread_id: "base", checkpoint_ns: "" } }) },
        { name: "10k", op: () => h.saver.getTuple({ configurable: { thread_id: "long", checkpoint_ns: "" } }) },
      ],
      { rounds: 3, batches: 6, batchSize: 20, warmup: 10 },
    );
    const [a, b] = [...st.values()] as [ContenderStats, ContenderStats];
    console.log(`| ${label} | ${a.p50.toFixed(3)} | ${b.p50.toFixed(3)} | ${(b.p50 / a.p50).toFixed(1)}x |`);
  };
  console.log("\n| statistics | getTuple(latest) p50 ms, 100-cp thread | 10,000-cp thread | ratio |\n|---|--:|--:|--:|");
  await measure("never analyzed");
  await h.pool.query("ANALYZE");
  await measure("after ANALYZE");
  await h.db.drop();
}

/**
 * Skewed thread lengths: one 10,000-checkpoint thread among 100,000 short ones (ANALYZEd).
 * Statistics now say "about 2 rows per thread", and the generic plans our prepared statements
 * use are built for that. Compares our getTuple(latest) statement with the same statement whose
 * blob join is a LATERAL primary-key lookup per channel (OFFSET 0 keeps it a parameterized
 * nested loop whatever the statistics), both under plan_cache_mode=force_generic_plan.
 */
async function skewSection(adminUrl: string): Promise<void> {
  const h = await createPgSaver("ours", adminUrl, "skew");
  const loader = saverOn("ours", h.db.pool({ max: 10, options: "-c synchronous_commit=off" }));
  const base = new ChatThread(loader, "base");
  await base.build(100);
  const long = new ChatThread(loader, "long", { remember: false });
  for (let i = 0; i < 10_000; i++) {
    await long.put(i);
    if (i === 500) await h.pool.query("ANALYZE");
  }
  const tmpl = new ChatThread(loader, "tmpl", { messageCount: (i) => 2 + 2 * i });
  await tmpl.build(2);
  await cloneThread(h.pool, "tmpl", 100_000, "tmpl-");
  const generic = h.db.pool({ max: 1, options: "-c plan_cache_mode=force_generic_plan" });
  const s = saverOn("ours", generic);
  const grab = async (fn: () => Promise<unknown>) => {
    captured.length = 0;
    capture = true;
    await fn();
    capture = false;
    return captured.find((c) => c.text.includes("jsonb_each_text") && !c.text.includes("INSERT INTO"))!;
  };
  const orig = await grab(() => s.getTuple({ configurable: { thread_id: "long", checkpoint_ns: "" } }));
  const origList = await grab(async () => {
    for await (const _ of s.list({ configurable: { thread_id: "long", checkpoint_ns: "" } }, { limit: 100 })) void _;
  });
  const re = /JOIN (\S+) b ON b\.thread_id = p\.thread_id AND b\.checkpoint_ns = p\.checkpoint_ns\s+AND b\.channel = cv\.channel AND b\.version = cv\.version/;
  console.log("\n## Skew: a 10,000-checkpoint thread among 100,000 short threads (generic plans)\n");
  if (!re.test(orig.text) || !re.test(origList.text)) {
    console.log("(skipped: the read statements no longer have the expected blob join)");
    await h.db.drop();
    return;
  }
  const lateral = (text: string) =>
    text.replace(
      re,
      (_m, table: string) =>
        `CROSS JOIN LATERAL (SELECT bb.channel, bb.type, bb.value FROM ${table} bb WHERE bb.thread_id = p.thread_id AND bb.checkpoint_ns = p.checkpoint_ns AND bb.channel = cv.channel AND bb.version = cv.version OFFSET 0) b`,
    );
  const alt = lateral(orig.text);
  const altList = lateral(origList.text);
  base.saver = s;
  long.saver = s;
  const run = (name: string, text: string, thread: string) => () => generic.query({ name, text, values: [thread, ""] });
  const runList = (name: string, text: string) => () => generic.query({ name, text, values: origList.values });
  const stats = await compare(
    [
      { name: "current getTuple(latest), 100-cp thread", op: run("orig", orig.text, "base") },
      { name: "current getTuple(latest), 10,000-cp thread", op: run("orig", orig.text, "long") },
      { name: "LATERAL blob lookup, 100-cp thread", op: run("alt", alt, "base") },
      { name: "LATERAL blob lookup, 10,000-cp thread", op: run("alt", alt, "long") },
      { name: "saver.put, 100-cp thread", op: (i) => base.put(100 + i) },
      { name: "saver.put, 10,000-cp thread", op: (i) => long.put(10_000 + i) },
    ],
    { rounds: 3, batches: 4, batchSize: 10, warmup: 5 },
  );
  // A current list page costs about a second here: few samples.
  const listStats = await compare(
    [
      { name: "current list page (limit 100, newest), 10,000-cp thread", op: runList("origList", origList.text) },
      { name: "LATERAL blob lookup, list page (limit 100), 10,000-cp thread", op: runList("altList", altList) },
    ],
    { rounds: 3, batches: 2, batchSize: 2, warmup: 1 },
  );
  for (const [k, v] of listStats) stats.set(k, v);
  const rowsOf = async (name: string, text: string) =>
    (await generic.query({ name, text, values: ["long", ""] })).rows.map((r: unknown) => JSON.stringify(r)).sort();
  const same = JSON.stringify(await rowsOf("orig", orig.text)) === JSON.stringify(await rowsOf("alt", alt));
  const listRows = async (name: string, text: string) =>
    (await generic.query({ name, text, values: origList.values })).rows.map((r: unknown) => JSON.stringify(r)).sort();
  const sameList = JSON.stringify(await listRows("origList", origList.text)) === JSON.stringify(await listRows("altList", altList));
  console.log("| statement | p50 ms |\n|---|--:|");
  for (const st of stats.values()) console.log(`| ${st.name} | ${st.p50.toFixed(3)} |`);
  console.log(`\nThe LATERAL variants return the same set of rows: getTuple ${same}, list page ${sameList}`);
  await h.db.drop();
}

/** Where the bytes of a growing chat thread go, per table and per column. */
async function storageSection(adminUrl: string, names: PgSaverName[]): Promise<void> {
  console.log("\n## Storage breakdown (60-turn chat thread)\n");
  for (const name of names) {
    const h = await createPgSaver(name, adminUrl, `st_${name}`);
    const g = chatGraph(h.saver);
    for (let i = 0; i < 60; i++) await g.turn("chat", i);
    // Backends flush their dead-row counts when they exit: end the saver's pool, query from a new one.
    await h.pool.end();
    await new Promise((r) => setTimeout(r, 500));
    const statsPool = h.db.pool({ max: 1 });
    const q = async (sql: string) => (await statsPool.query(sql)).rows as Record<string, unknown>[];
    console.log(`### ${name}\n\n| table | rows | dead rows | heap | indexes | TOAST |\n|---|--:|--:|--:|--:|--:|`);
    for (const t of await tablesOf(statsPool)) {
      const [r] = await q(`SELECT pg_relation_size('${t}') heap, pg_indexes_size('${t}') idx,
        pg_total_relation_size('${t}') - pg_relation_size('${t}') - pg_indexes_size('${t}') toast,
        (SELECT count(*) FROM ${t}) n, (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = '${t}') dead`);
      console.log(`| ${t} | ${r!.n} | ${r!.dead} | ${r!.heap} | ${r!.idx} | ${r!.toast} |`);
    }
    const v = name === "ours" ? "value" : "blob";
    const [cp] = await q(`SELECT avg(pg_column_size(checkpoint))::int cp, avg(pg_column_size(t.*))::int row_bytes FROM checkpoints t`);
    const [bl] = await q(`SELECT avg(pg_column_size(${v}))::int stored, avg(octet_length(${v}))::int raw, avg(octet_length(version))::int version_len FROM checkpoint_blobs WHERE channel = 'messages'`);
    console.log(`\ncheckpoint jsonb ${cp!.cp} B/row (row ${cp!.row_bytes} B); messages blob ${bl!.raw} B raw -> ${bl!.stored} B stored; version key ${bl!.version_len} chars\n`);
    await h.db.drop();
  }
}

async function main() {
  const wanted = new Set<Section>(
    (process.argv.slice(2).find((a) => a.startsWith("--sections="))?.split("=")[1]?.split(",") as Section[] | undefined) ?? [...SECTIONS],
  );
  const server = await startServer();
  const ours = await loadOurs();
  const names: PgSaverName[] = ours ? ["ours", "official"] : ["official"];
  try {
    const sections: [Section, boolean, () => Promise<void>][] = [
      ["breakdown", !!ours, () => breakdownSection(server.adminUrl, 40)],
      ["cpu", true, () => cpuSection(server.adminUrl, names)],
      ["put", !!ours, () => putSection(server.adminUrl)],
      ["plans", !!ours, () => plansSection(server.adminUrl)],
      ["stale", !!ours, () => staleSection(server.adminUrl)],
      ["skew", !!ours, () => skewSection(server.adminUrl)],
      ["storage", true, () => storageSection(server.adminUrl, names)],
    ];
    for (const [name, available, run] of sections) {
      if (!wanted.has(name) || !available) continue;
      // One section failing (e.g. the saver's SQL changed shape) must not hide the others.
      await run().catch((err: unknown) => console.log(`\n(section ${name} failed: ${err instanceof Error ? err.message : String(err)})`));
    }
  } finally {
    await dropAll();
    await server.stop();
  }
}

main().then(
  () => process.exit(0),
  async (err: unknown) => {
    console.error(err);
    await dropAll().catch(() => {});
    process.exit(1);
  },
);
