/**
 * Before/after for a change to the write or read path: put, putWrites,
 * getTuple (latest), list (10) and the 10-node graph (graph.ts: `graph` with
 * async durability, `graphSync` with sync) of this package at a git revision against
 * the working tree (`--ops put,getTuple` for some of them), interleaved in one
 * process (stats.ts), each on its own fresh database. It runs twice, the
 * second time with the databases created in the other order, because on a
 * busy machine the database made first can be measurably faster or slower;
 * the ratio of each run and their geometric mean are printed.
 *
 *   DATABASE_URL=postgres://... node --import tsx bench/ab.ts <rev> [--rounds 8] [--ops put,putWrites,getTuple,list,graph,graphSync]
 *     [--messages N] [--elements] [--no-flush]
 *
 * `--messages N`: every checkpoint holds the first N messages of the
 * conversation (default: the workload's rolling 8-23); `--elements`: both
 * savers store lists by their elements (`elementStorage: true`);
 * `--no-flush`: both on connections with synchronous_commit=off, so that a
 * disk whose flushes take milliseconds (other work on the machine) does not
 * hide a change in what the code costs (a change in the number of commits
 * then shows only without it).
 *
 * The revision's src/ and migrations/ are extracted into .releases/<commit>/
 * (git-ignored; inside the repository so its imports resolve to node_modules).
 */
import { execFileSync, execSync } from "node:child_process";
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createDatabase, dropAll } from "./db.js";
import { compare, fmt, fmtSpread, roundRatio, type Contender } from "./stats.js";
import { tenNodeGraph } from "./graph.js";
import { ChatThread } from "./workload.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

function extract(rev: string): string {
  const commit = execFileSync("git", ["rev-parse", "--verify", `${rev}^{commit}`], { cwd: ROOT, encoding: "utf8" }).trim();
  const dir = join(ROOT, ".releases", commit.slice(0, 12));
  if (!existsSync(dir)) {
    const tmp = `${dir}.tmp-${process.pid}`;
    mkdirSync(tmp, { recursive: true });
    try {
      execSync(`git archive --format=tar ${commit} src migrations tsconfig.json | tar -x -C "${tmp}"`, { cwd: ROOT });
      renameSync(tmp, dir);
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      throw err;
    }
  }
  return dir;
}

type Module = typeof import("../src/index.js");

async function thread(mod: Module, url: string, label: string, shape: { messages?: number; elements: boolean; noFlush: boolean }): Promise<ChatThread> {
  const db = await createDatabase(url, `ab_${label}`);
  const pool = db.pool({ max: 10, ...(shape.noFlush ? { options: "-c synchronous_commit=off" } : {}) });
  await mod.migrate({ pool, schema: "public" });
  const saver = new mod.PostgresSaver(pool, shape.elements ? { elementStorage: true } : {});
  const t = new ChatThread(saver, `ab-${label}`, { remember: false, ...(shape.messages ? { messageCount: () => shape.messages! } : {}) });
  await t.build(20);
  return t;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const rev = args.find((a, i) => !a.startsWith("--") && !["--rounds", "--ops", "--messages"].includes(args[i - 1] ?? ""));
  const roundsAt = args.indexOf("--rounds");
  const rounds = roundsAt >= 0 ? Number(args[roundsAt + 1]) : 8;
  const opsAt = args.indexOf("--ops");
  const ALL = ["put", "putWrites", "getTuple", "list", "graph", "graphSync"] as const;
  const ops = opsAt >= 0 ? (args[opsAt + 1] ?? "").split(",") : [...ALL];
  if (ops.some((o) => !(ALL as readonly string[]).includes(o))) {
    console.error(`--ops takes a comma-separated subset of ${ALL.join(",")}`);
    process.exit(2);
  }
  const messagesAt = args.indexOf("--messages");
  const shape = { messages: messagesAt >= 0 ? Number(args[messagesAt + 1]) : undefined, elements: args.includes("--elements"), noFlush: args.includes("--no-flush") };
  if (shape.messages !== undefined && !(Number.isInteger(shape.messages) && shape.messages > 0)) {
    console.error("--messages takes a positive integer");
    process.exit(2);
  }
  const url = process.env.DATABASE_URL;
  if (!rev || !url || !Number.isInteger(rounds) || rounds < 1) {
    console.error("usage: DATABASE_URL=postgres://... node --import tsx bench/ab.ts <rev> [--rounds N] [--ops put,putWrites,getTuple,list,graph,graphSync] [--messages N] [--elements] [--no-flush]");
    process.exit(2);
  }
  const before = (await import(join(extract(rev), "src", "index.ts"))) as Module;
  const after = (await import("../src/index.js")) as Module;
  const ratios: Record<string, number[]> = Object.fromEntries(ops.map((o) => [o, []]));
  try {
    for (const order of [["before", "after"], ["after", "before"]] as const) {
      const threads: Record<string, ChatThread> = {};
      for (const name of order) threads[name] = await thread(name === "before" ? before : after, url, name, shape);
      for (const op of ops as (typeof ALL)[number][]) {
        const graphs = Object.fromEntries(order.map((name) => [name, tenNodeGraph(threads[name]!.saver)]));
        const run = async (t: ChatThread, i: number): Promise<unknown> => {
          if (op === "graph" || op === "graphSync") {
            const name = t === threads.before ? "before" : "after";
            const out = await graphs[name]!.invoke(`ab-${name}-${op}-${i}`, op === "graph" ? "async" : "sync");
            if (out.items.length !== 10) throw new Error(`${name}: the graph returned ${out.items.length} items`);
            return out;
          }
          if (op === "put") return t.put(1000 + i);
          if (op === "putWrites") return t.putWrites(100_000 + i);
          if (op === "getTuple") return t.saver.getTuple(t.config());
          const page = [];
          for await (const x of t.saver.list(t.config(), { limit: 10 })) page.push(x);
          return page;
        };
        const contenders: Contender[] = order.map((name) => ({ name, op: (i: number) => run(threads[name]!, i) }));
        const graph = op === "graph" || op === "graphSync";
        const res = await compare(contenders, graph ? { rounds, batches: 8, batchSize: 5, warmup: 10 } : { rounds, batches: 8, batchSize: 50, warmup: 50 });
        const b = res.get("before")!;
        const a = res.get("after")!;
        const ratio = roundRatio(a, b, (r) => r.opsPerSec);
        ratios[op]!.push(ratio.median);
        console.log(
          `${op.padEnd(9)} (${order[0]} created first)  before p50 ${fmt(b.p50, 3)} ms  after p50 ${fmt(a.p50, 3)} ms  after/before ops/s ${fmtSpread(ratio)}`,
        );
      }
      await dropAll();
    }
    for (const [op, rs] of Object.entries(ratios)) {
      console.log(`${op.padEnd(9)} after/before ops/s, geometric mean of both orders: ${fmt(Math.sqrt(rs[0]! * rs[1]!), 3)}x`);
    }
  } finally {
    await dropAll();
  }
}

await main();
