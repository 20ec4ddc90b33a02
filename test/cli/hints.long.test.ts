/**
 * The commands the CLI's messages suggest carry the context they came from
 * (issue 39, seam 5): the schema (one without it acts on public), the
 * `--data-dir` as given, and a `--database-url` by name only ("with the same
 * --database-url": its value holds a password and is never printed). One
 * helper writes them all (src/hint.ts); each hint here is run as written.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate, PostgresSaver } from "../../src/index.js";
import { ROOT, runCli, suggestedCommands } from "../helpers/cli.js";
import { withTestDatabase } from "../helpers/db.js";
import { logGraph } from "../helpers/graphs.js";

const db = withTestDatabase("cli_hints");
const work = mkdtempSync(join(tmpdir(), "lgpg-hints-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A thread id a shell must have quoted. */
const THREAD = "chat 3";

beforeAll(async () => {
  for (const schema of ["public", "agents2"]) {
    await migrate({ pool: db.pool, schema });
    await logGraph(new PostgresSaver(db.pool, { schema })).invoke({ word: schema }, { configurable: { thread_id: THREAD } });
  }
});

const checkpointsOf = async (schema: string) => (await db.pool.query(`SELECT count(*)::int AS n FROM ${schema}.checkpoints WHERE thread_id = $1`, [THREAD])).rows[0].n as number;

/** The one line a failed command printed, checked to hold no database URL. */
function hintLine(stderr: string): string {
  expect(stderr).not.toContain(db.url);
  expect(stderr).not.toMatch(/--database-url\s+\S*postgres(ql)?:\/\//);
  return stderr.trim();
}

describe("a hint names the schema and the database it came from", () => {
  it("import --schema agents2 of a thread that exists there: the hint deletes it in agents2 (not public), and runs as written", async () => {
    const file = join(work, "thread.jsonl");
    const url = ["--database-url", db.url];
    expect((await runCli(["export", THREAD, "--schema", "agents2", "-o", file, ...url])).code).toBe(0);
    const refused = await runCli(["import", file, "--schema", "agents2", ...url]);
    expect(refused.code).toBe(1);
    const line = hintLine(refused.stderr);
    expect(line).toContain("`npx langgraph-checkpoint-pg threads delete 'chat 3' --schema agents2` (with the same --database-url)");
    const [hinted] = suggestedCommands(line);
    expect(hinted).toEqual(["threads", "delete", THREAD, "--schema", "agents2"]);
    // As the hint says: with the same --database-url.
    const deleted = await runCli([...hinted!, ...url]);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect({ agents2: await checkpointsOf("agents2"), public: await checkpointsOf("public") }).toEqual({ agents2: 0, public: 3 });
    expect((await runCli(["import", file, "--schema", "agents2", ...url])).code).toBe(0);
  });

  it("a schema not migrated, seen by status (the CLI's hint) and by threads (the library's error): migrate --schema, with the same --database-url", async () => {
    for (const command of ["status", "threads"]) {
      const run = await runCli([command, "--schema", "not_yet", "--database-url", db.url]);
      expect(run.code, command).toBe(3);
      const text = command === "status" ? run.stdout : hintLine(run.stderr);
      expect(text, command).toContain("`npx langgraph-checkpoint-pg migrate --schema not_yet` (with the same --database-url)");
    }
    const [hinted] = suggestedCommands((await runCli(["threads", "--schema", "not_yet", "--database-url", db.url])).stderr);
    const migrated = await runCli([...hinted!, "--database-url", db.url]);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect((await runCli(["status", "--schema", "not_yet", "--database-url", db.url])).code).toBe(0);
  });

  it("an embedded folder that does not exist yet (--data-dir): migrate with the same --data-dir and --schema; run as written, it creates it", async () => {
    const dataDir = join(work, "embedded");
    const before = await runCli(["status", "--data-dir", dataDir, "--schema", "agents"]);
    expect(before.code).toBe(3);
    const [hinted] = suggestedCommands(hintLine(before.stderr));
    expect(hinted).toEqual(["migrate", "--schema", "agents", "--data-dir", dataDir]);
    const created = await runCli(hinted!);
    expect(created.code, created.stderr).toBe(0);
    expect((await runCli(["status", "--data-dir", dataDir, "--schema", "agents"])).code).toBe(0);
  });
});

it("no message in src/ writes a CLI command by hand: each comes from src/hint.ts, so none can drop its schema or database", () => {
  /** Where a command is spelled out for another reason, with the reason. */
  const ALLOWED: Record<string, string> = {
    "src/hint.ts": "the helper itself",
    // Raised by the trigger in the official saver's process (PL/pgSQL), naming the schema it guards.
    "src/ops/adopt-bridge.ts": "SQL text of a trigger",
  };
  const files = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []));
  const found: string[] = [];
  for (const file of files("src")) {
    if (ALLOWED[file]) continue;
    // Comments aside (their examples), and help texts, which show a command's form, not a hint.
    const code = readFileSync(join(ROOT, file), "utf8").replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
    for (const [line] of code.matchAll(/^.*(npx (langgraph-checkpoint-pg|\$\{BIN\}) [a-z]|`langgraph-checkpoint-pg [a-z]).*$/gm)) {
      if (!/<command> --help/.test(line)) found.push(`${file}: ${line.trim()}`);
    }
  }
  expect(found).toEqual([]);
});
