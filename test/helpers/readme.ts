/**
 * The documentation's fenced blocks and links: README.md and every page of
 * docs/, for the tests that run them (test/readme.test.ts runs the programs
 * and the SQL and checks the links; test/tarball.long.test.ts runs the commands
 * against the packed package). The rule each block follows is {@link kindOf}.
 *
 * @example
 * ```ts
 * for (const b of docBlocks().filter((b) => kindOf(b) === "commands")) console.log(b.file, b.line, b.code);
 * ```
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { ROOT } from "./cli.js";

export interface DocBlock {
  /** The file, relative to the repository: `README.md`, `docs/store.md`. */
  file: string;
  /** The fence's language (`bash`, `ts`, `text`...; "" when none). */
  lang: string;
  /** What follows the language in the fence (`output` in ```` ```text output ````). */
  meta: string;
  code: string;
  /** The `## ` section it is in ("" before the first). */
  section: string;
  /** 1-based line of its opening fence. */
  line: number;
}

/**
 * What the tests do with a block, by its fence:
 * - `program`: `ts`, a complete program, run with tsx against a database (readme.test.ts);
 * - `sql`: run against a migrated database (readme.test.ts);
 * - `commands`: `bash`, `sh`, `yaml` (its `run:` steps), `cron`, run in a project that installed
 *   the packed package, or skipped for a reason named in {@link NOT_RUN} (tarball.long.test.ts);
 * - `output`: `text` or `console`, shown, not run; ```` ```text output ```` right after a program is
 *   what that program prints, compared;
 * - `config`: `ini`, a configuration file, checked to parse;
 * - `diagram`: `mermaid`, the parts of the package and their imports, held against the code by
 *   architecture.test.ts.
 * Anything else (no language, or one not listed) is refused by readme.test.ts.
 */
export type BlockKind = "program" | "sql" | "commands" | "output" | "config" | "diagram";

const KINDS: Record<string, BlockKind> = {
  ts: "program",
  sql: "sql",
  bash: "commands",
  sh: "commands",
  yaml: "commands",
  cron: "commands",
  text: "output",
  console: "output",
  ini: "config",
  mermaid: "diagram",
};

export function kindOf(block: DocBlock): BlockKind | undefined {
  return KINDS[block.lang];
}

/** README.md, then the pages of docs/ in the order the README links them, then any it does not link. */
export function docFiles(): string[] {
  const pages = readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`);
  const linked = [...docText("README.md").matchAll(/\]\((docs\/[^)#]+\.md)(?:#[^)]*)?\)/g)].map((m) => m[1]!);
  const ordered = [...new Set(linked)].filter((f) => pages.includes(f));
  return ["README.md", ...ordered, ...pages.filter((f) => !ordered.includes(f)).sort()];
}

export function docText(file: string): string {
  return readFileSync(join(ROOT, file), "utf8");
}

export function readme(): string {
  return docText("README.md");
}

/** The fenced blocks of one file, or of every file of {@link docFiles}, in order. */
export function docBlocks(file?: string): DocBlock[] {
  if (file === undefined) return docFiles().flatMap((f) => docBlocks(f));
  const blocks: DocBlock[] = [];
  const lines = docText(file).split("\n");
  let section = "";
  for (let i = 0; i < lines.length; i++) {
    const heading = /^## (.*)$/.exec(lines[i]!);
    if (heading) section = heading[1]!;
    // Fences may be indented (inside a list item); the block's lines lose that indent.
    const open = /^(\s*)```(\S*)[ \t]*(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j]!); j++) body.push(lines[j]!.slice(Math.min(indent, /^\s*/.exec(lines[j]!)![0].length)));
    if (j === lines.length) throw new Error(`${file}:${i + 1}: the block has no closing fence`);
    blocks.push({ file, lang: open[2]!, meta: open[3]!.trim(), code: `${body.join("\n")}\n`, section, line: i + 1 });
    i = j;
  }
  return blocks;
}

/** The README's blocks. */
export function readmeBlocks(): DocBlock[] {
  return docBlocks("README.md");
}

/** The quick start: the first ts block under the README's `## Quick start`. */
export function quickStart(): string {
  const block = readmeBlocks().find((b) => b.section === "Quick start" && b.lang === "ts");
  if (!block) throw new Error("README has no ts block under ## Quick start");
  return block.code;
}

/** The output block a program's output is compared with: ```` ```text output ```` right after it. */
export function expectedOutput(blocks: DocBlock[], program: DocBlock): DocBlock | undefined {
  const next = blocks[blocks.indexOf(program) + 1];
  return next && kindOf(next) === "output" && next.meta === "output" ? next : undefined;
}

/**
 * Whether `actual` is what `expected` shows: line by line, trailing spaces
 * ignored; `...` stands for any text within a line, and a line of `...` alone
 * for any lines (none included).
 */
export function outputMatches(expected: string, actual: string): boolean {
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const pattern = expected
    .trimEnd()
    .split("\n")
    .map((line) => (line.trim() === "..." ? "(?:[^\\n]*\\n)*?" : `${line.trimEnd().split("...").map(escape).join(".*?")}[ \\t]*\\n`))
    .join("");
  return new RegExp(`^${pattern}$`).test(`${actual.trimEnd().split("\n").map((l) => l.trimEnd()).join("\n")}\n`);
}

/** Where a program's imports of the package point when it runs from the repository: src/. */
export function pointedAtSources(code: string): string {
  const entries: Record<string, string> = {
    "langgraph-checkpoint-pg": "src/index.ts",
    "langgraph-checkpoint-pg/store": "src/store/index.ts",
    "langgraph-checkpoint-pg/schema": "src/db/schema.ts",
    "langgraph-checkpoint-pg/otel": "src/otel/index.ts",
  };
  return code.replace(/(from\s+|import\()"(langgraph-checkpoint-pg(?:\/[a-z]+)?)"/g, (whole, lead: string, spec: string) => {
    const to = entries[spec];
    if (!to) throw new Error(`no source entry for ${spec}`);
    return `${lead}${JSON.stringify(join(ROOT, to))}`;
  });
}

/**
 * Command blocks that are not run, each with why: a test that would run
 * them matches the whole block (a `bash` block) or one `run:` step (YAML).
 */
export const NOT_RUN: [RegExp, string][] = [
  [/^npm install langgraph-checkpoint-pg /m, "installs from the registry: the test installs these packages from the tarball (the lists are compared)"],
  [/^npm ci && npm pack/m, "the clone's install and pack: the test packs the same sources and installs the tarball (the name is compared)"],
  [/^npm run demo\b/m, "a clone's demo and test suite: test/cli/demo.test.ts runs the demo as npm run demo does; npm test is this suite"],
  [/^(TEST_DATABASE_URL=\S+ )?npm (test|run test\S*)\b/m, "the test suite itself"],
  [/^npm ci$/, "a CI job's install step: the test project is installed"],
  [/^npx vitest run /m, "runs one of this repository's test files from a clone: the test suite runs it"],
  [/^npm install @opentelemetry\//m, "installs an OpenTelemetry exporter from the registry: no dependency of the package, documented only (docs/tracing.md)"],
  [/scripts\/heads-fold\/run\.sh/, "a benchmark of minutes that needs pgbench; its figures are in the page"],
];

/** The commands of a `commands` block to run, or why it is not run. */
export function commandsOf(b: DocBlock): { run: string[] } | { skip: string } {
  const skipped = NOT_RUN.find(([re]) => re.test(b.code));
  if (skipped && (b.lang === "bash" || b.lang === "sh")) return { skip: skipped[1] };
  if (b.lang === "bash" || b.lang === "sh") return { run: [b.code] };
  if (b.lang === "cron") return { run: b.code.trim().split("\n").map((l) => l.trim().split(/\s+/).slice(5).join(" ")) };
  if (b.lang === "yaml") {
    const runs = [...b.code.matchAll(/^\s*-?\s*run: (.*)$/gm)].map((m) => m[1]!.trim());
    return { run: runs.filter((r) => !NOT_RUN.some(([re]) => re.test(r))) };
  }
  return { run: [] };
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
export function anchor(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The anchors of a file's headings, as GitHub numbers repeated ones (`-1`, `-2`...). */
export function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of withoutCode(docText(file), false).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = anchor(heading!.trim());
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

export interface DocLink {
  file: string;
  line: number;
  target: string;
}

/** The links of a file to a local file or an anchor (not http, https or mailto ones). */
export function localLinks(file: string): DocLink[] {
  const links: DocLink[] = [];
  withoutCode(docText(file))
    .split("\n")
    .forEach((text, i) => {
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (!/^(https?|mailto):/.test(target!)) links.push({ file, line: i + 1, target: target! });
      }
    });
  return links;
}

/** Why a local link does not resolve, or undefined when it does. */
export function brokenLink(link: DocLink): string | undefined {
  const [path, hash] = link.target.split("#", 2) as [string, string | undefined];
  const file = path === "" ? link.file : normalize(join(dirname(link.file), path));
  if (file.startsWith("..") || !existsSync(join(ROOT, file))) return `no file ${file}`;
  if (hash === undefined) return undefined;
  if (!file.endsWith(".md")) return `an anchor into ${file}, which is not a page`;
  return anchorsOf(file).has(hash) ? undefined : `no heading of ${file} has the anchor #${hash}`;
}

/** The text with fenced blocks (and inline code, unless `inline` is false) blanked out; lines kept, so line numbers stay. */
function withoutCode(text: string, inline = true): string {
  const blocks = text.replace(/^(\s*)```[^\n]*\n[\s\S]*?^\s*```[ \t]*$/gm, (block) => block.replace(/[^\n]/g, ""));
  return inline ? blocks.replace(/`[^`\n]*`/g, (code) => " ".repeat(code.length)) : blocks;
}
