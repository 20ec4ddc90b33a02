/**
 * `npm run bench -- --partitions[=N]` (issue 32): the hot statements' cost on a
 * schema hash partitioned by thread (N partitions per table, default 16) beside
 * the same schema with plain tables, paired in one process (stats.ts: small
 * alternating batches, ratios per paired batch with a 95% bootstrap interval).
 *
 * Both databases hold the same data: a 100-checkpoint thread read by getTuple
 * and list (each checkpoint with one task's 2 writes), 10,000 threads of 10
 * checkpoints cloned from one the saver wrote (so every partition holds
 * rows), the threads deleteThread deletes (10 checkpoints each), and the
 * store's 1,000 items in 100 namespaces (bench/store.ts's). Both are vacuumed
 * and analyzed before the timed loops. Each operation is our saver's or
 * store's, the same calls on both:
 *
 *   put, putWrites, getTuple latest / by id, list(limit 10) of one thread,
 *   deleteThread: the saver's hot paths (bench/README.md's workload)
 *   store put / get: one item; store search: one namespace (a fan-out, see README "Scaling out")
 *   list(limit 10) without a thread: a fan-out read, with JIT at the server's
 *   setting and with JIT off (the README's advice for partitioned schemas)
 *
 * JIT is left at the server's setting for everything but the last line: a hot
 * statement names its thread, is pruned to one partition when planned, and
 * costs too little to be compiled; a fan-out read is planned over every
 * partition and is.
 */
import type pg from "pg";
import { migrate, PostgresSaver } from "../src/index.js";
import { migrateStore, PostgresStore } from "../src/store/index.js";
import { createDatabase, dropAll, startServer } from "./db.js";
import { cloneThread } from "./scale.js";
import { compare, fmt, fmtRatio, pairedRatio, type CompareOptions, type ContenderStats, type Ratio } from "./stats.js";
import { ChatThread } from "./workload.js";

const THREADS = 10_000;
const NAMESPACES = 100;
const ITEMS = 1000;
const T0 = performance.now();
const log = (msg: string) => console.error(`[bench --partitions ${((performance.now() - T0) / 1000).toFixed(1)}s] ${msg}`);
const ns = (i: number) => ["users", `u${i % NAMESPACES}`, "memories"];

interface Side {
  name: string;
  url: string;
  pool: pg.Pool;
  saver: PostgresSaver;
  /** A saver on the same database whose sessions have JIT off. */
  noJit: PostgresSaver;
  store: PostgresStore;
  read: ChatThread;
  put: ChatThread;
  writes: ChatThread;
}

async function side(adminUrl: string, name: string, partitions: number | undefined, deletes: number): Promise<Side> {
  const db = await createDatabase(adminUrl, `parts_${name}`);
  const pool = db.pool({ max: 4 });
  await migrate({ pool, partitions });
  await migrateStore({ pool, partitions });
  const saver = new PostgresSaver(pool);
  const store = new PostgresStore(pool);
  const read = new ChatThread(saver, "read-thread", { remember: false });
  await read.build(100);
  const template = new ChatThread(saver, "template", { remember: false });
  await template.build(10);
  await cloneThread(pool, "template", THREADS, "bulk-");
  await cloneThread(pool, "template", deletes, "doomed-");
  const put = new ChatThread(saver, "put-thread", { remember: false });
  const writes = new ChatThread(saver, "writes-thread", { remember: false });
  await writes.put(0);
  for (let i = 0; i < ITEMS; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => store.put(ns(i + j), `k${i + j}`, { text: `memory ${i + j}`, kind: (i + j) % 5 })));
  await pool.query("VACUUM ANALYZE");
  return { name, url: db.url, pool, noJit: new PostgresSaver(db.pool({ max: 2, options: "-c jit=off" })), saver, store, read, put, writes };
}

export async function partitionsMain(args: { partitions: number; rounds: number; json: boolean }): Promise<number> {
  const server = await startServer();
  log(`postgres: ${server.source}`);
  const opts: CompareOptions = { rounds: args.rounds, batches: 8, batchSize: 25, warmup: 25 };
  const deletes = opts.warmup + opts.rounds * opts.batches * opts.batchSize;
  try {
    const plain = await side(server.adminUrl, "plain", undefined, deletes);
    log("plain tables ready");
    const parted = await side(server.adminUrl, `p${args.partitions}`, args.partitions, deletes);
    log(`${args.partitions} partitions per table ready`);
    const { rows: jit } = await plain.pool.query<{ jit: string }>("SELECT current_setting('jit') AS jit");
    const sides = [plain, parted];
    const ids = new Map<string, string[]>();
    for (const s of sides) {
      const all: string[] = [];
      for await (const t of s.saver.list(s.read.config(), {})) all.push(t.checkpoint.id);
      ids.set(s.name, all);
    }
    const drain = async (it: AsyncIterable<unknown>) => {
      for await (const _ of it);
    };
    const ops: [string, (s: Side, i: number) => Promise<unknown>, Partial<CompareOptions>?][] = [
      ["put", (s, i) => s.put.put(i)],
      ["putWrites", (s, i) => s.writes.putWrites(i)],
      ["getTuple latest", (s) => s.saver.getTuple(s.read.config())],
      ["getTuple by id", (s, i) => s.saver.getTuple(s.read.config(ids.get(s.name)![(i * 37) % 100]))],
      ["list(limit 10), one thread", (s) => drain(s.saver.list(s.read.config(), { limit: 10 }))],
      ["deleteThread (10 checkpoints)", (s, i) => s.saver.deleteThread(`doomed-${i + 1}`)],
      ["store put", (s, i) => s.store.put(ns(i), `k${(i * 13) % ITEMS}`, { text: `memory ${i}`, kind: i % 5 })],
      ["store get", (s, i) => s.store.get(ns(i * 17), `k${(i * 17) % ITEMS}`)],
      ["store search, one namespace (fan-out)", (s, i) => s.store.search(["users", `u${i % NAMESPACES}`], { filter: { kind: 2 }, limit: 10 })],
      // A fan-out read sorts every thread's checkpoints (no index has list()'s order across threads): smaller batches.
      ["list(limit 10) without a thread (fan-out), JIT off", (s) => drain(s.noJit.list({}, { limit: 10 })), { batches: 4, batchSize: 5, warmup: 2 }],
      // Seconds per call when the server compiles it: few, small batches.
      [`list(limit 10) without a thread (fan-out), JIT ${jit[0]!.jit}`, (s) => drain(s.saver.list({}, { limit: 10 })), { batches: 2, batchSize: 1, warmup: 1 }],
    ];
    const results: { op: string; plain: ContenderStats; parted: ContenderStats; ratio: Ratio }[] = [];
    for (const [op, fn, over] of ops) {
      const stats = await compare(
        sides.map((s) => ({ name: s.name, op: (i: number) => fn(s, i) })),
        { ...opts, ...over },
      );
      const a = stats.get(plain.name)!;
      const b = stats.get(parted.name)!;
      // Time with partitions ÷ time without = plain ops/s ÷ partitioned ops/s, paired batch by batch.
      const ratio = pairedRatio(a, b);
      results.push({ op, plain: a, parted: b, ratio });
      log(`${op}: plain ${fmt(a.p50, 3)} ms, ${args.partitions} partitions ${fmt(b.p50, 3)} ms (p50), time ratio ${fmtRatio(ratio)}`);
    }
    // What the loops wrote and read is what the saver holds: the last put is the head, every delete deleted.
    for (const s of sides) {
      const head = await s.saver.getTuple(s.put.config());
      if (head?.checkpoint.id !== s.put.head) throw new Error(`${s.name}: getTuple(latest) after the put loop is not the last put`);
      const { rows } = await s.pool.query("SELECT count(*)::int AS n FROM checkpoints WHERE thread_id LIKE 'doomed-%'");
      if (rows[0].n !== 0) throw new Error(`${s.name}: deleteThread left ${rows[0].n} checkpoints of deleted threads`);
    }
    if (args.json) {
      console.log(JSON.stringify({ partitions: args.partitions, threads: THREADS, jit: jit[0]!.jit, results: results.map((r) => ({ op: r.op, plainP50: r.plain.p50, partitionedP50: r.parted.p50, timeRatio: r.ratio })) }, null, 2));
    } else {
      console.log(
        [
          `# ${args.partitions} hash partitions per table vs plain tables (issue 32)`,
          "",
          `Our saver and store on two databases of one server with the same data (${THREADS.toLocaleString("en-US")} threads of 10 checkpoints besides the ones read and written, ${ITEMS} store items), loopback, ` +
            `${opts.rounds} rounds x ${opts.batches} batches x ${opts.batchSize} operations per side, interleaved; JIT ${jit[0]!.jit} unless said. ` +
            "Time ratio: time per operation with partitions ÷ without, geometric mean of paired batches [95% bootstrap interval].",
          "",
          `| operation | plain p50 ms | ${args.partitions} partitions p50 ms | time ratio [95% CI] |`,
          "|---|--:|--:|--:|",
          ...results.map((r) => `| ${r.op} | ${fmt(r.plain.p50, 3)} | ${fmt(r.parted.p50, 3)} | ${fmtRatio(r.ratio)} |`),
          "",
        ].join("\n"),
      );
    }
    return 0;
  } finally {
    await dropAll();
    await server.stop();
  }
}
