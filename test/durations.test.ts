/**
 * Durations (issue 39, seam 4; STYLE habit 15): every duration option and flag
 * goes through one parser (src/duration.ts), so `0`, `"0"` and `"0s"` mean
 * the same wherever a duration may be zero (`grace`, `keepTombstones`, the
 * saver's `runLeaseMs`, `--wait`), and are refused the same way, naming the
 * option, wherever it may not. A table of inputs, through the library (before
 * any SQL) and through the real CLI.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { beforeAll, describe, expect, it } from "vitest";
import { InvalidInputError, InvalidOptionsError, migrate, migrateStore, PostgresSaver, PostgresStore, prune } from "../src/index.js";
import { runCli } from "./helpers/cli.js";
import { withTestDatabase } from "./helpers/db.js";
import { logGraph, tid } from "./helpers/graphs.js";

const db = withTestDatabase("durations");
const thread = tid("fresh");

beforeAll(async () => {
  await migrate({ pool: db.pool });
  await migrateStore({ pool: db.pool });
  // Three runs: checkpoints written just now, all within any grace period that is on.
  const cfg: RunnableConfig = { configurable: { thread_id: thread } };
  const graph = logGraph(new PostgresSaver(db.pool));
  for (const word of ["a", "b", "c"]) await graph.invoke({ word }, cfg);
});

/** The ways to write zero: each must mean what `0` means. */
const ZEROS: unknown[] = [0, "0", "0s", "0ms", "0m", " 0 ", "0h0m"];

/** What an error says about a duration, the option's name aside. */
const problem = (err: unknown) => (err instanceof Error ? err.message.replace(/^Invalid (option )?[^:]+: /, "") : String(err));

describe("where a duration may be zero, 0, \"0\" and \"0s\" mean the same", () => {
  it("prune's grace and keepTombstones: every zero turns the grace period off, as 0 does", async () => {
    const dry = (grace: unknown, keepTombstones: unknown = "7d") =>
      prune({ pool: db.pool, keepLast: 1, grace: grace as string, keepTombstones: keepTombstones as string, threadIds: [thread], dryRun: true });
    const off = await dry(0);
    expect(off.checkpoints).toBeGreaterThan(0);
    expect(off.kept.grace).toBe(0);
    const on = await dry("1h");
    expect(on.checkpoints).toBe(0);
    for (const zero of ZEROS) {
      const r = await dry(zero, zero);
      expect({ zero, checkpoints: r.checkpoints, kept: r.kept }).toEqual({ zero, checkpoints: off.checkpoints, kept: off.kept });
    }
  });

  it("the saver's runLeaseMs: every zero is accepted as 0 is", () => {
    for (const zero of ZEROS) expect(() => new PostgresSaver(db.pool, { runLeaseMs: zero as number }), String(zero)).not.toThrow();
  });
});

describe("where a duration may not be zero, 0, \"0\" and \"0s\" are refused alike, naming the option, before any SQL", () => {
  const cases: [string, (v: unknown) => unknown][] = [
    ["olderThan", (v) => prune({ pool: db.pool, olderThan: v as string })],
    ["idleFor", (v) => prune({ pool: db.pool, idleFor: v as string })],
    ["lockTimeout", (v) => prune({ pool: db.pool, keepLast: 1, lockTimeout: v as string })],
    ["ttl", (v) => new PostgresSaver(db.pool, { ttl: v as string })],
    ["retention.every", (v) => new PostgresSaver(db.pool, { retention: { every: v as string, keepLast: 1, start: false } })],
    ["ttl.defaultTtl", (v) => new PostgresStore(db.pool, { ttl: { defaultTtl: v as number } })],
    ["ttl.sweepIntervalMinutes", (v) => new PostgresStore(db.pool, { ttl: { sweepIntervalMinutes: v as number } })],
  ];
  for (const [option, attempt] of cases) {
    it(option, async () => {
      for (const zero of ZEROS) {
        const err = await (async () => attempt(zero))().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err, `${option}: ${JSON.stringify(zero)}`).toBeInstanceOf(InvalidOptionsError);
        expect({ zero, option: (err as InvalidOptionsError).option, problem: problem(err) }).toEqual({ zero, option, problem: "must be longer than zero" });
      }
    });
  }

  it("a store put's ttl (minutes, as LangGraph's store counts them; or a duration string)", async () => {
    const store = new PostgresStore(db.pool);
    for (const zero of ZEROS) {
      const err = await store.put(["durations"], "k", { v: 1 }, undefined, { ttl: zero as number }).catch((e: unknown) => e);
      expect(err, JSON.stringify(zero)).toBeInstanceOf(InvalidInputError);
      expect(problem(err)).toBe("must be longer than zero");
    }
    await store.put(["durations"], "k", { v: 1 }, undefined, { ttl: "1h" as unknown as number });
    const { rows } = await db.pool.query("SELECT ttl_minutes FROM store_items WHERE key = 'k'");
    expect(rows[0].ttl_minutes).toBe(60);
  });
});

describe("the CLI's duration flags read as the options do", () => {
  const url = () => ["--database-url", db.url];

  it("prune --grace and --keep-tombstones: 0, 0s and 0ms turn them off alike", async () => {
    const runs = await Promise.all(
      ["0", "0s", "0ms"].map((zero) => runCli(["prune", "--keep-last", "1", "--grace", zero, "--keep-tombstones", zero, "--thread", thread, "--json", ...url()])),
    );
    for (const r of runs) expect(r.stderr).toBe("");
    const results = runs.map((r) => JSON.parse(r.stdout) as { checkpoints: number; kept: unknown });
    expect(results[0]!.checkpoints).toBeGreaterThan(0);
    for (const r of results) expect({ checkpoints: r.checkpoints, kept: r.kept }).toEqual({ checkpoints: results[0]!.checkpoints, kept: results[0]!.kept });
  });

  it("migrate --wait 0s is --wait 0: one attempt", async () => {
    const r = await runCli(["migrate", "--wait", "0s", ...url()]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
  });

  it("prune --older-than and --idle-for refuse 0, 0s and 0ms alike (exit 2), as the options do", async () => {
    const runs = await Promise.all(
      ["--older-than", "--idle-for"].flatMap((flag) => ["0", "0s", "0ms"].map(async (zero) => ({ flag, zero, r: await runCli(["prune", flag, zero, ...url()]) }))),
    );
    for (const { flag, zero, r } of runs) {
      expect({ flag, zero, code: r.code, line: r.stderr.split("\n")[0] }).toEqual({ flag, zero, code: 2, line: `langgraph-checkpoint-pg prune: ${flag}: must be longer than zero` });
    }
  });
});
