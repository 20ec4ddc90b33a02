/**
 * Part of `npm run test:long` (README "Tests"): prune-race.test.ts's race (issue 26, row 1) without
 * instrumentation, at length: a writer re-adding old values to a 1,500-checkpoint thread while
 * prune loops. prune-race.test.ts forces each order of the race; this one lets scheduling choose.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { describe, expect, it } from "vitest";
import { migrate, PostgresSaver, prune } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { testPool, withTestDatabase } from "../helpers/db.js";
import { tid } from "../helpers/graphs.js";

const db = withTestDatabase("prune_race_stress");

const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id, checkpoint_ns: "" } });
let counter = 0;
/** A fresh version string (short form, as the saver makes them). */
const ver = () => `-a${(++counter).toString(36)}.00000001`;

describe("stress, no instrumentation", () => {
  it("row 1: a 1,500-checkpoint thread pruned while a writer goes on re-adding old values: every checkpoint left reads back as written", { timeout: 300_000 }, async () => {
    await migrate({ pool: db.pool });
    const threadId = tid("stress");
    const pool2 = testPool({ connectionString: db.url, max: 4 });
    try {
      const writer = new PostgresSaver(pool2, { elementStorage: true });
      const written = new Map<string, string[]>();
      let seed = 7;
      const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
      const VALUES = Array.from({ length: 400 }, (_, i) => `value ${i} ${"x".repeat(i % 50)}`);
      let config = cfg(threadId);
      const step = async (i: number) => {
        // Ten of the values at random: each put drops most of its parent's and brings back older ones.
        const items = VALUES.filter(() => rand() < 0.025);
        if (items.length === 0) items.push(VALUES[i % VALUES.length]!);
        const v = ver();
        config = await writer.put(config, makeCheckpoint({ items }, { items: v }), meta(i - 1), { items: v });
        written.set(config.configurable!.checkpoint_id as string, items);
      };
      for (let i = 0; i < 1500; i++) await step(i);
      // Prune to the head while the writer goes on.
      let running = true;
      const writing = (async () => {
        for (let i = 1500; running || i < 1600; i++) await step(i);
      })();
      // A prune skips a head the writer holds, so how much one call deletes depends on scheduling
      // (one 200-checkpoint chunk on a busy machine): prune again until most of the history went.
      let pruned = 0;
      for (let calls = 0; pruned <= 1000 && calls < 100; calls++) {
        pruned += (await prune({ pool: db.pool, keepLast: 1, grace: 0, threadIds: [threadId], chunkSize: 200 })).checkpoints;
      }
      running = false;
      await writing;
      expect(pruned).toBeGreaterThan(1000);
      const reader = new PostgresSaver(pool2, { elementStorage: true });
      let read = 0;
      for await (const t of reader.list(cfg(threadId))) {
        const want = written.get(t.checkpoint.id);
        expect(want, `checkpoint ${t.checkpoint.id} was written by this test`).toBeDefined();
        expect(t.checkpoint.channel_values).toEqual({ items: want });
        read++;
      }
      expect(read).toBeGreaterThanOrEqual(1);
      const head = (await reader.getTuple(cfg(threadId)))!;
      expect(head.checkpoint.id).toBe(config.configurable!.checkpoint_id);
    } finally {
      await pool2.end();
    }
  });
});
