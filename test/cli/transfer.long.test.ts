/**
 * Issue 27: export and import carry each element once. A chat thread of the
 * bench's workload (bench/storage.ts) exports to no more than it takes on disk,
 * gzipped when the file name ends in `.gz`, and reads back identical after
 * export -> delete -> import; a thread written with whole values is stored by
 * content on import (or byte for byte with --keep-whole); `threads` says what
 * its SIZE column counts.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BaseCheckpointSaver, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { afterAll, describe, expect, it } from "vitest";
import { chatGraph, measureChat, tableSizes } from "../../bench/storage.js";
import { listThreads, migrate, PostgresSaver, type ImportResult } from "../../src/index.js";
import { ELEMENTS_CHANNEL, REFS_TYPE } from "../../src/saver/elements.js";
import { runCli } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("transfer");
const dir = mkdtempSync(join(tmpdir(), "lgpg-transfer-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const pg = (schema: string) => ["--database-url", db.url, "--schema", schema];
const cfg = (thread_id: string) => ({ configurable: { thread_id, checkpoint_ns: "" } });
const firstLine = (r: { stderr: string }) => r.stderr.split("\n")[0]!;

async function listAll(saver: BaseCheckpointSaver, thread: string): Promise<CheckpointTuple[]> {
  const out: CheckpointTuple[] = [];
  for await (const t of saver.list(cfg(thread))) out.push(t);
  return out;
}

/** What LangGraph reads back: the state, and every tuple of the thread. */
async function readBack(saver: PostgresSaver, thread: string) {
  const state = await chatGraph(saver).getState(cfg(thread));
  return { state: JSON.parse(JSON.stringify(state)) as unknown, tuples: await listAll(saver, thread) };
}

const sizeOf = async (schema: string) => Object.values(await tableSizes(db.pool, schema)).reduce((a, b) => a + b, 0);

describe("export and import carry each element once", () => {
  it("a 50-turn chat exports to no more than it added to disk, gzipped smaller still; export -> delete -> import reads back identical", async () => {
    const schema = "chat";
    await migrate({ pool: db.pool, schema });
    // Size on disk = what the thread added to every table of the schema (pg_total_relation_size: heap, TOAST,
    // indexes), as the bench measures it, less the empty tables' own pages: the thread's share alone.
    const empty = await sizeOf(schema);
    const saver = new PostgresSaver(db.pool, { schema });
    const run = await measureChat(saver, db.pool, schema, { turns: 50, threadId: "chat" });
    expect(run.readBack.ok, run.readBack.detail).toBe(true);
    const onDisk = run.points.at(-1)!.bytes - empty;
    const before = await readBack(saver, "chat");

    const plain = join(dir, "chat.jsonl");
    const gz = join(dir, "chat.jsonl.gz");
    const [a, b] = await Promise.all([runCli(["export", "chat", ...pg(schema), "-o", plain]), runCli(["export", "chat", ...pg(schema), "-o", gz])]);
    expect([a.code, b.code], a.stderr + b.stderr).toEqual([0, 0]);
    const sizes = { raw: statSync(plain).size, gz: statSync(gz).size, onDisk };
    console.log(`50-turn chat: export ${sizes.raw} B, .gz ${sizes.gz} B, on disk ${sizes.onDisk} B`);
    expect(sizes.raw).toBeLessThanOrEqual(sizes.onDisk);
    expect(sizes.gz).toBeLessThan(sizes.raw / 3);
    expect(readFileSync(gz).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    // No decoded views unless asked for; the lines are what import needs.
    const records = readFileSync(plain, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(records.some((r) => "decoded" in r)).toBe(false);

    await saver.deleteThread("chat");
    expect(await saver.getTuple(cfg("chat"))).toBeUndefined();
    const back = await runCli(["import", gz, ...pg(schema), "--json"]);
    expect(back.code, back.stderr).toBe(0);
    // Stored by content already: imported as it was, nothing compacted.
    const [result] = (JSON.parse(back.stdout) as { imported: ImportResult[] }).imported;
    expect(result).toEqual({ threadId: "chat", status: "imported", checkpoints: 150, writes: expect.any(Number), blobs: expect.any(Number) });
    // A new saver (nothing remembered) reads the same state and history.
    expect(await readBack(new PostgresSaver(db.pool, { schema }), "chat")).toEqual(before);
    // And the thread goes on.
    await chatGraph(saver).invoke({ messages: [{ role: "user", content: "one more" }] }, cfg("chat"));
    expect(((await saver.getTuple(cfg("chat")))!.checkpoint.channel_values.messages as unknown[]).length).toBe(102);
  });

  it("gzip on stdin imports too; a cut gzip file writes nothing and says so", async () => {
    const schema = "cut";
    await migrate({ pool: db.pool, schema });
    const saver = new PostgresSaver(db.pool, { schema });
    await measureChat(saver, db.pool, schema, { turns: 3, threadId: "c" });
    const gz = join(dir, "c.jsonl.gz");
    expect((await runCli(["export", "c", ...pg(schema), "-o", gz])).code).toBe(0);
    const cut = join(dir, "cut.jsonl.gz");
    const bytes = readFileSync(gz);
    writeFileSync(cut, bytes.subarray(0, bytes.length - 200));
    await Promise.all(["cut_into", "stdin_into"].map((s) => migrate({ pool: db.pool, schema: s })));
    const [r1, r2, r3] = await Promise.all([
      runCli(["import", cut, ...pg("cut_into")]),
      runCli(["import", ...pg("cut_into")], { input: bytes.subarray(0, bytes.length - 200) }),
      runCli(["import", ...pg("stdin_into")], { input: bytes }),
    ]);
    expect(r1.code).toBe(1);
    expect(firstLine(r1)).toMatch(/cannot read .*cut\.jsonl\.gz \(gzip\) after line \d+: unexpected end of file/);
    expect(r2.code).toBe(1);
    expect(firstLine(r2)).toMatch(/cannot read stdin \(gzip\) after line \d+: unexpected end of file/);
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM cut_into.checkpoint_blobs");
    expect(rows[0].n).toBe(0);
    expect(r3.code, r3.stderr).toBe(0);
    expect(await readBack(new PostgresSaver(db.pool, { schema: "stdin_into" }), "c")).toEqual(await readBack(saver, "c"));
  });
});

describe("import stores whole values by content (element storage is the default)", () => {
  it("a thread written with elementStorage: false imports with its lists by their elements, reading the same; --keep-whole imports byte for byte", async () => {
    await Promise.all(["whole", "whole_into", "whole_kept"].map((schema) => migrate({ pool: db.pool, schema })));
    const source = new PostgresSaver(db.pool, { schema: "whole", elementStorage: false });
    await measureChat(source, db.pool, "whole", { turns: 5, threadId: "w" });
    const before = await readBack(source, "w");
    const listTypes = async (schema: string) =>
      (await db.pool.query(`SELECT DISTINCT type FROM "${schema}".checkpoint_blobs WHERE thread_id = 'w' AND channel = 'messages'`)).rows.map((r) => r.type as string);
    expect(await listTypes("whole")).toEqual(["msgpack"]);

    const file = join(dir, "whole.jsonl");
    expect((await runCli(["export", "w", ...pg("whole"), "-o", file])).code).toBe(0);
    const [into, kept] = await Promise.all([runCli(["import", file, ...pg("whole_into")]), runCli(["import", file, ...pg("whole_kept"), "--keep-whole"])]);
    expect([into.code, kept.code], into.stderr + kept.stderr).toEqual([0, 0]);
    expect(into.stdout).toMatch(/^Imported 1 thread\(s\) \(15 checkpoints, \d+ writes, \d+ blobs\) into schema "whole_into" of \S+; stored \d+ value\(s\) of 1 thread\(s\) by content \(\S+ k?B -> \S+ k?B\)\n$/);
    expect(kept.stdout).not.toMatch(/by content/);

    // Converted: the lists are refs, their elements rows of their own; whole as exported with --keep-whole.
    expect(await listTypes("whole_into")).toEqual([REFS_TYPE]);
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM whole_into.checkpoint_blobs WHERE thread_id = 'w' AND channel = $1`, [ELEMENTS_CHANNEL]);
    expect(rows[0].n).toBe(10);
    expect(await listTypes("whole_kept")).toEqual(["msgpack"]);
    const all = async (schema: string) => (await db.pool.query(`SELECT to_jsonb(b) AS r FROM "${schema}".checkpoint_blobs b ORDER BY channel, version`)).rows;
    expect(await all("whole_kept")).toEqual(await all("whole"));
    // Either way, LangGraph reads the same.
    expect(await readBack(new PostgresSaver(db.pool, { schema: "whole_into" }), "w")).toEqual(before);
    expect(await readBack(new PostgresSaver(db.pool, { schema: "whole_kept" }), "w")).toEqual(before);
  });
});

describe("threads", () => {
  it("SIZE counts the thread's values as stored (compressed where Postgres compressed them), each element row once, and says so", async () => {
    const schema = "sizes";
    await migrate({ pool: db.pool, schema });
    // One thread with whole lists (compressed by TOAST), one by their elements (each element row once).
    await measureChat(new PostgresSaver(db.pool, { schema, elementStorage: false }), db.pool, schema, { turns: 5, threadId: "whole" });
    await measureChat(new PostgresSaver(db.pool, { schema }), db.pool, schema, { turns: 5, threadId: "elements" });
    const stored = async (thread: string) =>
      Number(
        (
          await db.pool.query(
            `SELECT (SELECT sum(pg_column_size(checkpoint) + pg_column_size(metadata) + coalesce(pg_column_size(metadata_raw), 0) + coalesce(pg_column_size(unversioned_values), 0))
                       FROM sizes.checkpoints WHERE thread_id = $1)
                  + (SELECT coalesce(sum(pg_column_size(value)), 0) FROM sizes.checkpoint_writes WHERE thread_id = $1)
                  + (SELECT coalesce(sum(pg_column_size(value)), 0) FROM sizes.checkpoint_blobs WHERE thread_id = $1) AS n`,
            [thread],
          )
        ).rows[0].n,
      );
    const summaries = await listThreads({ pool: db.pool, schema });
    for (const thread of ["whole", "elements"]) expect(summaries.find((t) => t.threadId === thread)!.bytes).toBe(await stored(thread));
    // Whole lists are compressed on disk: SIZE counts them so, not as their uncompressed bytes.
    const { rows } = await db.pool.query(`SELECT sum(octet_length(value))::int AS raw, sum(pg_column_size(value))::int AS stored FROM sizes.checkpoint_blobs WHERE thread_id = 'whole'`);
    expect(rows[0].stored).toBeLessThan(rows[0].raw);

    const [printed, help] = await Promise.all([runCli(["threads", ...pg(schema)]), runCli(["threads", "--help"])]);
    expect(printed.code, printed.stderr).toBe(0);
    const lines = printed.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^THREAD\s+CHECKPOINTS\s+NAMESPACES\s+WRITES\s+BLOBS\s+SIZE\s+LAST UPDATE/);
    expect(lines.at(-1)).toBe(
      "SIZE: the thread's values as stored (compressed where Postgres compressed them; each element row once, however many values name it); keys, row headers and indexes not counted",
    );
    expect(help.stdout).toMatch(/SIZE is\s+what the thread's values take as stored/);
  });
});
