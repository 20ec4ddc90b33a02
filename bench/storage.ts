/**
 * `npm run bench -- --storage` (issue 21): how a saver's tables grow with one
 * conversation, and whether put/getTuple cost grows with it, ours (whatever
 * src/ holds on this branch) paired against the official
 * @langchain/langgraph-checkpoint-postgres, each in its own fresh database.
 *
 * 1. Text chat: one thread of a real StateGraph (MessagesAnnotation, one node
 *    appending an AIMessage of ~600 characters), one invoke per turn with one
 *    HumanMessage of ~300 characters, default durability. Sizes of all the
 *    saver's tables (pg_total_relation_size: heap + TOAST + indexes) after 25,
 *    50, 100 and 200 turns of the same thread, against the raw text; then the
 *    state read back with `graph.getState` and compared with what was sent.
 * 2. The same with a ~100 KB image (a base64 data URL) in every HumanMessage,
 *    20 turns: total and per-turn growth against the raw text + image bytes.
 * 3. put and getTuple(latest) on a 10-turn thread vs the long (200-turn) one,
 *    interleaved in small alternating batches (stats.ts). Each put appends one
 *    message to the thread's latest checkpoint as LangGraph does (a new version
 *    from the saver's getNextVersion, parent = the current head), but always to
 *    the same base messages: the thread's message count stays fixed (n + 1).
 *
 * Text is English-like (a vocabulary of common words drawn with Zipf-like
 * frequencies, in sentences), deterministic and different per turn, so TOAST
 * compression sees what it sees in real chats; images are pseudo-random bytes
 * (incompressible, like real PNG data), different per turn.
 */
import { AIMessage, HumanMessage, type BaseMessage, type MessageContent } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { uuid6, type BaseCheckpointSaver, type Checkpoint, type CheckpointMetadata } from "@langchain/langgraph-checkpoint";
import type pg from "pg";
import { dropAll, startServer } from "./db.js";
import { createPgSaver, loadOurs, oursLoadError, type PgSaverHandle, type PgSaverName } from "./savers.js";
import { compare, fmt, fmtRatio, pairedRatio, prng, roundRatio, type CompareOptions, type ContenderStats, type Ratio, type Spread } from "./stats.js";

// ---------------------------------------------------------------- deterministic content

// About 500 common English words, most frequent first (a draw favours the front: Zipf-like).
const VOCABULARY = (
  "the of and to a in is you that it for was on are with as i his they be at one have this from or had by not word but what some we can out other were all there when up use your how said an each she which do their time if will way about many then them write would like so these her long make thing see him two has look more day could go come did number sound no most people my over know water than call first who may down side been now find any new work part take get place made live where after back little only round man year came show every good me give our under name very through just form sentence great think say help low line differ turn cause much mean before move right boy old too same tell does set three want air well also play small end put home read hand port large spell add even land here must big high such follow act why ask men change went light kind off need house picture try us again animal point mother world near build self earth father head stand own page should country found answer school grow study still learn plant cover food sun four between state keep eye never last let thought city tree cross farm hard start might story saw far sea draw left late run while press close night real life few north open seem together next white children begin got walk example ease paper group always music those both mark often letter until mile river car feet care second book carry took science eat room friend began idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain girl usual young ready above ever red list though feel talk bird soon body dog family direct pose leave song measure door product black short numeral class wind question happen complete ship area half rock order fire south problem piece told knew pass since top whole king space heard best hour better true during hundred five remember step early hold west ground interest reach fast verb sing listen six table travel less morning ten simple several vowel toward war lay against pattern slow center love person money serve appear road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead cry dark machine note wait plan figure star box noun field rest correct able pound done beauty drive stood contain front teach week final gave green oh quick develop ocean warm free minute strong special mind behind clear tail produce fact street inch multiply nothing course stay wheel full force blue object decide surface deep moon island foot system busy test record boat common gold possible plane stead dry wonder laugh thousand ago ran check game shape equate hot miss brought heat snow tire bring yes distant fill east paint language among"
).split(" ");

/** Cumulative Zipf weights (1/rank) of VOCABULARY, for inverse-CDF draws. */
const ZIPF_CDF = (() => {
  const w = VOCABULARY.map((_, r) => 1 / (r + 1));
  const total = w.reduce((a, b) => a + b, 0);
  let acc = 0;
  return w.map((x) => (acc += x / total));
})();

function drawWord(rand: () => number): string {
  const u = rand();
  let lo = 0;
  let hi = ZIPF_CDF.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ZIPF_CDF[mid]! < u) lo = mid + 1;
    else hi = mid;
  }
  return VOCABULARY[lo]!;
}

/** English-like text of about `len` characters (sentences of 5-17 words), the same for the same seed. */
export function englishText(seed: number, len: number): string {
  const rand = prng(0x7e47 + seed * 7919);
  const sentences: string[] = [];
  let n = 0;
  while (n < len) {
    const words = Array.from({ length: 5 + Math.floor(rand() * 13) }, () => drawWord(rand));
    words[0] = words[0]!.charAt(0).toUpperCase() + words[0]!.slice(1);
    if (words.length > 8 && rand() < 0.4) words[3] += ",";
    const s = `${words.join(" ")}${rand() < 0.15 ? "?" : "."}`;
    sentences.push(s);
    n += s.length + 1;
  }
  return sentences.join(" ");
}

/** ~300 characters (250-349) of user text for turn `turn`. */
export const humanText = (turn: number): string => englishText(2 * turn, 250 + ((turn * 37) % 100));
/** ~600 characters (500-699) of assistant text for turn `turn`. */
export const aiText = (turn: number): string => englishText(2 * turn + 1, 500 + ((turn * 53) % 200));

/** Bytes of pseudo-random image data per turn: 75,000 bytes = 100,000 base64 characters. */
export const IMAGE_BYTES = 75_000;

/** A `data:image/png;base64,...` URL of ~100 KB of deterministic pseudo-random data, different per turn. */
export function imageUrl(turn: number): string {
  const rand = prng(0x1a6e + turn * 104_729);
  const bytes = Buffer.alloc(IMAGE_BYTES);
  for (let i = 0; i < IMAGE_BYTES; i += 4) bytes.writeUInt32LE(Math.floor(rand() * 2 ** 32), i);
  return `data:image/png;base64,${bytes.toString("base64")}`;
}

/** What the user sends at turn `turn`: text, or text and an image. */
export function humanContent(turn: number, image: boolean): MessageContent {
  if (!image) return humanText(turn);
  return [
    { type: "text", text: humanText(turn) },
    { type: "image_url", image_url: { url: imageUrl(turn) } },
  ];
}

/** Raw bytes of one message content: UTF-8 bytes of its text and of its image URLs. */
export function rawBytes(content: MessageContent): number {
  if (typeof content === "string") return Buffer.byteLength(content);
  let n = 0;
  for (const part of content as Record<string, unknown>[]) {
    if (typeof part.text === "string") n += Buffer.byteLength(part.text);
    const url = (part.image_url as { url?: unknown } | undefined)?.url;
    if (typeof url === "string") n += Buffer.byteLength(url);
  }
  return n;
}

/** The messages a thread of `turns` turns must hold, in order. */
export function expectedMessages(turns: number, image: boolean): { type: "human" | "ai"; id: string; content: MessageContent }[] {
  const out: { type: "human" | "ai"; id: string; content: MessageContent }[] = [];
  for (let t = 0; t < turns; t++) {
    out.push({ type: "human", id: `human-${t}`, content: humanContent(t, image) });
    out.push({ type: "ai", id: `ai-${t}`, content: aiText(t) });
  }
  return out;
}

// ---------------------------------------------------------------- the graph

/** The chat graph: one node answering each user message with ~600 characters and a model's usual metadata. */
export function chatGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(MessagesAnnotation)
    .addNode("agent", (state: typeof MessagesAnnotation.State) => {
      const turn = (state.messages.length - 1) / 2;
      return {
        messages: [
          new AIMessage({
            id: `ai-${turn}`,
            content: aiText(turn),
            response_metadata: { model_name: "gpt-4o-mini-2024-07-18", finish_reason: "stop" },
            usage_metadata: { input_tokens: 80 + turn * 225, output_tokens: 150, total_tokens: 230 + turn * 225 },
          }),
        ],
      };
    })
    .addEdge(START, "agent")
    .addEdge("agent", END)
    .compile({ checkpointer });
}

// ---------------------------------------------------------------- measuring

/** pg_total_relation_size (heap + TOAST + indexes) of every table in `schema`. */
export async function tableSizes(pool: pg.Pool, schema: string): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ name: string; size: string }>(
    `SELECT c.relname AS name, pg_total_relation_size(c.oid)::text AS size
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')
      ORDER BY c.relname`,
    [schema],
  );
  return Object.fromEntries(rows.map((r) => [r.name, Number(r.size)]));
}

export interface SizePoint {
  turns: number;
  /** Raw bytes sent so far: message texts (and image URLs). */
  raw: number;
  /** Sum of `perTable`. */
  bytes: number;
  perTable: Record<string, number>;
}

export interface ReadBack {
  ok: boolean;
  detail: string;
}

export interface ChatRun {
  points: SizePoint[];
  readBack: ReadBack;
  seconds: number;
}

/** Compares the messages of a state with what a thread of `turns` turns was sent (count, order, type, id, content). */
export function checkMessages(messages: readonly BaseMessage[] | undefined, turns: number, image: boolean): ReadBack {
  const want = expectedMessages(turns, image);
  if (!messages) return { ok: false, detail: "no messages in the state" };
  if (messages.length !== want.length) return { ok: false, detail: `${messages.length} messages, sent ${want.length}` };
  for (let i = 0; i < want.length; i++) {
    const m = messages[i]!;
    const w = want[i]!;
    if (m.getType() !== w.type || m.id !== w.id || JSON.stringify(m.content) !== JSON.stringify(w.content)) {
      return { ok: false, detail: `message ${i} (${w.id}) differs: ${m.getType()} ${String(m.id)}, ${JSON.stringify(m.content).length} characters of content` };
    }
  }
  return { ok: true, detail: `${messages.length} messages, all as sent` };
}

/**
 * Runs `turns` turns of the chat graph on one thread through `saver`, takes the
 * sizes of every table in `schema` after each turn listed in `at` (and after
 * the last), then reads the state back with `graph.getState` and checks it.
 */
export async function measureChat(
  saver: BaseCheckpointSaver,
  pool: pg.Pool,
  schema: string,
  options: { turns: number; at?: readonly number[]; image?: boolean; threadId?: string },
): Promise<ChatRun> {
  const image = options.image ?? false;
  const threadId = options.threadId ?? "chat";
  const at = new Set([...(options.at ?? []), options.turns]);
  const graph = chatGraph(saver);
  const config = { configurable: { thread_id: threadId } };
  const points: SizePoint[] = [];
  let raw = 0;
  const t0 = performance.now();
  for (let turn = 0; turn < options.turns; turn++) {
    const content = humanContent(turn, image);
    await graph.invoke({ messages: [new HumanMessage({ id: `human-${turn}`, content })] }, config);
    raw += rawBytes(content) + Buffer.byteLength(aiText(turn));
    if (at.has(turn + 1)) {
      const perTable = await tableSizes(pool, schema);
      points.push({ turns: turn + 1, raw, bytes: Object.values(perTable).reduce((a, b) => a + b, 0), perTable });
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const state = await graph.getState(config);
  const readBack = checkMessages((state.values as { messages?: BaseMessage[] }).messages, options.turns, image);
  return { points, readBack, seconds };
}

// ---------------------------------------------------------------- latency: put and getTuple, short vs long thread

const latestOf = (threadId: string): RunnableConfig => ({ configurable: { thread_id: threadId, checkpoint_ns: "" } });

/**
 * put of a checkpoint that adds one message to the `messages` channel of the
 * thread's latest checkpoint as read once (so the thread's message count
 * stays n + 1 however many puts run): a new checkpoint id each time, the
 * version from the saver's getNextVersion, the parent the current head.
 */
export async function appender(saver: BaseCheckpointSaver, threadId: string): Promise<(i: number) => Promise<unknown>> {
  const base = await saver.getTuple(latestOf(threadId));
  if (!base) throw new Error(`thread ${threadId} has no checkpoint`);
  const messages = (base.checkpoint.channel_values as { messages?: BaseMessage[] }).messages ?? [];
  let head = base.config;
  let version = base.checkpoint.channel_versions.messages;
  const step = Number((base.metadata as { step?: number } | undefined)?.step ?? 0);
  return async (i) => {
    version = saver.getNextVersion(version as never) as string | number;
    const checkpoint: Checkpoint = {
      ...base.checkpoint,
      id: uuid6(-1),
      ts: new Date().toISOString(),
      channel_values: { ...base.checkpoint.channel_values, messages: [...messages, new HumanMessage({ id: `extra-${i}`, content: humanText(100_000 + i) })] },
      channel_versions: { ...base.checkpoint.channel_versions, messages: version },
    };
    const metadata = { source: "loop", step: step + 1, parents: {} } as CheckpointMetadata;
    head = await saver.put(head, checkpoint, metadata, { messages: version });
  };
}

export interface Latency {
  saver: PgSaverName;
  op: "put" | "getTuple";
  shortP50: number;
  longP50: number;
  /** long ÷ short time per operation, paired per batch, with its 95% interval. */
  ratio: Ratio;
  /** Per-round p50 ratio long ÷ short, median [min-max]. */
  p50Ratio: Spread;
}

// ---------------------------------------------------------------- the run

export interface StorageArgs {
  /** Turns of the text thread (default 200); the image thread has min(20, turns), the short thread min(10, turns). */
  turns: number;
  rounds: number;
  strict: boolean;
  /** Measure our saver's default (whole values) instead of `elementStorage: true`. */
  whole?: boolean;
}

const STORAGE_POINTS = [25, 50, 100, 200];
const IMAGE_TURNS = 20;
const SHORT_TURNS = 10;

const T0 = performance.now();
const log = (msg: string) => console.error(`[bench --storage ${((performance.now() - T0) / 1000).toFixed(1)}s] ${msg}`);
const kib = (b: number) => `${fmt(b / 1024, 1)} KiB`;
const times = (b: number, raw: number) => `${(b / raw).toFixed(1)}x`;

/** The `--storage` mode of bench/run.ts. Returns the exit code: 1 when a read-back fails (or, with --strict, a target). */
export async function storageMain(args: StorageArgs): Promise<number> {
  const server = await startServer();
  log(`postgres: ${server.source}`);
  const ours = await loadOurs();
  // Ours stores lists by their elements (opt-in, README "Lists stored by their elements"); `--whole` measures the default.
  const withElements = (h: PgSaverHandle): PgSaverHandle =>
    h.name === "ours" && ours && !args.whole ? { ...h, saver: new ours.PostgresSaver(h.pool, { schema: "public", elementStorage: true }) } : h;
  if (!ours) log(`OUR SAVER IS UNAVAILABLE (${oursLoadError()}); measuring the official saver only`);
  const names: PgSaverName[] = ours ? ["ours", "official"] : ["official"];
  const turns = args.turns;
  const points = STORAGE_POINTS.filter((p) => p < turns).concat(turns);
  const imageTurns = Math.min(IMAGE_TURNS, turns);
  const shortTurns = Math.min(SHORT_TURNS, turns);
  const out: string[] = [];
  const failures: string[] = [];
  const targets: { name: string; goal: string; measured: string; pass: boolean }[] = [];
  try {
    // ---------------- 1. text chat
    const text = new Map<PgSaverName, ChatRun>();
    const handles = new Map<PgSaverName, PgSaverHandle>();
    for (const name of names) {
      const h = withElements(await createPgSaver(name, server.adminUrl, `storage_${name}`));
      handles.set(name, h);
      const run = await measureChat(h.saver, h.pool, "public", { turns, at: points });
      text.set(name, run);
      log(`${name}: ${turns} turns in ${run.seconds.toFixed(1)}s, ${kib(run.points.at(-1)!.bytes)}; read back ${run.readBack.ok ? "OK" : "FAIL"}`);
    }
    out.push(`# Storage of one growing conversation (issue 21)`, "", `ours: ${args.whole ? "default settings (whole values)" : "elementStorage: true"}`, "");
    out.push(
      `One thread, one invoke per turn: a HumanMessage of ~300 characters, the graph's node answers with an AIMessage of ~600 (English-like text). ` +
        `Bytes on disk = pg_total_relation_size (heap + TOAST + indexes) of every table of the saver's schema, as written; raw = the message texts.`,
      "",
    );
    out.push(`| turns | raw text | ${names.map((n) => `${n} saver`).join(" | ")} |`, `|--:|--:|${names.map(() => "--:").join("|")}|`);
    points.forEach((p, k) => {
      const raw = text.get(names[0]!)!.points[k]!.raw;
      out.push(`| ${p} | ${kib(raw)} | ${names.map((n) => { const pt = text.get(n)!.points[k]!; return `${kib(pt.bytes)} (${times(pt.bytes, pt.raw)})`; }).join(" | ")} |`);
    });
    out.push("", `Tables after ${turns} turns:`, "");
    for (const n of names) {
      const last = text.get(n)!.points.at(-1)!;
      out.push(`- ${n}: ${Object.entries(last.perTable).map(([t, b]) => `${t} ${kib(b)}`).join(", ")}`);
    }
    out.push("", "State read back with graph.getState:", "");
    for (const n of names) {
      const r = text.get(n)!.readBack;
      out.push(`- ${n}: ${r.ok ? "OK" : "FAIL"} (${r.detail})`);
      if (!r.ok) failures.push(`${n}: text thread read back: ${r.detail}`);
    }
    if (ours) {
      const last = text.get("ours")!.points.at(-1)!;
      targets.push({ name: `bytes on disk vs raw text, ${turns} turns`, goal: "<= 3x", measured: times(last.bytes, last.raw), pass: last.bytes <= 3 * last.raw });
    }

    // ---------------- 2. a ~100 KB image in every user message
    const images = new Map<PgSaverName, ChatRun>();
    const every = Array.from({ length: imageTurns }, (_, k) => k + 1);
    for (const name of names) {
      const h = withElements(await createPgSaver(name, server.adminUrl, `storage_img_${name}`));
      const run = await measureChat(h.saver, h.pool, "public", { turns: imageTurns, at: every, image: true });
      images.set(name, run);
      log(`${name}: ${imageTurns} turns with images in ${run.seconds.toFixed(1)}s, ${kib(run.points.at(-1)!.bytes)}; read back ${run.readBack.ok ? "OK" : "FAIL"}`);
      await h.db.drop();
    }
    out.push("", `## The same with a ~100 KB image in every user message (${imageTurns} turns)`, "");
    out.push(
      `Each HumanMessage's content is a text part and an image_url part (a data:image/png;base64 URL of ${IMAGE_BYTES.toLocaleString("en-US")} pseudo-random bytes, ${fmt(imageUrl(0).length / 1024, 1)} KiB, different per turn). ` +
        "Raw = texts + image URLs. Growth = bytes on disk added by that turn.",
      "",
    );
    out.push(`| turn | raw | ${names.map((n) => `${n} saver | ${n} growth`).join(" | ")} |`, `|--:|--:|${names.map(() => "--:|--:").join("|")}|`);
    for (let k = 0; k < imageTurns; k++) {
      const raw = images.get(names[0]!)!.points[k]!.raw;
      const cells = names.map((n) => {
        const pts = images.get(n)!.points;
        const grow = pts[k]!.bytes - (k ? pts[k - 1]!.bytes : 0);
        return `${kib(pts[k]!.bytes)} (${times(pts[k]!.bytes, pts[k]!.raw)}) | ${kib(grow)}`;
      });
      out.push(`| ${k + 1} | ${kib(raw)} | ${cells.join(" | ")} |`);
    }
    out.push("", "State read back with graph.getState:", "");
    for (const n of names) {
      const r = images.get(n)!.readBack;
      out.push(`- ${n}: ${r.ok ? "OK" : "FAIL"} (${r.detail})`);
      if (!r.ok) failures.push(`${n}: image thread read back: ${r.detail}`);
    }
    if (ours) {
      const pts = images.get("ours")!.points;
      const last = pts.at(-1)!;
      targets.push({ name: `bytes on disk vs raw text + images, ${imageTurns} turns with images`, goal: "<= 3x", measured: times(last.bytes, last.raw), pass: last.bytes <= 3 * last.raw });
    }

    // ---------------- 3. put and getTuple(latest): short vs long thread
    for (const name of names) {
      const h = handles.get(name)!;
      const run = await measureChat(h.saver, h.pool, "public", { turns: shortTurns, threadId: "short" });
      if (!run.readBack.ok) failures.push(`${name}: ${shortTurns}-turn thread read back: ${run.readBack.detail}`);
      await h.pool.query("ANALYZE");
    }
    const opts: CompareOptions = { rounds: args.rounds, batches: 8, batchSize: 10, warmup: 10 };
    const putOps = new Map<string, (i: number) => Promise<unknown>>();
    for (const name of names) {
      putOps.set(`${name} short`, await appender(handles.get(name)!.saver, "short"));
      putOps.set(`${name} long`, await appender(handles.get(name)!.saver, "chat"));
    }
    const contenders = (op: "put" | "getTuple") =>
      names.flatMap((name) =>
        (["short", "long"] as const).map((len) => ({
          name: `${name} ${len}`,
          op: op === "put" ? putOps.get(`${name} ${len}`)! : () => handles.get(name)!.saver.getTuple(latestOf(len === "short" ? "short" : "chat")),
        })),
      );
    const latency: Latency[] = [];
    for (const op of ["put", "getTuple"] as const) {
      const stats = await compare(contenders(op), opts);
      for (const name of names) {
        const s = stats.get(`${name} short`) as ContenderStats;
        const l = stats.get(`${name} long`) as ContenderStats;
        // Time per op long ÷ short = throughput short ÷ long.
        latency.push({ saver: name, op, shortP50: s.p50, longP50: l.p50, ratio: pairedRatio(s, l), p50Ratio: roundRatio(l, s, (r) => r.p50) });
      }
      log(`${op}: ${latency.filter((x) => x.op === op).map((x) => `${x.saver} ${fmt(x.shortP50, 3)} / ${fmt(x.longP50, 3)} ms`).join(", ")}`);
    }
    // What the latency loops read and wrote: the latest of each thread has its n + 1 messages.
    for (const name of names) {
      for (const [thread, n] of [["short", shortTurns], ["chat", turns]] as const) {
        const t = await handles.get(name)!.saver.getTuple(latestOf(thread));
        const msgs = (t?.checkpoint.channel_values as { messages?: BaseMessage[] } | undefined)?.messages;
        const ok = msgs?.length === 2 * n + 1 && checkMessages(msgs.slice(0, 2 * n), n, false).ok && /^extra-\d+$/.test(String(msgs[2 * n]?.id));
        if (!ok) failures.push(`${name}: after the latency loops, the latest checkpoint of the ${n}-turn thread does not hold its ${2 * n} messages + 1`);
      }
    }
    out.push("", `## put and getTuple(latest): ${shortTurns}-turn thread vs ${turns}-turn thread`, "");
    out.push(
      `Interleaved in one process (${opts.rounds} rounds x ${opts.batches} batches x ${opts.batchSize} ops per contender, alternating order). ` +
        "put: the thread's latest checkpoint plus one message (a new version from getNextVersion, the parent the current head; always the same base, so the thread keeps n + 1 messages). " +
        `p50 = median over rounds. ${turns}/${shortTurns} = time per op on the long thread ÷ on the short one: geometric mean of paired batches [95% bootstrap interval]; p50 ratio per round: median [min-max].`,
      "",
    );
    out.push(`| op | saver | p50 ${shortTurns} turns ms | p50 ${turns} turns ms | ${turns}/${shortTurns} [95% CI] | p50 ratio per round |`, "|---|---|--:|--:|--:|--:|");
    for (const x of latency) {
      out.push(`| ${x.op} | ${x.saver} | ${fmt(x.shortP50, 3)} | ${fmt(x.longP50, 3)} | ${fmtRatio(x.ratio)} | ${x.p50Ratio.median.toFixed(2)}x [${x.p50Ratio.min.toFixed(2)}-${x.p50Ratio.max.toFixed(2)}] |`);
      if (x.saver === "ours") {
        targets.push({
          name: `${x.op} on a ${turns}-turn thread vs ${shortTurns} turns`,
          goal: "<= 1.10x",
          measured: `${fmtRatio(x.ratio)}; sure (upper bound <= 1.10): ${x.ratio.hi <= 1.1 ? "yes" : "no"}`,
          // The project's rule: met unless the interval rules the goal out.
          pass: x.ratio.lo <= 1.1,
        });
      }
    }

    out.push("", "## Targets of issue 21 (ours)", "", "| target | goal | measured | result |", "|---|---|---|---|");
    for (const t of targets) out.push(`| ${t.name} | ${t.goal} | ${t.measured} | ${t.pass ? "PASS" : "FAIL"} |`);
    out.push("", failures.length ? `## Read-back checks: FAIL\n${failures.map((f) => `- ${f}`).join("\n")}` : "## Read-back checks: all OK");
    console.log(out.join("\n"));
    log(`done in ${((performance.now() - T0) / 1000).toFixed(0)}s`);
    if (failures.length) return 1;
    if (args.strict && (targets.some((t) => !t.pass) || !ours)) return 1;
    return 0;
  } finally {
    await dropAll();
    await server.stop();
  }
}
