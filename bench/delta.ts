/**
 * `npm run bench -- --delta [--delta-turns N]`: a chat on LangGraph's delta channels (issue 41),
 * as a user would write it: one thread, `new StateSchema({ messages: MessagesDeltaValue })`, a
 * question of about 300 characters and an answer of about 600 per turn, N turns (default 200).
 * Per saver (MemorySaver; ours by default and with `elementStorage: false`; the official saver),
 * each on a database of its own: the turn's time by quarter of the thread (median of each quarter),
 * getState's (median of 10 at the end), the bytes its tables take on disk against the raw text's,
 * how many rows hold the first question (each message once on disk: one), and whether getState
 * gives every message back as sent. The savers run one after another, so the
 * times are one run's, not paired (the quarters' ratio is what says whether a saver stays flat).
 */
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { END, MessagesDeltaValue, START, StateGraph, StateSchema, type BaseCheckpointSaver } from "@langchain/langgraph";
import { startServer, dropAll, createDatabase } from "./db.js";
import { createPgSaver, loadOurs, memorySaver } from "./savers.js";
import { median } from "./stats.js";
import { text, variedText } from "./workload.js";

const log = (msg: string) => console.error(`[bench delta] ${msg}`);

const State = new StateSchema({ messages: MessagesDeltaValue });

function chat(checkpointer: BaseCheckpointSaver) {
  const graph = new StateGraph(State)
    .addNode("agent", (state: { messages: BaseMessage[] }) => ({ messages: [new AIMessage({ id: `ai-${state.messages.length}`, content: answer(state.messages.length) })] }))
    .addEdge(START, "agent")
    .addEdge("agent", END)
    .compile({ checkpointer });
  return graph;
}

/** The chat's text: a repeating word list, or words drawn at random (`--delta-text varied`). */
let words = text;

/** A question of about 300 characters, starting with a tag of its own (`q0: ` is in no other). */
const question = (i: number) => `q${i}: ${words(i, 300)}`;
const answer = (n: number) => words(n + 7, 600);

interface Result {
  saver: string;
  quarters: number[];
  getStateMs: number;
  bytes?: number;
  /** Rows holding the first question (TOASTed values decompressed). */
  copies?: number;
  rawBytes: number;
  intact: boolean;
}

async function run(name: string, saver: BaseCheckpointSaver, turns: number, measure?: { size: () => Promise<number>; copies: () => Promise<number> }): Promise<Result> {
  const graph = chat(saver);
  const config = { configurable: { thread_id: "delta-chat" } };
  const times: number[] = [];
  const sent: string[] = [];
  for (let i = 0; i < turns; i++) {
    const q = question(i);
    const t0 = performance.now();
    const out = await graph.invoke({ messages: [new HumanMessage({ id: `user-${i}`, content: q })] }, config);
    times.push(performance.now() - t0);
    sent.push(q, String((out.messages as BaseMessage[]).at(-1)!.content));
  }
  const reads: number[] = [];
  let messages: BaseMessage[] = [];
  for (let i = 0; i < 10; i++) {
    const t0 = performance.now();
    messages = (await graph.getState(config)).values.messages as BaseMessage[];
    reads.push(performance.now() - t0);
  }
  const q = Math.max(1, Math.floor(turns / 4));
  const quarters = [0, 1, 2, 3].map((k) => median(times.slice(k * q, k === 3 ? turns : (k + 1) * q)));
  const intact = messages.length === sent.length && messages.every((m, i) => m.content === sent[i]);
  const rawBytes = sent.reduce((n, s) => n + Buffer.byteLength(s), 0);
  const result: Result = {
    saver: name,
    quarters,
    getStateMs: median(reads),
    rawBytes,
    intact,
    ...(measure ? { bytes: await measure.size(), copies: await measure.copies() } : {}),
  };
  log(`${name}: turn ${quarters.map((x) => x.toFixed(1)).join(" / ")} ms by quarter, getState ${result.getStateMs.toFixed(1)} ms, intact ${intact}`);
  return result;
}

export async function deltaMain(args: { turns: number; text: "repeated" | "varied" }): Promise<number> {
  words = args.text === "varied" ? variedText : text;
  const ours = await loadOurs();
  if (!ours) throw new Error("src/ does not load");
  const server = await startServer();
  log(`postgres: ${server.source}; ${args.turns} turns`);
  const results: Result[] = [];
  try {
    results.push(await run("MemorySaver", memorySaver(), args.turns));
    const measure = (pool: import("pg").Pool, value: string) => ({
      size: async () =>
        Number(
          (
            await pool.query<{ b: string }>(
              "SELECT sum(pg_total_relation_size(c.oid))::text AS b FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'",
            )
          ).rows[0]!.b,
        ),
      // The first question's tag in a value column of the two tables that hold values (bytea either way).
      copies: async () =>
        Number(
          (
            await pool.query<{ n: string }>(
              `SELECT ((SELECT count(*) FROM checkpoint_blobs WHERE position($1::bytea IN ${value}) > 0)
                     + (SELECT count(*) FROM checkpoint_writes WHERE position($1::bytea IN ${value}) > 0))::text AS n`,
              [Buffer.from("q0: ")],
            )
          ).rows[0]!.n,
        ),
    });
    for (const [name, elementStorage] of [["ours, default", undefined], ["ours, elementStorage: false", false]] as const) {
      const db = await createDatabase(server.adminUrl, `delta_${elementStorage === false ? "whole" : "ours"}`);
      const pool = db.pool({ max: 10 });
      await ours.migrate({ pool, schema: "public" });
      const saver = new ours.PostgresSaver(pool, elementStorage === false ? { elementStorage: false } : {});
      results.push(await run(name, saver, args.turns, measure(pool, "value")));
    }
    const official = await createPgSaver("official", server.adminUrl, "delta_official");
    results.push(await run("official", official.saver, args.turns, measure(official.pool, "blob")));
  } finally {
    await dropAll();
    await server.stop();
  }
  const memory = results[0]!;
  console.log(
    `delta-channel chat, ${args.turns} turns (MessagesDeltaValue; ~300-character question, ~600-character answer; ${args.text === "varied" ? "words drawn at random" : "a repeating word list"})`,
  );
  console.log("| saver | turn, by quarter (ms) | last ÷ first quarter | last quarter ÷ MemorySaver's | getState (ms) | bytes on disk ÷ raw text | rows holding the first question | messages back |");
  console.log("|---|--:|--:|--:|--:|--:|--:|---|");
  for (const r of results) {
    const [first, , , last] = r.quarters as [number, number, number, number];
    console.log(
      `| ${r.saver} | ${r.quarters.map((x) => x.toFixed(1)).join(" / ")} | ${(last / first).toFixed(2)}x | ${(last / memory.quarters[3]!).toFixed(2)}x | ${r.getStateMs.toFixed(1)} | ` +
        `${r.bytes === undefined ? "–" : `${(r.bytes / r.rawBytes).toFixed(1)}x`} | ${r.copies ?? "–"} | ${r.intact ? "intact" : "**not intact**"} |`,
    );
  }
  return results.every((r) => r.intact) ? 0 : 1;
}
