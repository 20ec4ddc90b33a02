/**
 * `npm run demo` on the embedded database, its default: the article's graph on
 * thread "12345", live. Its output must show the article's three checkpoints,
 * and a second run must continue the thread from the state the first one
 * stored; --fresh starts over; it runs so in production too; --help and bad
 * arguments. In `npm run test:long`, not `npm test`: it starts PGlite in child
 * processes, minutes of CPU for what it adds to the everyday run (demo.test.ts
 * runs the demo on Postgres there).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { afterAll, describe, expect, it } from "vitest";
import { loadMigrations } from "../../src/index.js";
import { snapshotInfo } from "../../src/db/snapshot.js";
import { expectArticle, parseDemo, runCli, runDemo } from "../helpers/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "lgpg-demo-"));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const ARTICLE_STATE = { name: "pavaneeshwar", address: "Hyderabad residency" };

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
    expect(out).toMatch(/__start__ +-a\d\.\S+ +empty +\(consumed: no value, no row\)/);
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
    const second = parseDemo(await runDemo(["--data-dir", dataDir, "--json"]));
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

    const fresh = parseDemo(await runDemo(["--data-dir", dataDir, "--json", "--fresh"]));
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
