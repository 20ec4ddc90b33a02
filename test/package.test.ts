/** What users install: the packed package's files and its named exports, from dist/. */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);

it("npm pack ships dist with types and the migrations, and dist exports the public API by name", async () => {
  await run("npm", ["run", "build"], { cwd: process.cwd() });
  const { stdout } = await run("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: process.cwd() });
  const files = (JSON.parse(stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
  for (const f of ["dist/index.js", "dist/index.d.ts", "dist/saver.js", "migrations/meta/_journal.json", "migrations/0000_init.sql", "README.md"]) {
    expect(files).toContain(f);
  }
  expect(files.some((f) => f.startsWith("test/") || f.startsWith("src/"))).toBe(false);
  const probe = `
    const m = await import(${JSON.stringify(`${process.cwd()}/dist/index.js`)});
    const names = ["PostgresSaver", "migrate", "MsgpackSerializer", "withConflictRetry", "CheckpointConflictError", "CheckpointParentMissingError",
      "SchemaNotMigratedError", "InvalidInputError", "CheckpointerError", "loadMigrations", "reencrypt", "UnsafeSchemaError",
      "HistoryCorruptError", "PayloadTooLargeError"];
    const missing = names.filter((n) => typeof m[n] !== "function");
    if (missing.length) throw new Error("missing exports: " + missing);
    console.log(m.loadMigrations().length);`;
  const out = await run(process.execPath, ["--input-type=module", "-e", probe]);
  expect(Number(out.stdout.trim())).toBeGreaterThan(0);
}, 120_000);
