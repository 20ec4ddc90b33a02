/**
 * What prune tests measure: a thread's rows and bytes, prune's counts of what it deleted, and a
 * chat whose messages live in a DeltaChannel. Shared by test/ops/prune.test.ts and the long
 * test/ops/prune-long-thread.long.test.ts.
 *
 * @example
 * ```ts
 * const before = await tableSizes(db.pool, [thread]);
 * const r = await prune({ pool: db.pool, keepLast: 1, grace: 0, threadIds: [thread] });
 * expectDeleted(r, before, await tableSizes(db.pool, [thread]));
 * ```
 */
import { AIMessage } from "@langchain/core/messages";
import { END, MessagesDeltaValue, START, StateGraph, StateSchema } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { expect } from "vitest";
import type { PruneCounts, PruneResult } from "../../src/index.js";

/** A chat whose messages live in a DeltaChannel (LangGraph's MessagesDeltaValue, default snapshot frequency). */
export function deltaChatGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(new StateSchema({ messages: MessagesDeltaValue }))
    .addNode("bot", (s) => ({ messages: [new AIMessage({ id: `ai-${s.messages.length}`, content: `echo ${String(s.messages.at(-1)?.content)}` })] }))
    .addEdge(START, "bot")
    .addEdge("bot", END)
    .compile({ checkpointer });
}

export type Sizes = Pick<PruneCounts, "checkpoints" | "writes" | "blobs" | "checkpointBytes" | "writeBytes" | "blobBytes">;

/** Rows and bytes of the three tables, of `threadIds` (all threads if undefined), in `schema`. */
export async function tableSizes(pool: pg.Pool, threadIds?: string[], schema = "public"): Promise<Sizes> {
  const s = pg.escapeIdentifier(schema);
  const part = (table: string) =>
    `(SELECT count(*)::int AS n, coalesce(sum(pg_column_size(t.*)), 0)::bigint AS b FROM ${s}.${table} t WHERE $1::text[] IS NULL OR thread_id = ANY ($1))`;
  const { rows } = await pool.query(
    `SELECT c.n AS cn, c.b AS cb, w.n AS wn, w.b AS wb, b.n AS bn, b.b AS bb
       FROM ${part("checkpoints")} c, ${part("checkpoint_writes")} w, ${part("checkpoint_blobs")} b`,
    [threadIds ?? null],
  );
  const r = rows[0];
  return { checkpoints: r.cn, writes: r.wn, blobs: r.bn, checkpointBytes: Number(r.cb), writeBytes: Number(r.wb), blobBytes: Number(r.bb) };
}

export const deleted = (r: PruneResult): Sizes => ({
  checkpoints: r.checkpoints,
  writes: r.writes,
  blobs: r.blobs,
  checkpointBytes: r.checkpointBytes,
  writeBytes: r.writeBytes,
  blobBytes: r.blobBytes,
});

/**
 * Prune's counts equal what disappeared from the tables. Bytes: pg_column_size of
 * a row read by another plan can differ by a few bytes of tuple alignment.
 */
export function expectDeleted(r: PruneResult, before: Sizes, after: Sizes): void {
  const want = minus(before, after);
  const got = deleted(r);
  expect({ ...got, checkpointBytes: 0, writeBytes: 0, blobBytes: 0 }).toEqual({ ...want, checkpointBytes: 0, writeBytes: 0, blobBytes: 0 });
  expect(Math.abs(got.checkpointBytes - want.checkpointBytes)).toBeLessThanOrEqual(4 * want.checkpoints);
  expect(Math.abs(got.writeBytes - want.writeBytes)).toBeLessThanOrEqual(4 * want.writes);
  expect(Math.abs(got.blobBytes - want.blobBytes)).toBeLessThanOrEqual(4 * want.blobs);
}

const minus = (a: Sizes, b: Sizes): Sizes => ({
  checkpoints: a.checkpoints - b.checkpoints,
  writes: a.writes - b.writes,
  blobs: a.blobs - b.blobs,
  checkpointBytes: a.checkpointBytes - b.checkpointBytes,
  writeBytes: a.writeBytes - b.writeBytes,
  blobBytes: a.blobBytes - b.blobBytes,
});
