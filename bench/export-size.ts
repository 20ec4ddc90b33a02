/**
 * How large a thread's export is next to what the thread takes on disk (issue
 * 27: "a 200-turn thread's export no larger than its size on disk"):
 *
 *   DATABASE_URL=postgres://... node --import tsx bench/export-size.ts [turns]
 *
 * One chat thread of the storage bench's workload (bench/storage.ts: English-like
 * text, ~300 characters a question, ~600 an answer, default saver options) in a
 * fresh database, then exported as the CLI exports it (cli/transfer.ts
 * `exportThreads`): plain, gzipped (`-o x.jsonl.gz`) and with `--decoded`.
 * On disk = `pg_total_relation_size` (heap, TOAST, indexes) of every table of
 * the schema, as written: all of it (the storage bench's figure), and what the
 * thread added to the freshly migrated, empty tables (the thread's own share).
 * The gzipped file is then imported into another schema and read back.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BaseMessage } from "@langchain/core/messages";
import { exportThreads, importThreads } from "../src/cli/transfer.js";
import { migrate, PostgresSaver } from "../src/index.js";
import { createDatabase, dropAll, startServer } from "./db.js";
import { chatGraph, checkMessages, measureChat, tableSizes } from "./storage.js";

const turns = Number(process.argv[2] ?? 200);
if (!Number.isSafeInteger(turns) || turns < 1) throw new Error(`turns: expected a positive integer, got ${process.argv[2]}`);

const kib = (b: number) => `${(b / 1024).toFixed(1)} KiB`;
const server = await startServer();
const dir = mkdtempSync(join(tmpdir(), "lgpg-export-size-"));
try {
  const db = await createDatabase(server.adminUrl, "export_size");
  const pool = db.pool();
  const schema = "public";
  await migrate({ pool, schema });
  const total = async () => Object.values(await tableSizes(pool, schema)).reduce((a, b) => a + b, 0);
  const empty = await total();
  const run = await measureChat(new PostgresSaver(pool, { schema }), pool, schema, { turns, threadId: "chat" });
  if (!run.readBack.ok) throw new Error(`read back: ${run.readBack.detail}`);
  const onDisk = run.points.at(-1)!.bytes;
  const files = { plain: join(dir, "chat.jsonl"), gz: join(dir, "chat.jsonl.gz"), decoded: join(dir, "chat-decoded.jsonl") };
  const target = { pool, schema };
  await exportThreads(target, ["chat"], files.plain, "bench");
  await exportThreads(target, ["chat"], files.gz, "bench");
  await exportThreads(target, ["chat"], files.decoded, "bench", { decoded: true });
  const size = (f: string) => statSync(f).size;

  // What an import of the gzipped file reads back.
  await migrate({ pool, schema: "restored" });
  await importThreads({ pool, schema: "restored" }, files.gz, { ifExists: "fail" }, { onPartial: () => undefined });
  const state = await chatGraph(new PostgresSaver(pool, { schema: "restored" })).getState({ configurable: { thread_id: "chat" } });
  const restored = checkMessages((state.values as { messages?: BaseMessage[] }).messages, turns, false);

  const rows: [string, number][] = [
    ["raw text (the messages)", run.points.at(-1)!.raw],
    ["on disk: every table of the schema", onDisk],
    ["on disk: what the thread added", onDisk - empty],
    ["`export -o chat.jsonl`", size(files.plain)],
    ["`export -o chat.jsonl.gz`", size(files.gz)],
    ["`export --decoded -o chat.jsonl`", size(files.decoded)],
  ];
  console.log(`# Export of a ${turns}-turn chat (bench/export-size.ts)\n`);
  console.log("| | bytes | vs on disk (all) |\n|---|--:|--:|");
  for (const [what, bytes] of rows) console.log(`| ${what} | ${kib(bytes)} | ${(bytes / onDisk).toFixed(2)}x |`);
  console.log(`\nImported from the .gz into another schema, read back with graph.getState: ${restored.ok ? "OK" : "FAIL"} (${restored.detail})`);
  if (!restored.ok) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
  await dropAll();
  await server.stop();
}
