/**
 * The README's quick-start block, run as written (the package import pointed at
 * src/), and its table of contents. test/tarball.test.ts runs the quick start and
 * every command block against the packed package.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { withTestDatabase } from "./helpers/db.js";
import { anchor, quickStart, readme, readmeBlocks } from "./helpers/readme.js";

const db = withTestDatabase("readme");

it("the table of contents links every ## section, in order", () => {
  const text = readme();
  const toc = /\*\*Contents\*\*:([\s\S]*?)\n\n/.exec(text)?.[1];
  expect(toc, "a **Contents**: paragraph near the top").toBeDefined();
  const links = [...toc!.matchAll(/\[[^\]]*\]\(#([^)]+)\)/g)].map((m) => m[1]);
  const sections = [...text.matchAll(/^## (.*)$/gm)].map((m) => anchor(m[1]!));
  // A new section needs its entry in the Contents line at the top of the README.
  expect(links).toEqual(sections);
});

it("the quick-start example runs and prints the article's final state, twice on one thread", async () => {
  const code = quickStart().replace(`from "langgraph-checkpoint-pg"`, `from ${JSON.stringify(join(process.cwd(), "src/index.ts"))}`);
  expect(code.split("\n").length).toBeLessThanOrEqual(20);
  // Inside the repo, so the example's imports resolve from node_modules.
  const dir = mkdtempSync(join(process.cwd(), "test", ".readme-"));
  const file = join(dir, "quick-start.mts");
  writeFileSync(file, code);
  try {
    const run = () =>
      promisify(execFile)(process.execPath, ["--import", "tsx", file], {
        cwd: process.cwd(),
        env: { ...process.env, DATABASE_URL: db.url },
      });
    for (let i = 0; i < 2; i++) {
      const { stdout } = await run();
      expect(stdout).toContain("name: 'pavaneeshwar'");
      expect(stdout).toContain("address: 'Hyderabad residency'");
    }
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = '12345'");
    expect(rows[0].n).toBe(6); // three per run, the second run continuing the same thread
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it("the thread lifecycle examples (deleted threads, copying, retention) run as written", async () => {
  const blocks = readmeBlocks().filter(
    (b) => b.lang === "ts" && (b.section === "Deleting and copying threads" || (b.section === "Retention" && b.code.includes("retention: {"))),
  );
  const expected = [/^true undefined\ndone\n$/, /\[\n?\s*'first question',\s*'echo: first question',\s*'another question',\s*'echo: another question'\s*\]/, /retention stopped/];
  expect(blocks).toHaveLength(expected.length);
  const dir = mkdtempSync(join(process.cwd(), "test", ".readme-"));
  try {
    for (const [i, block] of blocks.entries()) {
      const file = join(dir, `lifecycle-${i}.mts`);
      writeFileSync(file, block.code.replace(`from "langgraph-checkpoint-pg"`, `from ${JSON.stringify(join(process.cwd(), "src/index.ts"))}`));
      const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", file], { cwd: process.cwd(), env: { ...process.env, DATABASE_URL: db.url } });
      expect(stdout, `README.md line ${block.line}`).toMatch(expected[i]!);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
