/**
 * The documentation as tests: README.md and every page of docs/ (the rule is
 * in docs/tests.md, "The examples in these pages", and test/helpers/readme.ts).
 * Every fenced block is run or marked as output; every local link resolves;
 * README.md's programs (ts) and SQL run as written (test/helpers/doc-programs.ts),
 * the docs pages' in test/docs.long.test.ts. test/tarball.long.test.ts runs the
 * command blocks, the quick start and two other programs against the packed package.
 */
import { expect, it } from "vitest";
import { pageTitle, runPage } from "./helpers/doc-programs.js";
import { anchorsOf, brokenLink, docBlocks, docFiles, kindOf, localLinks, NOT_RUN, quickStart } from "./helpers/readme.js";

const files = docFiles();
const where = (b: { file: string; line: number }) => `${b.file}:${b.line}`;

it("every fenced block is run by a test or marked as output: no block without a language the tests know", () => {
  const refused = docBlocks()
    .filter((b) => kindOf(b) === undefined)
    .map((b) => `${where(b)}: \`\`\`${b.lang || "(no language)"}`);
  // A new block is a `ts` program, `sql`, a command (`bash`, `yaml`, `cron`), output (`text`, `console`), or the house's diagram (`mermaid`).
  expect(refused).toEqual([]);
  const blocks = docBlocks();
  // An output block compared with a program's output follows that program.
  const stray = blocks.filter((b, i) => b.meta === "output" && (i === 0 || blocks[i - 1]!.lang !== "ts" || blocks[i - 1]!.file !== b.file)).map(where);
  expect(stray).toEqual([]);
  // Each reason not to run a command block still names one (test/tarball.long.test.ts runs the others).
  const commands = blocks.filter((b) => kindOf(b) === "commands");
  const stale = NOT_RUN.filter(([re]) => !commands.some((b) => re.test(b.code) || [...b.code.matchAll(/run: (.*)$/gm)].some((m) => re.test(m[1]!.trim())))).map(([re]) => String(re));
  expect(stale).toEqual([]);
  // A configuration file parses: sections and key = value lines, comments.
  for (const b of blocks.filter((b) => kindOf(b) === "config")) {
    const bad = b.code.split("\n").filter((l) => l.trim() !== "" && !/^\s*([;#].*|\[[\w.-]+\]|[\w.]+\s*=\s*\S.*)$/.test(l));
    expect(bad, where(b)).toEqual([]);
  }
});

it("every link of README.md and docs/*.md to a local file or an anchor resolves, and the README links every page", () => {
  const broken = files.flatMap((f) => localLinks(f)).flatMap((l) => {
    const why = brokenLink(l);
    return why ? [`${where(l)}: ${l.target}: ${why}`] : [];
  });
  expect(broken).toEqual([]);
  const linked = new Set(localLinks("README.md").map((l) => l.target.split("#")[0]));
  expect(files.filter((f) => f.startsWith("docs/") && !linked.has(f))).toEqual([]);
  // The anchors the README's first screen promises exist (a sanity check of the slugs themselves).
  expect(anchorsOf("docs/data-model.md").has("what-one-run-stores-npm-run-demo")).toBe(true);
});

it("the quick start is at most 20 lines and imports only the package and LangGraph", () => {
  const code = quickStart();
  expect(code.split("\n").length).toBeLessThanOrEqual(20);
  expect([...code.matchAll(/from "([^"]+)"/g)].map((m) => m[1])).toEqual(["@langchain/langgraph", "langgraph-checkpoint-pg"]);
});

// The docs pages' programs take minutes of CPU together (a process each): test/docs.long.test.ts runs them.
it(pageTitle("README.md"), () => runPage("README.md"), 600_000);
