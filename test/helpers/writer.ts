/**
 * A separate writer process, as an application instance of a rolling deploy:
 * runs `logGraph` on several threads in a loop with
 * - `official`: the official `@langchain/langgraph-checkpoint-postgres` saver, or
 * - `release:<dir>`: this package as an older release left it (its `src/`
 *   extracted from git history into <dir>; see release.ts), after that
 *   release's own `migrate` (so the schema is at its level),
 * and prints one JSON line per event on stdout: `{"ready":true}` once it
 * writes, `{"ack":{thread,ns,id}}` for each put the saver acknowledged,
 * `{"error":{code,message}}` for each failed invocation. It stops after the
 * invocation in flight when stdin ends, and exits 0.
 *
 * Usage: node --import tsx test/helpers/writer.ts <official|release:dir> <url> <schema> <thread,thread,...>
 *
 * @example
 * ```ts
 * const w = startWriter(["official", db.url, "public", "t1,t2"]); // see startWriter in switching tests
 * ```
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { PostgresSaver as OfficialSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { logGraph } from "./graphs.js";

const [kind, url, schema, threadList] = process.argv.slice(2);
if (!kind || !url || !schema || !threadList) throw new Error("usage: writer.ts <official|release:dir> <url> <schema> <threads>");
const threads = threadList.split(",");
const print = (x: unknown) => process.stdout.write(`${JSON.stringify(x)}\n`);

const pool = new pg.Pool({ connectionString: url, max: 4, application_name: `writer:${kind.split(":")[0]}` });
pool.on("error", () => undefined);

let saver: BaseCheckpointSaver;
if (kind === "official") {
  const official = new OfficialSaver(pool, undefined, { schema });
  await official.setup();
  saver = official;
} else if (kind.startsWith("release:")) {
  const release = (await import(pathToFileURL(join(kind.slice("release:".length), "src", "index.ts")).href)) as typeof import("../../src/index.js");
  await release.migrate({ pool, schema });
  const mine = new release.PostgresSaver(pool, { schema });
  // The schema check happens once, on the first operation: a running instance, as in production.
  await mine.getTuple({ configurable: { thread_id: threads[0] } });
  saver = mine as unknown as BaseCheckpointSaver;
} else {
  throw new Error(`unknown writer ${kind}`);
}

const put = saver.put.bind(saver);
saver.put = async (...args: Parameters<typeof put>) => {
  const config = await put(...args);
  print({ ack: { thread: config.configurable?.thread_id, ns: config.configurable?.checkpoint_ns ?? "", id: config.configurable?.checkpoint_id } });
  return config;
};

let stopping = false;
process.stdin.on("data", () => undefined);
process.stdin.on("end", () => {
  stopping = true;
});
print({ ready: true });
const graph = logGraph(saver);
for (let round = 0; !stopping; round++) {
  for (const thread of threads) {
    if (stopping) break;
    const config: RunnableConfig = { configurable: { thread_id: thread } };
    try {
      await graph.invoke({ word: `r${round}` }, config);
    } catch (err) {
      const e = err as { code?: unknown; sqlState?: unknown; message?: unknown };
      const code = typeof e.code === "string" ? e.code : undefined;
      const sqlState = typeof e.sqlState === "string" ? e.sqlState : code && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
      print({ error: { thread, code, sqlState, message: String(e.message ?? err).split("\n")[0] } });
    }
  }
}
await pool.end();
process.exit(0);
