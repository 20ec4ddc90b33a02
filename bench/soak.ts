/**
 * `npm run soak`: a bounded soak run (about two minutes) with a Postgres crash
 * in the middle, then an audit that nothing was lost or corrupted.
 *
 *   npm run soak                                   8 workers, 50 threads, 120 s, crash at 60 s
 *   npm run soak -- --seconds 30 --restart-at 15   shorter
 *   npm run soak -- --restart-mode fast            a clean restart instead of a crash
 *   npm run soak -- --json                         the report as JSON on stdout
 *
 * Setup: a private Postgres (test/helpers/server.ts: initdb + pg_ctl on a free
 * loopback port, so it can be crashed), migrated; 8 workers, each with its own
 * `PostgresSaver.fromConnString` (linear lineage mode, BOUNDED_POOL defaults,
 * 2 connections), run a two-node graph on threads picked at random among 50,
 * so workers collide on threads all the time. A word per invocation: `record`
 * appends it to `log` and bumps `turn`; `check` verifies turn == log length.
 *
 * On a failure a worker counts it by type and then finishes the thread's
 * interrupted run (`invoke(null)`), backing off while the database is down.
 *
 * The audit, per thread: one head, one parent chain holding every row (no
 * fork, no orphan), steps contiguous from -1 to the head, every channel
 * version named by a checkpoint present in the blobs, every checkpoint and
 * pending write decodable; in the final state `turn` equals the log length,
 * every acknowledged word is present exactly once, after every word whose
 * invocation was acknowledged before its own started; no word appears twice,
 * and no word appears that was never sent.
 * Then no client leaked: each pool idle, and the server sees exactly the
 * pools' connections. Exit code 1 when any check fails.
 */
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import pg from "pg";
import { BOUNDED_POOL, CheckpointConflictError, CheckpointerError, migrate, PostgresSaver, type SaverEvent } from "../src/index.js";
import { chainAudit } from "../test/helpers/audit.js";
import { PgServer, type StopMode } from "../test/helpers/server.js";

const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: "120" },
    workers: { type: "string", default: "8" },
    threads: { type: "string", default: "50" },
    "restart-at": { type: "string" },
    "restart-mode": { type: "string", default: "immediate" },
    "down-ms": { type: "string", default: "2000" },
    json: { type: "boolean", default: false },
  },
});
const SECONDS = Number(args.seconds);
const WORKERS = Number(args.workers);
const THREADS = Number(args.threads);
const RESTART_AT = Number(args["restart-at"] ?? SECONDS / 2);
const RESTART_MODE = args["restart-mode"] as StopMode;
const DOWN_MS = Number(args["down-ms"]);
const log = (s: string) => (args.json ? process.stderr : process.stdout).write(`${s}\n`);

// ---------------------------------------------------------------- the graph

const State = Annotation.Root({
  word: Annotation<string>(),
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  turn: Annotation<number>(),
  checked: Annotation<number>(),
});

function soakGraph(checkpointer: PostgresSaver) {
  return new StateGraph(State)
    .addNode("record", (s) => ({ log: [s.word], turn: (s.turn ?? 0) + 1 }))
    .addNode("check", (s) => {
      // A lost or replayed step would show here as turn != log length.
      if (s.turn !== s.log.length) throw new Error(`turn ${s.turn} != log length ${s.log.length}`);
      return { checked: s.turn };
    })
    .addEdge(START, "record")
    .addEdge("record", "check")
    .addEdge("check", END)
    .compile({ checkpointer });
}

// ---------------------------------------------------------------- bookkeeping

interface Ack {
  word: string;
  /** When the invocation started and when it was acknowledged (performance.now()). */
  start: number;
  end: number;
}
const acked = new Map<string, Ack[]>(); // thread -> words acknowledged, in order
const uncertain = new Map<string, Set<string>>(); // thread -> words whose invocation failed
const sent = new Set<string>();
const errors = new Map<string, number>();
const events = { put: 0, putWrites: 0, conflict: 0, fork: 0, connectionError: 0 };
let invocations = 0;
let resumes = 0;
let unexpected = 0;
const latencies: number[] = [];
const phase = { restartStartedAt: 0, restartDoneAt: 0, firstSuccessAfterRestart: 0 };

function errorKey(err: unknown): string {
  if (err instanceof CheckpointConflictError) return `${err.name}:${err.reason}`;
  if (err instanceof CheckpointerError) {
    const state = (err as { sqlState?: string }).sqlState;
    return `${err.name}:${state ?? (err.retryable ? "connection" : "other")}`;
  }
  unexpected++;
  return `UNTYPED ${(err as Error)?.constructor?.name ?? typeof err}: ${String((err as Error)?.message ?? err).slice(0, 80)}`;
}
const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
const threadId = (i: number) => `soak-${String(i).padStart(2, "0")}`;

// ---------------------------------------------------------------- run

async function main(): Promise<number> {
  log(`[soak] ${WORKERS} workers, ${THREADS} threads, ${SECONDS}s, Postgres ${RESTART_MODE} restart at ${RESTART_AT}s (down ${DOWN_MS} ms)`);
  const server = await PgServer.start({ label: "soak", settings: { max_connections: 100 } });
  log(`[soak] private Postgres on port ${server.port} (${server.binaries.source})`);
  const admin = new pg.Pool({ connectionString: server.url, max: 2, application_name: "soak-admin" });
  admin.on("error", () => {});
  let exitCode = 1;
  try {
    await migrate({ pool: admin });
    // Exactly the pool `PostgresSaver.fromConnString` makes (BOUNDED_POOL + overrides), kept here to count its clients.
    const pools = Array.from({ length: WORKERS }, (_, w) => new pg.Pool({ ...BOUNDED_POOL, max: 2, application_name: `soak-w${w}`, connectionString: server.url }));
    const savers = pools.map(
      (pool) =>
        new PostgresSaver(pool, {
          lineage: "linear",
          runLeaseMs: 5_000,
          onEvent: (e: SaverEvent) => {
            if (e.type in events) events[e.type as keyof typeof events]++;
          },
        }),
    );
    const started = performance.now();
    const deadline = started + SECONDS * 1000;
    const progress = setInterval(() => {
      const s = ((performance.now() - started) / 1000).toFixed(0);
      log(`[soak] t=${s}s invocations=${invocations} puts=${events.put} errors=${[...errors.values()].reduce((a, b) => a + b, 0)}`);
    }, 10_000);
    const crash = (async () => {
      await sleep(RESTART_AT * 1000);
      phase.restartStartedAt = performance.now() - started;
      log(`[soak] ${RESTART_MODE} restart of Postgres now`);
      await server.restart(RESTART_MODE, DOWN_MS);
      phase.restartDoneAt = performance.now() - started;
      log(`[soak] Postgres back after ${((phase.restartDoneAt - phase.restartStartedAt) / 1000).toFixed(1)}s`);
    })();
    await Promise.all(savers.map((saver, w) => worker(w, saver, () => performance.now() < deadline, started)));
    clearInterval(progress);
    await crash;
    const elapsed = (performance.now() - started) / 1000;

    const leak = await leakCheck(pools, admin);
    const auditStarted = performance.now();
    const audit = { ...(await auditAll(savers[0]!, admin)), seconds: Number(((performance.now() - auditStarted) / 1000).toFixed(1)) };
    for (const p of pools) await p.end();

    const report = {
      config: { workers: WORKERS, threads: THREADS, seconds: SECONDS, restart: `${RESTART_MODE} at ${RESTART_AT}s, down ${DOWN_MS} ms`, postgres: server.binaries.source },
      elapsedSeconds: Number(elapsed.toFixed(1)),
      invocationsAcknowledged: invocations,
      resumesAfterFailure: resumes,
      invocationsPerSecond: Number((invocations / elapsed).toFixed(1)),
      puts: events.put,
      putWrites: events.putWrites,
      opsPerSecond: Number(((events.put + events.putWrites) / elapsed).toFixed(1)),
      latencyMs: percentiles(latencies),
      conflictsRejected: events.conflict,
      idleConnectionErrorsHandled: events.connectionError,
      errorsByType: Object.fromEntries([...errors.entries()].sort()),
      untypedErrors: unexpected,
      restart: {
        startedAtSeconds: Number((phase.restartStartedAt / 1000).toFixed(1)),
        outageSeconds: Number(((phase.restartDoneAt - phase.restartStartedAt) / 1000).toFixed(1)),
        firstSuccessAfterRestartMs: phase.firstSuccessAfterRestart ? Math.round(phase.firstSuccessAfterRestart - phase.restartDoneAt) : null,
      },
      leaks: leak,
      audit,
    };
    const ok = audit.failures.length === 0 && leak.ok && unexpected === 0 && invocations > 0;
    printReport(report, ok);
    exitCode = ok ? 0 : 1;
  } finally {
    await admin.end().catch(() => {});
    await server.destroy();
  }
  return exitCode;
}

async function worker(w: number, saver: PostgresSaver, running: () => boolean, started: number): Promise<void> {
  const graph = soakGraph(saver);
  let seq = 0;
  while (running()) {
    const thread = threadId(Math.floor(Math.random() * THREADS));
    const word = `w${w}-${seq++}`;
    sent.add(word);
    const config = { configurable: { thread_id: thread } };
    const t0 = performance.now();
    try {
      await graph.invoke({ word }, config);
      latencies.push(performance.now() - t0);
      invocations++;
      if (!acked.has(thread)) acked.set(thread, []);
      acked.get(thread)!.push({ word, start: t0, end: performance.now() });
      if (phase.restartDoneAt && !phase.firstSuccessAfterRestart) phase.firstSuccessAfterRestart = performance.now() - started;
      continue;
    } catch (err) {
      count(errors, errorKey(err));
      if (!uncertain.has(thread)) uncertain.set(thread, new Set());
      uncertain.get(thread)!.add(word);
      // A lineage conflict wrote nothing: another worker owns the thread; move on.
      if (err instanceof CheckpointConflictError) continue;
    }
    // Anything else may have left this run half-way: finish it from its last commit.
    for (let attempt = 0; attempt < 40 && running(); attempt++) {
      await sleep(Math.min(1_000, 50 * 2 ** Math.min(attempt, 4)) * (0.5 + Math.random()));
      try {
        await graph.invoke(null, config);
        resumes++;
        break;
      } catch (err) {
        count(errors, `${errorKey(err)} (resume)`);
        if (err instanceof CheckpointConflictError) break; // someone else continued it
      }
    }
  }
}

// ---------------------------------------------------------------- checks

async function leakCheck(pools: pg.Pool[], admin: pg.Pool) {
  const { rows } = await admin.query<{ n: number; busy: number }>(
    "SELECT count(*)::int AS n, count(*) FILTER (WHERE state <> 'idle')::int AS busy FROM pg_stat_activity WHERE application_name LIKE 'soak-w%'",
  );
  const serverSide = rows[0]!;
  const maxTotal = pools.length * 2;
  const clients = pools.reduce((a, p) => a + p.totalCount, 0);
  return {
    ok: serverSide.busy === 0 && serverSide.n === clients && clients <= maxTotal && pools.every((p) => p.waitingCount === 0 && p.idleCount === p.totalCount),
    poolClients: clients,
    poolClientsBusy: pools.reduce((a, p) => a + p.totalCount - p.idleCount, 0),
    waiting: pools.reduce((a, p) => a + p.waitingCount, 0),
    serverConnections: serverSide.n,
    serverConnectionsBusy: serverSide.busy,
    limit: maxTotal,
  };
}

interface ThreadAudit {
  thread: string;
  checkpoints: number;
  lastStep: number;
  words: number;
  acked: number;
  uncertainPresent: number;
  uncertainAbsent: number;
}

async function auditAll(saver: PostgresSaver, admin: pg.Pool) {
  const failures: string[] = [];
  const threads: ThreadAudit[] = [];
  let checkpointsDecoded = 0;
  let writesDecoded = 0;
  for (let i = 0; i < THREADS; i++) {
    const thread = threadId(i);
    const fail = (what: string) => failures.push(`${thread}: ${what}`);
    const chain = await chainAudit(admin, thread);
    const ack = acked.get(thread) ?? [];
    if (chain.rows === 0) {
      if (ack.length > 0) fail(`${ack.length} acknowledged invocations but no checkpoint`);
      continue;
    }
    if (chain.heads !== 1) fail(`${chain.heads} heads`);
    if (chain.roots !== 1) fail(`${chain.roots} roots`);
    if (chain.chain !== chain.rows) fail(`chain of ${chain.chain} checkpoints but ${chain.rows} rows (fork or orphan)`);
    if (chain.gaps !== 0) fail(`${chain.gaps} step gaps`);
    if (chain.min_step !== -1) fail(`chain starts at step ${chain.min_step}`);
    if (chain.missing_blobs !== 0) fail(`${chain.missing_blobs} state channel versions without a blob`);
    // Every checkpoint and pending write of the history decodes.
    for await (const t of saver.list({ configurable: { thread_id: thread, checkpoint_ns: "" } })) {
      checkpointsDecoded++;
      writesDecoded += t.pendingWrites?.length ?? 0;
    }
    const head = await saver.getTuple({ configurable: { thread_id: thread } });
    const values = (head?.checkpoint.channel_values ?? {}) as { log?: string[]; turn?: number };
    const words = values.log ?? [];
    if ((values.turn ?? 0) !== words.length) fail(`turn ${values.turn} but ${words.length} words`);
    const seen = new Map<string, number>();
    words.forEach((w, idx) => {
      if (seen.has(w)) fail(`word ${w} twice`);
      seen.set(w, idx);
      if (!sent.has(w)) fail(`word ${w} was never sent`);
    });
    for (const a of ack) if (!seen.has(a.word)) fail(`acknowledged word ${a.word} missing`);
    // Real-time order: an invocation acknowledged before another one started comes first in the log.
    // (Overlapping invocations may commit in either order: their acknowledgements race in the event loop.)
    for (const b of ack) {
      for (const a of ack) {
        if (a.end < b.start && (seen.get(a.word) ?? -1) > (seen.get(b.word) ?? Infinity)) {
          fail(`${a.word} was acknowledged before ${b.word} started, but comes after it`);
        }
      }
    }
    const unsure = uncertain.get(thread) ?? new Set<string>();
    let present = 0;
    for (const w of unsure) if (seen.has(w)) present++;
    for (const w of words) if (!unsure.has(w) && !ack.some((a) => a.word === w)) fail(`word ${w} neither acknowledged nor attempted here`);
    threads.push({ thread, checkpoints: chain.rows, lastStep: chain.last_step, words: words.length, acked: ack.length, uncertainPresent: present, uncertainAbsent: unsure.size - present });
  }
  const sum = (f: (t: ThreadAudit) => number) => threads.reduce((a, t) => a + f(t), 0);
  return {
    failures,
    threadsAudited: threads.length,
    checkpoints: sum((t) => t.checkpoints),
    checkpointsDecoded,
    pendingWritesDecoded: writesDecoded,
    wordsInState: sum((t) => t.words),
    acknowledgedWordsPresent: sum((t) => t.acked),
    failedInvocationsWhoseWordCommitted: sum((t) => t.uncertainPresent),
    failedInvocationsWithoutTrace: sum((t) => t.uncertainAbsent),
    longestThreadSteps: Math.max(0, ...threads.map((t) => t.lastStep + 2)),
  };
}

function percentiles(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => Number((s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0).toFixed(1));
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99), max: at(1) };
}

function printReport(report: Record<string, unknown> & { audit: { failures: string[] } }, ok: boolean) {
  if (args.json) {
    process.stdout.write(`${JSON.stringify({ ok, ...report }, null, 2)}\n`);
  } else {
    log("\n==== soak report ====");
    for (const [k, v] of Object.entries(report)) {
      if (k === "audit") continue;
      log(`${k}: ${typeof v === "object" ? JSON.stringify(v) : String(v)}`);
    }
    const { failures, ...audit } = report.audit;
    log(`audit: ${JSON.stringify(audit)}`);
    log(failures.length === 0 ? "audit: every thread is one intact chain; every acknowledged step is present" : `AUDIT FAILED (${failures.length}):\n  ${failures.slice(0, 50).join("\n  ")}`);
    log(ok ? "SOAK OK" : "SOAK FAILED");
  }
}

process.exitCode = await main().catch((err: unknown) => {
  console.error(err);
  return 1;
});
