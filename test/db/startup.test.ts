/**
 * Issue 16: a pod that starts before its database. setup() retries what may
 * pass (connection refused, the database starting up) with backoff, reports
 * each attempt as a `retry` event, and succeeds once the database is up; it
 * gives up after the configured attempts with a retryable, typed error, typed
 * the way every operation types the same outage.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseOperationError, latestVersion, migrate, MigrationError, PostgresSaver, type SaverEvent } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { PgServer } from "../helpers/server.js";

type RetryEvent = Extract<SaverEvent, { type: "retry" }>;

describe("setup() before the database is up", () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await PgServer.start({ label: "startup" });
    await server.stop("fast");
  });
  afterAll(async () => {
    await server?.destroy();
  });

  async function until(condition: () => boolean): Promise<void> {
    while (!condition()) await new Promise((r) => setTimeout(r, 10));
  }

  it("gives up after the configured attempts with a retryable MigrationError; operations type the same outage as retryable", async () => {
    const pool = new pg.Pool({ connectionString: server.url });
    pool.on("error", () => undefined);
    try {
      const events: SaverEvent[] = [];
      const saver = new PostgresSaver(pool, { onEvent: (e) => events.push(e) });
      const err = await saver.setup({ retry: { attempts: 3, initialDelayMs: 10, maxDelayMs: 20 } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MigrationError);
      expect(err).toMatchObject({ code: "MIGRATION_FAILED", retryable: true, sqlState: undefined, cause: { code: "ECONNREFUSED" } });
      expect((err as Error).message).toMatch(/connection error: .*ECONNREFUSED/);
      const retries = events.filter((e): e is RetryEvent => e.type === "retry");
      expect(retries.map((e) => [e.attempt, e.attempts, e.code])).toEqual([
        [1, 3, "ECONNREFUSED"],
        [2, 3, "ECONNREFUSED"],
      ]);
      const op = await saver.getTuple({ configurable: { thread_id: "t" } }).catch((e: unknown) => e);
      expect(op).toBeInstanceOf(DatabaseOperationError);
      expect(op).toMatchObject({ retryable: true, cause: { code: "ECONNREFUSED" } });
      const viaUrl = await migrate({ connectionString: server.url, retry: false }).catch((e: unknown) => e);
      expect(viaUrl).toBeInstanceOf(MigrationError);
      expect(viaUrl).toMatchObject({ retryable: true, cause: { code: "ECONNREFUSED" } });
    } finally {
      await pool.end();
    }
  });

  it("started before the database, succeeds once it is up, reporting each attempt", async () => {
    const pool = new pg.Pool({ connectionString: server.url });
    pool.on("error", () => undefined);
    try {
      const events: SaverEvent[] = [];
      const saver = new PostgresSaver(pool, { onEvent: (e) => events.push(e) });
      const setup = saver.setup({ retry: { attempts: 250, initialDelayMs: 20, maxDelayMs: 200 } });
      const retries = () => events.filter((e): e is RetryEvent => e.type === "retry");
      await until(() => retries().length >= 2);
      await server.start();
      const result = await setup;
      expect(result.toVersion).toBe(latestVersion());
      expect(retries().map((e) => e.attempt)).toEqual(retries().map((_, i) => i + 1));
      expect(retries()[0]).toMatchObject({ type: "retry", operation: "setup", schema: "public", attempts: 250, code: "ECONNREFUSED" });
      for (const e of retries()) expect(e.delayMs).toBeLessThanOrEqual(200);
      const config = await saver.put({ configurable: { thread_id: "t", checkpoint_ns: "" } }, makeCheckpoint({ a: 1 }), meta(-1), { a: 1 });
      expect((await saver.getTuple(config))?.checkpoint.channel_values).toEqual({ a: 1 });
    } finally {
      await pool.end();
    }
  });
});
