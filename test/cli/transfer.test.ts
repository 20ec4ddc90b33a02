/**
 * Issue 27: `threads` says what its SIZE column counts.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
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
