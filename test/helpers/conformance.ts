/**
 * The official conformance suite (`@langchain/langgraph-checkpoint-validation`), run once in
 * full, and a differential of it for every other saver, storage form, engine or connection path.
 *
 * **In full** ({@link conformance}, test/saver/conformance.test.ts only, default options): every
 * test of the suite, plus its opt-in delta-channel suite. 649 of its 726 tests are `list`: one
 * test per combination of five arguments (thread, namespace, limit, before, filter), 648 in all,
 * each one `list` call on the same eight stored tuples (four of the six thread choices even name
 * the same thread). That is where `list`'s arguments are checked.
 *
 * **Differential** ({@link conformanceDifferential}): the suite's put, putWrites, getTuple and
 * deleteThread tests and the delta-channel suite, each in full (77 + 8 tests: these write and read
 * values, the part that differs between storage forms, lineage modes and engines); and instead of
 * the 648 `list` combinations, {@link listShapes}: each statement `list` can send once (every
 * combination of which arguments are given: 48, src/saver/sql/read.ts builds the statement from
 * them), on tuples of the suite's shape, each result compared with what getTuple reads; plus the
 * migration of pending sends by `list`. What the storage form changes in `list` is how it decodes
 * values, which every shape with a tuple to return exercises; what an engine or a connection path
 * (PGlite, PgBouncer without prepared statements) changes is how each statement runs, which every
 * shape exercises. Run where: whole values, encrypted elements, linear lineage
 * (test/saver/conformance-*.test.ts), an adopted schema (test/ops/adopt.test.ts), PGlite
 * (test/db/pglite.test.ts), PgBouncer (test/db/pgbouncer.test.ts).
 *
 * @example
 * ```ts
 * conformanceDifferential("langgraph-checkpoint-pg (whole values)", "conformance_whole", { elementStorage: false });
 * ```
 */
import { deltaChannelHistoryTests, specTest, validate, type CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { TASKS, uuid6, type BaseCheckpointSaver, type Checkpoint, type CheckpointMetadata, type CheckpointTuple } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver, type PostgresSaverOptions } from "../../src/index.js";
import { withTestDatabase } from "./db.js";

/** The whole suite, with savers made with `options` on a database of the calling file. The saver's name is our own: the suite skips some tests for some savers it knows. */
export function conformance(name: string, database: string, options?: PostgresSaverOptions): void {
  const initializer = onTestDatabase(name, database, options);
  validate(initializer);
  deltaChannelHistoryTests(initializer);
}

/** {@link differential} with savers made with `options` on a database of the calling file. */
export function conformanceDifferential(name: string, database: string, options?: PostgresSaverOptions): void {
  differential(onTestDatabase(name, database, options));
}

/** The suite less its 648 `list` combinations, and {@link listShapes} instead (see the file's comment). */
export function differential<T extends BaseCheckpointSaver>(initializer: CheckpointSaverTestInitializer<T>): void {
  specTest(initializer, ["put", "putWrites", "getTuple", "deleteThread"]);
  deltaChannelHistoryTests(initializer);
  listShapes(initializer);
}

function onTestDatabase(name: string, database: string, options?: PostgresSaverOptions): CheckpointSaverTestInitializer<PostgresSaver> {
  const db = withTestDatabase(database);
  return {
    checkpointerName: name,
    beforeAllTimeout: 60_000,
    async beforeAll() {
      await migrate({ pool: db.pool });
    },
    async createCheckpointer() {
      // One live checkpointer at a time (the suite's contract): a clean slate each time.
      await db.pool.query("TRUNCATE checkpoints, checkpoint_writes, checkpoint_blobs, checkpoint_heads");
      return new PostgresSaver(db.pool, options);
    },
  };
}

type ListOptions = { limit?: number; before?: RunnableConfig; filter?: Record<string, unknown> };

/**
 * `list` once per statement it can send: every combination of given and absent arguments (thread,
 * namespace, limit, before; filter absent, empty or not), 48, on the suite's tuples (two threads,
 * each with a parent and a child in the root namespace and in "child"; lists as values, a pending
 * send and a write of a list), each result compared with the stored tuples getTuple reads, as the
 * suite's `list` tests compare them.
 */
function listShapes<T extends BaseCheckpointSaver>(initializer: CheckpointSaverTestInitializer<T>): void {
  describe(`${initializer.checkpointerName}#list, each statement once`, () => {
    let saver: T;
    const stored: CheckpointTuple[] = [];
    beforeAll(async () => {
      saver = await initializer.createCheckpointer();
      for (let t = 0; t < 2; t++) {
        const thread_id = uuid6(3);
        for (const checkpoint_ns of ["", "child"]) {
          const parent = checkpoint(uuid6(3), { animals: ["dog"] }, { animals: 1 });
          let config = await saver.put({ configurable: { thread_id, checkpoint_ns } }, parent, { source: "input", step: -1, parents: {} }, { animals: 1 });
          await saver.putWrites(config, [[TASKS, ["add_fish"]]], "pending_sends_task");
          stored.push((await saver.getTuple(config))!);
          const child = checkpoint(uuid6(3), { animals: ["fish", "dog"] }, { animals: 2 });
          config = await saver.put(config, child, { source: "loop", step: 0, parents: { [checkpoint_ns]: parent.id } }, { animals: 2 });
          await saver.putWrites(config, [["animals", ["fish", "dog"]]], "add_fish");
          stored.push((await saver.getTuple(config))!);
        }
      }
    });
    afterAll(async () => {
      await initializer.destroyCheckpointer?.(saver);
    });

    const shapes: { thread: boolean; ns: boolean; limit: boolean; before: boolean; filter: "absent" | "empty" | "given" }[] = [];
    for (const thread of [false, true])
      for (const ns of [false, true])
        for (const limit of [false, true])
          for (const before of [false, true]) for (const filter of ["absent", "empty", "given"] as const) shapes.push({ thread, ns, limit, before, filter });

    it.each(shapes)("thread $thread, namespace $ns, limit $limit, before $before, filter $filter", async (shape) => {
      // The second thread's parent in "child": before it, all of the first thread and the second's root namespace.
      const pivot = stored[6]!;
      const thread_id = shape.thread ? pivot.config.configurable!.thread_id : undefined;
      const checkpoint_ns = shape.ns ? "child" : undefined;
      const options: ListOptions = {
        ...(shape.limit ? { limit: 1 } : {}),
        ...(shape.before ? { before: pivot.config } : {}),
        ...(shape.filter === "empty" ? { filter: {} } : shape.filter === "given" ? { filter: { source: "loop" } } : {}),
      };
      const expected = stored.filter(
        (t) =>
          (thread_id === undefined || t.config.configurable!.thread_id === thread_id) &&
          (checkpoint_ns === undefined || t.config.configurable!.checkpoint_ns === checkpoint_ns) &&
          (!shape.before || t.checkpoint.id < pivot.checkpoint.id) &&
          (shape.filter !== "given" || t.metadata!.source === "loop"),
      );
      const listed: CheckpointTuple[] = [];
      for await (const tuple of saver.list({ configurable: { thread_id, checkpoint_ns } }, options)) listed.push(tuple);
      expect(listed).toHaveLength(shape.limit ? Math.min(1, expected.length) : expected.length);
      const byId = new Map(expected.map((t) => [t.checkpoint.id, t]));
      for (const tuple of listed) expect(tuple).toEqual(byId.get(tuple.checkpoint.id));
    });

    it("migrates pending sends of a checkpoint older than v4 into the next one's values", async () => {
      const thread_id = uuid6(3);
      const v1 = (id: string, ts: string): Checkpoint => ({ v: 1, id, ts, channel_values: {}, channel_versions: {}, versions_seen: {} });
      let config = await saver.put({ configurable: { thread_id, checkpoint_ns: "" } }, v1(uuid6(0), "2024-04-19T17:19:07.952Z"), meta(0), {});
      await saver.putWrites(config, [[TASKS, "send-1"], [TASKS, "send-2"]], "task-1");
      await saver.putWrites(config, [[TASKS, "send-3"]], "task-2");
      config = await saver.put(config, v1(uuid6(1), "2024-04-20T17:19:07.952Z"), meta(1), {});
      const listed: CheckpointTuple[] = [];
      for await (const tuple of saver.list({ configurable: { thread_id } })) listed.push(tuple);
      expect(listed).toHaveLength(2);
      expect(listed[0]!.checkpoint.channel_values).toEqual({ [TASKS]: ["send-1", "send-2", "send-3"] });
      expect(listed[0]!.checkpoint.channel_versions[TASKS]).toBeDefined();
    });
  });
}

function checkpoint(id: string, channel_values: Record<string, unknown>, channel_versions: Record<string, number>): Checkpoint {
  return { v: 4, id, ts: new Date().toISOString(), channel_values, channel_versions, versions_seen: { "": { someChannel: 1 } } };
}

const meta = (step: number): CheckpointMetadata => ({ source: "loop", step, parents: {} });
