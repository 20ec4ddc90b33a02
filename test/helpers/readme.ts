/**
 * The README's fenced blocks, for the tests that run them (test/readme.test.ts,
 * test/tarball.test.ts).
 *
 * @example
 * ```ts
 * for (const b of readmeBlocks().filter((b) => b.lang === "bash")) console.log(b.section, b.line, b.code);
 * ```
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./cli.js";

export interface ReadmeBlock {
  /** The fence's language (`bash`, `ts`, `yaml`, ...; "" when none). */
  lang: string;
  code: string;
  /** The `## ` section it is in. */
  section: string;
  /** 1-based line of its opening fence. */
  line: number;
}

export function readme(): string {
  return readFileSync(join(ROOT, "README.md"), "utf8");
}

export function readmeBlocks(text = readme()): ReadmeBlock[] {
  const blocks: ReadmeBlock[] = [];
  const lines = text.split("\n");
  let section = "";
  for (let i = 0; i < lines.length; i++) {
    const heading = /^## (.*)$/.exec(lines[i]!);
    if (heading) section = heading[1]!;
    // Fences may be indented (inside a list item); the block's lines lose that indent.
    const open = /^(\s*)```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j]!); j++) body.push(lines[j]!.slice(Math.min(indent, /^\s*/.exec(lines[j]!)![0].length)));
    blocks.push({ lang: open[2]!, code: `${body.join("\n")}\n`, section, line: i + 1 });
    i = j;
  }
  return blocks;
}

/** The quick start: the first ts block under `## Quick start`. */
export function quickStart(): string {
  const block = readmeBlocks().find((b) => b.section === "Quick start" && b.lang === "ts");
  if (!block) throw new Error("README has no ts block under ## Quick start");
  return block.code;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
export function anchor(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}
