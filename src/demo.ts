#!/usr/bin/env node
/**
 * `npm run demo`: the article's graph (START -> get_address -> END) run live
 * on thread "12345", then what the checkpointer stored, the way the article
 * walks through it: each checkpoint (id, parent, source, step,
 * channel_versions, updated channels), the writes stored under it (task,
 * channel, decoded value) and the blobs it introduced (channel, version, type,
 * decoded value). Run it again and the thread continues where it stopped: the
 * state survived the restart. `--fresh` starts the thread over.
 *
 * No database needed: without DATABASE_URL it uses the embedded one in
 * ./.langgraph-pg (a new folder starts from the empty database the package
 * ships, see src/db/snapshot.ts). Needs `@langchain/langgraph` (a devDependency: the demo runs
 * from the repository).
 */
import { Annotation, Command, END, START, StateGraph } from "@langchain/langgraph";
import { BIN, CONNECTION_OPTIONS, UsageError, connectionTarget, keyArg, parse, positionals, schemaOption } from "./cli/args.js";
import { connect } from "./cli/connect.js";
import { resolveUrl } from "./cli/mask.js";
import { EXIT, errorText, exitCodeOf } from "./cli/exit.js";
import { fields, styleFor, table, valueText, type Style } from "./cli/format.js";
import { exportThread } from "./ops/transfer.js";
import type { BlobRecord, CheckpointRecord, ExportRecord, WriteRecord } from "./ops/transfer-format.js";
import { toJsonSafe } from "./ops/json-safe.js";
import { commandWords, contextOf } from "./hint.js";
import { PostgresSaver } from "./ops/postgres-saver.js";

const HELP = `Usage: npm run demo -- [options]   (npm run -s demo -- --json: JSON alone)

Runs the graph of the article «Im Inneren von LangGraphs InMemorySaver» (see the
README's Sources), START -> get_address -> END, on a thread and prints what
the checkpointer stored: each checkpoint (id, parent, source, step, channel
versions, updated channels), the writes stored under it and the blobs it added.
Run it again: the thread continues from where the last run stopped.

Options:
  --fresh               delete the thread first and start over
  --thread <id>         thread id (default "12345", as in the article)
  --json                print what was stored as JSON
  --database-url <url>  a Postgres server (default: $DATABASE_URL)
  --data-dir <dir>      the embedded database folder (default ./.langgraph-pg)
  --schema <name>       Postgres schema (default public)
  -h, --help            this help

Exit codes: 0 ok, 1 failed, 2 bad usage, 3 schema newer than this code,
4 the embedded data folder is in use by another process.
Inspect afterwards with: npm run -s cli -- threads | history 12345 | show 12345`;

/** The article's state and node: a Command that sets both fields, then END. */
const AddressState = Annotation.Root({
  name: Annotation<string>(),
  address: Annotation<string>(),
});

function addressGraph(checkpointer: PostgresSaver) {
  return new StateGraph(AddressState)
    .addNode("get_address", () => new Command({ update: { name: "pavaneeshwar", address: "Hyderabad residency" } }), { ends: [END] })
    .addEdge(START, "get_address")
    .addEdge("get_address", END)
    .compile({ checkpointer });
}

interface DemoCheckpoint {
  id: string;
  parent: string | null;
  source: unknown;
  step: unknown;
  ts: unknown;
  channel_versions: Record<string, string>;
  /**
   * LangGraph.js does not store `updated_channels` (the Python article's
   * checkpoints have it); when absent it is derived: the channels whose new
   * version holds a value (a version bump that only consumed a channel stores
   * no blob row). On the article's run both give the same lists.
   */
  updated_channels: string[];
  updated_channels_stored: boolean;
  versions_seen: Record<string, Record<string, string>>;
  /** Writes stored under this checkpoint: what the tasks that ran from it produced. */
  writes: { task_id: string; idx: number; channel: string; type: string; value: unknown; task_path: string }[];
  /** Channel versions first referenced by this checkpoint, with their blob rows (`empty`: no row, the channel holds no value). */
  blobs: { channel: string; version: string; type: string; value: unknown }[];
}

/** The stored rows of the top-level namespace, grouped the way the article tells them. */
function walkthrough(records: ExportRecord[]): DemoCheckpoint[] {
  const cps = records.filter((r): r is CheckpointRecord => r.kind === "checkpoint" && r.checkpoint_ns === "");
  const writes = records.filter((r): r is WriteRecord => r.kind === "write" && r.checkpoint_ns === "");
  const blobs = new Map(records.filter((r): r is BlobRecord => r.kind === "blob" && r.checkpoint_ns === "").map((b) => [`${b.channel}\u0000${b.version}`, b]));
  const seen = new Set<string>();
  // Checkpoint ids are time-ordered (uuid6): oldest first.
  return cps.map((c) => {
    const versions = (c.checkpoint.channel_versions ?? {}) as Record<string, string>;
    const meta = (c.metadata ?? {}) as { source?: unknown; step?: unknown };
    const introduced: DemoCheckpoint["blobs"] = [];
    for (const [channel, version] of Object.entries(versions)) {
      const key = `${channel}\u0000${version}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const b = blobs.get(key);
      introduced.push({ channel, version: String(version), type: b?.type ?? "empty", value: b?.decoded });
    }
    const stored = c.checkpoint.updated_channels as string[] | undefined;
    return {
      id: c.checkpoint_id,
      parent: c.parent_checkpoint_id,
      source: meta.source,
      step: meta.step,
      ts: c.checkpoint.ts,
      channel_versions: versions,
      updated_channels: stored ?? introduced.filter((b) => b.type !== "empty").map((b) => b.channel).sort(),
      updated_channels_stored: stored !== undefined,
      versions_seen: (c.checkpoint.versions_seen ?? {}) as Record<string, Record<string, string>>,
      writes: writes
        .filter((w) => w.checkpoint_id === c.checkpoint_id)
        .map((w) => ({ task_id: w.task_id, idx: w.idx, channel: w.channel, type: w.type, value: w.decoded, task_path: w.task_path })),
      blobs: introduced,
    };
  });
}

/** Tagged JSON (from the export) as one line. */
const tagged = (v: unknown) => (v === undefined ? "" : JSON.stringify(v));

function printCheckpoint(c: DemoCheckpoint, n: number, of: number, st: Style, out: (s: string) => void): void {
  out(`\n${st.bold(`Checkpoint ${n} of ${of}`)}  ${st.cyan(c.id)}`);
  out(
    fields(
      [
        ["parent", c.parent ?? "(none: the first checkpoint of the thread)"],
        ["ts", String(c.ts)],
        ["source, step", `${String(c.source)}, ${String(c.step)}`],
        ["updated_channels", `${c.updated_channels.join(", ") || "(none)"}${c.updated_channels_stored ? "" : st.dim("  (derived: the new versions that hold a value)")}`],
      ],
      st,
      "  ",
    ),
  );
  out(`  ${st.dim("channel_versions (the latest version of every channel)")}`);
  out(table(["CHANNEL", "VERSION"], Object.entries(c.channel_versions).map(([ch, v]) => [ch, v]), st, "    "));
  const seen = Object.entries(c.versions_seen).flatMap(([node, chans]) => Object.entries(chans ?? {}).map(([ch, v]) => [node, ch, String(v)]));
  out(`  ${st.dim("versions_seen (what each node had seen when it last ran)")}`);
  out(seen.length === 0 ? "    (none yet)" : table(["NODE", "CHANNEL", "VERSION"], seen, st, "    "));
  out(`  ${st.dim("writes stored under this checkpoint (by the tasks that ran from it)")}`);
  out(
    c.writes.length === 0
      ? "    (none: nothing ran from it yet)"
      : table(["TASK", { header: "IDX", align: "right" }, "CHANNEL", "VALUE", "TASK PATH"], c.writes.map((w) => [w.task_id, String(w.idx), w.channel, tagged(w.value), w.task_path]), st, "    "),
  );
  out(`  ${st.dim("blobs it added (one per new channel version that holds a value)")}`);
  out(
    c.blobs.length === 0
      ? "    (none)"
      : table(["CHANNEL", "VERSION", "TYPE", "VALUE"], c.blobs.map((b) => [b.channel, b.version, b.type, b.type === "empty" ? "(consumed: no value, no row)" : tagged(b.value)]), st, "    "),
  );
}

async function main(argv: string[]): Promise<number> {
  const out = (s: string) => process.stdout.write(`${s}\n`);
  let url: string | undefined;
  try {
    const { values, positionals: rest } = parse("demo", argv, {
      ...CONNECTION_OPTIONS,
      fresh: { type: "boolean" },
      json: { type: "boolean" },
      thread: { type: "string" },
    });
    if (values.help) {
      out(HELP);
      return EXIT.OK;
    }
    positionals("demo", rest, [], 0);
    const schema = schemaOption("demo", values.schema);
    const threadId = keyArg("demo", { what: "--thread", value: values.thread ?? "12345", limit: "thread_id" });
    const target = connectionTarget("demo", values);
    url = resolveUrl(target);
    // No `notice`: a demo, its output says where the data is, and it is not refused in production.
    const conn = await connect(target, { create: true, applicationName: "langgraph-checkpoint-pg:demo" });
    try {
      const saver = new PostgresSaver(conn.pool, { schema });
      await saver.setup();
      const graph = addressGraph(saver);
      const config = { configurable: { thread_id: threadId } };
      if (values.fresh) await saver.deleteThread(threadId);

      const before = await exportThread({ pool: conn.pool, schema, threadId });
      const knownIds = new Set(before.filter((r) => r.kind === "checkpoint").map((r) => (r as CheckpointRecord).checkpoint_id));
      const previous = knownIds.size > 0 ? await graph.getState(config) : undefined;

      const result = await graph.invoke({}, config);

      // Decoded views: the walkthrough prints values.
      const after = await exportThread({ pool: conn.pool, schema, threadId, decoded: true });
      const all = walkthrough(after);
      const added = all.filter((c) => !knownIds.has(c.id));
      const state = (await graph.getState(config)).values as Record<string, unknown>;

      if (values.json) {
        out(
          JSON.stringify(
            {
              thread_id: threadId,
              database: conn.label,
              schema,
              fresh: values.fresh === true,
              continued: knownIds.size > 0,
              previous: previous ? { checkpoints: knownIds.size, head: previous.config.configurable?.checkpoint_id, state: toJsonSafe(previous.values) } : null,
              result: toJsonSafe(result),
              checkpoints: added,
              total_checkpoints: all.length,
              state: toJsonSafe(state),
            },
            null,
            2,
          ),
        );
        return EXIT.OK;
      }

      const st = styleFor(process.stdout);
      // The CLI commands suggested at the end act on the same database and schema (src/hint.ts).
      const context = contextOf(target);
      const words = (...w: string[]) => commandWords({ words: w, schema }, context).join(" ");
      out(st.bold(`LangGraph checkpoints, live: START -> get_address -> END on thread ${JSON.stringify(threadId)}`));
      out(fields([["stored in", `${conn.label}, schema ${JSON.stringify(schema)}`]], st));
      if (previous) {
        out(
          `\nThe thread already had ${knownIds.size} checkpoint(s) from an earlier run, read back after a restart:\n` +
            `  state ${valueText(previous.values)} at checkpoint ${String(previous.config.configurable?.checkpoint_id)}\n` +
            "This run continues the thread from there (new input: source input, the next step number).",
        );
      } else {
        out(`\nA new thread${values.fresh ? " (--fresh: the old one was deleted)" : ""}. One invoke() stores three checkpoints, as in the article.`);
      }
      // Numbered along the thread: a continued thread's run shows checkpoints 4, 5, 6 of 6.
      added.forEach((c, i) => printCheckpoint(c, all.length - added.length + i + 1, all.length, st, out));
      out(`\n${st.bold("State now")}  ${valueText(state)}`);
      out(`The thread holds ${all.length} checkpoints in total (${added.length} from this run).`);
      out(
        `\nRun ${st.cyan("npm run demo")} again: the state survives the restart and the thread continues.\n` +
          `Start over with ${st.cyan("npm run demo -- --fresh")}. Look around with ` +
          `${st.cyan(`npm run -s cli -- ${words("history", threadId)}`)} or ${st.cyan(words("show", threadId))}` +
          `${context.databaseUrl ? " (with the same --database-url)" : ""}\n` +
          `(in this clone, \`npm run -s cli --\` runs the command a project that installed the package runs as \`npx ${BIN}\`).`,
      );
      return EXIT.OK;
    } finally {
      await conn.close().catch(() => undefined);
    }
  } catch (err) {
    process.stderr.write(`demo: ${errorText(err, url)}${err instanceof UsageError ? "\nSee `npm run demo -- --help`." : ""}\n`);
    return exitCodeOf(err);
  }
}

process.exitCode = await main(process.argv.slice(2));
