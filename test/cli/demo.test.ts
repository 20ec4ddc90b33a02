/**
 * `npm run demo`: the article's graph on thread "12345", live, on the embedded
 * database by default and on Postgres with DATABASE_URL. Its output must show
 * the article's three checkpoints (sources, steps, writes, blobs), and a second
 * run must continue the thread from the state the first one stored.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { afterAll, describe, expect, it } from "vitest";
import { loadMigrations } from "../../src/index.js";
import { snapshotInfo } from "../../src/db/snapshot.js";
import { withTestDatabase } from "../helpers/db.js";
import { collect, ROOT, runCli, runDemo, type Run } from "../helpers/cli.js";

const db = withTestDatabase("demo");
const dataDir = mkdtempSync(join(tmpdir(), "lgpg-demo-"));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const ARTICLE_STATE = { name: "pavaneeshwar", address: "Hyderabad residency" };
const VERSION = /^-[a-z][0-9a-z]+\.[0-9][0-9a-z]{7}$/;

interface DemoJson {
  thread_id: string;
  database: string;
  continued: boolean;
  previous: { checkpoints: number; head: string; state: unknown } | null;
  checkpoints: {
    id: string;
    parent: string | null;
    source: string;
    step: number;
    channel_versions: Record<string, string>;
    updated_channels: string[];
    writes: { task_id: string; idx: number; channel: string; value: unknown; task_path: string }[];
    blobs: { channel: string; version: string; type: string; value?: unknown }[];
  }[];
  total_checkpoints: number;
  state: unknown;
}

const parse = (r: Run) => {
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as DemoJson;
};

/** The article's walkthrough, checkpoint by checkpoint. */
function expectArticle(d: DemoJson) {
  const cps = d.checkpoints;
  expect(cps.map((c) => [c.source, c.step])).toEqual([
    ["input", -1],
    ["loop", 0],
    ["loop", 1],
  ]);
  expect(cps.map((c) => c.parent)).toEqual([null, cps[0]!.id, cps[1]!.id]);
  expect(cps.map((c) => Object.keys(c.channel_versions).sort())).toEqual([
    ["__start__"],
    ["__start__", "branch:to:get_address"],
    ["__start__", "address", "branch:to:get_address", "name"],
  ]);
  expect(cps.flatMap((c) => Object.values(c.channel_versions)).every((v) => VERSION.test(v))).toBe(true);
  expect(cps.map((c) => c.updated_channels)).toEqual([["__start__"], ["branch:to:get_address"], ["address", "name"]]);
  // Writes live under the checkpoint the task ran FROM.
  expect(cps.map((c) => c.writes.map((w) => [w.channel, w.value, w.task_path]))).toEqual([
    [["branch:to:get_address", null, "~__pregel_pull, __start__"]],
    [
      ["name", "pavaneeshwar", "~__pregel_pull, get_address"],
      ["address", "Hyderabad residency", "~__pregel_pull, get_address"],
    ],
    [],
  ]);
  expect(new Set(cps[1]!.writes.map((w) => w.task_id)).size).toBe(1);
  // Blobs: {} for the input, `empty` once consumed, null for the branch trigger, then the two strings.
  expect(cps.map((c) => c.blobs.map((b) => [b.channel, b.type, b.value]).sort())).toEqual([
    [["__start__", "msgpack", {}]],
    [
      ["__start__", "empty", undefined],
      ["branch:to:get_address", "msgpack", null],
    ],
    [
      ["address", "msgpack", "Hyderabad residency"],
      ["branch:to:get_address", "empty", undefined],
      ["name", "msgpack", "pavaneeshwar"],
    ],
  ]);
}

describe("demo on the embedded database (the default)", () => {
  it("prints the article's three checkpoints, then continues the thread after a restart, and --fresh starts over", { timeout: 240_000 }, async () => {
    const first = await runDemo(["--data-dir", dataDir]);
    expect(first.code).toBe(0);
    expect(first.stderr).toBe("");
    const out = first.stdout;
    expect(out).toContain('START -> get_address -> END on thread "12345"');
    for (const [n, sourceStep] of [
      [1, "input, -1"],
      [2, "loop, 0"],
      [3, "loop, 1"],
    ] as const) {
      expect(out).toMatch(new RegExp(`Checkpoint ${n} of 3 {2}[0-9a-f-]{36}\\n[\\s\\S]*?source, step +${sourceStep}`));
    }
    expect(out).toMatch(/branch:to:get_address +null +~__pregel_pull, __start__/);
    expect(out).toMatch(/name +"pavaneeshwar" +~__pregel_pull, get_address/);
    expect(out).toMatch(/__start__ +-a\d\.\S+ +empty +\(consumed: no value\)/);
    expect(out).toContain('State now  {"name":"pavaneeshwar","address":"Hyderabad residency"}');
    // Not a terminal: no colour codes.
    expect(out).not.toContain("\u001b[");
    expect(out).toContain(`npm run -s cli -- history 12345 --data-dir ${dataDir}`);
    // The new folder started from the empty database the package ships (no initdb: its system identifier), then migrated.
    const status = await runCli(["status", "--json", "--data-dir", dataDir]);
    expect((JSON.parse(status.stdout) as { applied: { name: string }[] }).applied.map((m) => m.name)).toEqual(loadMigrations().map((m) => m.name));
    const lite = new PGlite(join(dataDir, "pgdata"));
    try {
      expect((await lite.query<{ id: string }>("SELECT system_identifier::text AS id FROM pg_control_system()")).rows[0]!.id).toBe(snapshotInfo()!.systemIdentifier);
    } finally {
      await lite.close();
    }

    // A new process on the same folder: the state survived, the thread continues.
    const second = parse(await runDemo(["--data-dir", dataDir, "--json"]));
    expect(second.continued).toBe(true);
    expect(second.previous).toMatchObject({ checkpoints: 3, state: ARTICLE_STATE });
    expect(second.checkpoints.map((c) => [c.source, c.step])).toEqual([
      ["input", 2],
      ["loop", 3],
      ["loop", 4],
    ]);
    expect(second.checkpoints[0]!.parent).toBe(second.previous!.head);
    expect(second.total_checkpoints).toBe(6);
    expect(second.state).toEqual(ARTICLE_STATE);

    const fresh = parse(await runDemo(["--data-dir", dataDir, "--json", "--fresh"]));
    expect(fresh.continued).toBe(false);
    expect(fresh.total_checkpoints).toBe(3);
    expectArticle(fresh);
  });

  it("is a demo: with NODE_ENV=production and no database named it still runs on ./.langgraph-pg, which its output names", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "lgpg-demo-prod-"));
    try {
      const r = await runDemo([], { cwd, env: { NODE_ENV: "production" } });
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^stored in +embedded database in \.\/\.langgraph-pg, schema "public"$/m);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  it("answers --help and refuses bad arguments with exit 2", async () => {
    const [help, bad] = await Promise.all([runDemo(["--help"]), runDemo(["--frobnicate"])]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--fresh +delete the thread first and start over/);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^demo: unknown option --frobnicate/);
  });
});

describe("demo on Postgres (DATABASE_URL), through npm run demo", () => {
  it("stores the article's checkpoints in the given schema", async () => {
    const url = new URL(db.url);
    const r = await collect(
      spawn("npm", ["run", "--silent", "demo", "--", "--json", "--schema", "demo"], { cwd: ROOT, env: { ...process.env, DATABASE_URL: url.toString() } }),
    );
    const d = parse(r);
    expect(d.database).toMatch(/^postgres:\/\//);
    // The password never shows (it may equal the user name, as in a test container: look for it in place).
    if (url.password) {
      expect(r.stdout).not.toContain(`:${url.password}@`);
      expect(d.database).toContain(":***@");
    }
    expect(d.continued).toBe(false);
    expectArticle(d);
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM demo.checkpoints WHERE thread_id = '12345'");
    expect(rows[0].n).toBe(3);
  });
});
