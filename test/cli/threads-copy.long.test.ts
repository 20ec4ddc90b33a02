/**
 * The CLI's thread lifecycle commands, spawned as real processes: `threads copy`
 * (dry run, copy, refusals, --up-to, --overwrite, usage errors), the tombstone
 * `threads delete` leaves, and `prune --keep-tombstones`.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver, ThreadDeletedError, type PruneResult } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { runCli, type Run } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";
import { history, logGraph } from "../helpers/graphs.js";

const db = withTestDatabase("cli_copy");
const SCHEMA = "copying";
let pg: string[];
const cfg = (thread_id: string): RunnableConfig => ({ configurable: { thread_id } });
const firstLine = (r: Run) => r.stderr.split("\n")[0]!;
let saver: PostgresSaver;

beforeAll(async () => {
  pg = ["--database-url", db.url, "--schema", SCHEMA];
  await migrate({ pool: db.pool, schema: SCHEMA });
  saver = new PostgresSaver(db.pool, { schema: SCHEMA });
  for (const word of ["one", "two", "three"]) await logGraph(saver).invoke({ word }, cfg("src"));
  await logGraph(saver).invoke({ word: "taken" }, cfg("taken"));
});

const counts = async (thread: string) =>
  (
    await db.pool.query(
      `SELECT (SELECT count(*) FROM ${SCHEMA}.checkpoints WHERE thread_id = $1)::int AS c, (SELECT count(*) FROM ${SCHEMA}.checkpoint_writes WHERE thread_id = $1)::int AS w`,
      [thread],
    )
  ).rows[0] as { c: number; w: number };

describe("threads copy", () => {
  it("--dry-run says what would be copied and writes nothing; then the copy reads as the source", async () => {
    const dry = await runCli(["threads", "copy", "src", "dst", ...pg, "--dry-run", "--json"]);
    expect(dry.code, dry.stderr).toBe(0);
    const planned = JSON.parse(dry.stdout);
    expect(planned).toMatchObject({ schema: SCHEMA, dryRun: true, from: "src", to: "dst", upTo: null, checkpoints: (await counts("src")).c, overwrote: false });
    expect(await counts("dst")).toEqual({ c: 0, w: 0 });
    const real = await runCli(["threads", "copy", "src", "dst", ...pg]);
    expect(real.code, real.stderr).toBe(0);
    expect(real.stdout).toMatch(new RegExp(`^Copied thread "src" to "dst" in schema "${SCHEMA}" of postgres://\\S+: ${planned.checkpoints} checkpoints, ${planned.writes} writes, ${planned.blobs} blobs\\.\\n$`));
    // LangGraph reports each snapshot's own thread id in its metadata.
    const strip = (states: Awaited<ReturnType<typeof history>>) =>
      states.map((s) => ({ id: s.config.configurable?.checkpoint_id, values: s.values, next: s.next, metadata: { ...s.metadata, thread_id: undefined } }));
    expect(strip(await history(logGraph(saver), cfg("dst")))).toEqual(strip(await history(logGraph(saver), cfg("src"))));
  });

  it("refuses an existing target (exit 1, nothing written) unless --overwrite; --up-to copies part of the history", async () => {
    const before = await counts("taken");
    const refused = await runCli(["threads", "copy", "src", "taken", ...pg]);
    expect(refused.code).toBe(1);
    expect(firstLine(refused)).toMatch(/copyThread "src" -> "taken" refused: thread "taken" exists \(pass overwrite: true, or --overwrite, to replace it\)\. Nothing was written\./);
    expect(await counts("taken")).toEqual(before);
    const states = await history(logGraph(saver), cfg("src"));
    const middle = states[Math.floor(states.length / 2)]!;
    const upTo = middle.config.configurable!.checkpoint_id as string;
    const r = await runCli(["threads", "copy", "src", "taken", ...pg, "--overwrite", "--up-to", upTo, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ overwrote: true, upTo, checkpoints: states.filter((s) => (s.config.configurable!.checkpoint_id as string) <= upTo).length });
    expect((await saver.getTuple(cfg("taken")))?.checkpoint).toEqual((await saver.getTuple(middle.config))?.checkpoint);
    expect((await logGraph(saver).getState({ configurable: { thread_id: "taken", checkpoint_id: upTo } })).values).toEqual(middle.values);
  });

  it("usage errors exit 2 before anything is opened", async () => {
    const cases: [string[], RegExp][] = [
      [["threads", "copy", "src"], /missing argument <to>/],
      [["threads", "copy", "src", "src"], /<to>: is the same thread as <from>/],
      [["threads", "copy", "a", "b", "c"], /unexpected argument "c"/],
      [["threads", "--up-to", "x"], /--up-to: only with threads copy/],
      [["threads", "delete", "a", "--overwrite"], /--overwrite: only with threads copy/],
      [["threads", "copy", "a", "b", "--limit", "3"], /--limit: not an option of threads copy/],
    ];
    const runs = await Promise.all(cases.map(([args]) => runCli([...args, "--database-url", "postgres://nobody@127.0.0.1:1/none"])));
    runs.forEach((r, i) => {
      expect(r.code, cases[i]![0].join(" ")).toBe(2);
      expect(firstLine(r)).toMatch(cases[i]![1]);
    });
  });
});

describe("threads delete and prune --keep-tombstones", () => {
  it("threads delete leaves a tombstone (a run continuing the thread is refused); prune collects it once older than --keep-tombstones", async () => {
    await logGraph(saver).invoke({ word: "doomed" }, cfg("doomed"));
    const head = (await saver.getTuple(cfg("doomed")))!;
    expect((await runCli(["threads", "delete", "doomed", ...pg])).code).toBe(0);
    const late = await saver.put(head.config, makeCheckpoint({ word: "late" }, { word: "-z9.00000001" }), meta(9), { word: "-z9.00000001" }).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(ThreadDeletedError);
    const kept = await runCli(["prune", "--keep-last", "50", "--thread", "doomed", "--yes", "--json", ...pg]);
    expect(kept.code, kept.stderr).toBe(0);
    expect((JSON.parse(kept.stdout) as PruneResult).tombstones).toBe(0);
    const collected = await runCli(["prune", "--keep-last", "50", "--thread", "doomed", "--keep-tombstones", "0", "--yes", ...pg]);
    expect(collected.code, collected.stderr).toBe(0);
    expect(collected.stdout).toMatch(/, and 1 tombstone\(s\) of deleted threads/);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.checkpoint_tombstones WHERE thread_id = 'doomed'`)).rows[0].n).toBe(0);
    const bad = await runCli(["prune", "--keep-last", "1", "--keep-tombstones", "soon", ...pg]);
    expect(bad.code).toBe(2);
  });
});
