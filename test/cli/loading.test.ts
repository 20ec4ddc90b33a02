/**
 * What the CLI loads at start (issue 39, seam 7): each `npx
 * langgraph-checkpoint-pg ...` paid for @langchain/* (with zod and langsmith,
 * about 500 modules and most of a second of CPU) whatever the command. Each
 * command now loads its own module only (src/cli/spec.ts), and those that
 * decode no stored value load no @langchain/*, drizzle or PGlite. Seen with a
 * loader hook that records every module the process loads, never by timing.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { migrate } from "../../src/index.js";
import { modulesLoadedBy } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";

const db = withTestDatabase("cli_loading");

beforeAll(async () => {
  await migrate({ pool: db.pool, schema: "loading" });
});

/** Packages no command that only reads or changes the schema and its rows needs. */
const HEAVY = /\/node_modules\/(@langchain|zod|langsmith|drizzle-orm|@electric-sql)\//;
const heavy = (modules: string[]) => modules.filter((m) => HEAVY.test(m)).map((m) => m.replace(/^.*\/node_modules\//, "")).slice(0, 5);

describe("what a command loads", () => {
  it("--help, a command's --help, a usage error, and the commands that decode no value (migrate, status, threads, history, prune) load no @langchain/*, drizzle or PGlite", async () => {
    const url = ["--database-url", db.url, "--schema", "loading"];
    const cases: [string[], number][] = [
      [["--help"], 0],
      [["migrate", "--help"], 0],
      [["prune", "--grace", "soon"], 2],
      [["migrate", ...url], 0],
      [["migrate", "--dry-run", "--schema", "loading_new", "--database-url", db.url], 0],
      [["status", ...url], 0],
      [["threads", ...url], 0],
      [["history", "no-such-thread", ...url], 1],
      [["prune", "--keep-last", "5", ...url], 0],
    ];
    const runs = await Promise.all(cases.map(async ([args, code]) => ({ args, code, ...(await modulesLoadedBy(args)) })));
    for (const { args, code, run, modules } of runs) {
      expect({ args, code: run.code }, run.stderr).toEqual({ args, code });
      expect(modules.length, args.join(" ")).toBeGreaterThan(0);
      expect({ args, heavy: heavy(modules) }).toEqual({ args, heavy: [] });
    }
    // Help and usage errors open nothing: not even the driver.
    for (const { args, modules } of runs.slice(0, 3)) expect({ args, pg: modules.filter((m) => /\/node_modules\/pg\//.test(m)) }).toEqual({ args, pg: [] });
    // And the hook sees what is loaded: show decodes values, so it loads the serializer and @langchain/*.
    const show = await modulesLoadedBy(["show", "no-such-thread", ...url]);
    expect(show.run.code).toBe(1);
    expect(heavy(show.modules)).not.toEqual([]);
  });
});
