/**
 * The house rule (docs/architecture.md): imports run one way, from the face
 * down to the core, and never in a circle. Read from src/ as text (type
 * imports included: a type import is a dependency of the reader too), so it
 * holds whatever the bundler would drop. Both rules are checked on a planted
 * wrong-way import and a planted circle, so a rule that stopped seeing
 * anything would fail here.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { expect, it } from "vitest";
import { ROOT } from "./helpers/cli.js";
import { docBlocks } from "./helpers/readme.js";

/**
 * The parts, lowest first. A file may import files of its own part and of the parts below it.
 * Paths are relative to src/; a folder means every file in it.
 */
export const PARTS: readonly { name: string; paths: readonly string[] }[] = [
  { name: "errors", paths: ["errors.ts", "errors/", "hint.ts"] },
  { name: "base", paths: ["events.ts", "validate.ts", "duration.ts"] },
  { name: "db", paths: ["db/"] },
  { name: "serde", paths: ["serde/"] },
  { name: "saver", paths: ["saver/", "retry.ts"] },
  { name: "store", paths: ["store/"] },
  { name: "wing", paths: ["ops/"] },
  { name: "otel", paths: ["otel/"] },
  { name: "cli", paths: ["cli/", "demo.ts"] },
  { name: "face", paths: ["index.ts"] },
];

const SRC = join(ROOT, "src");

/** Every .ts file of src/, relative to it. */
function sources(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") ? [relative(SRC, join(dir, e.name))] : [],
  );
}

/** The files `file` imports (static, dynamic and type imports, and re-exports), relative to src/. */
function importsOf(file: string, text: string): string[] {
  const out: string[] = [];
  // Comments left out: a TSDoc example may show an import.
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  for (const m of code.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["'](\.{1,2}\/[^"']+)["']/g)) {
    out.push(relative(SRC, resolve(dirname(join(SRC, file)), m[1]!)).replace(/\.js$/, ".ts"));
  }
  return out;
}

function partOf(file: string): number {
  const i = PARTS.findIndex((p) => p.paths.some((path) => (path.endsWith("/") ? file.startsWith(path) : file === path)));
  if (i < 0) throw new Error(`src/${file} belongs to no part: add it to PARTS in test/architecture.test.ts (and to docs/architecture.md)`);
  return i;
}

type Graph = Map<string, string[]>;

function graph(files: Record<string, string>): Graph {
  return new Map(Object.entries(files).map(([file, text]) => [file, importsOf(file, text)]));
}

/** Parts side by side: neither imports the other (the store stands beside the saver, on the core's database layer). */
const SIBLINGS = new Set(["saver store", "store saver"]);

/** Imports from a lower part to a higher one, or between siblings, as "a -> b". */
export function wrongWay(g: Graph): string[] {
  const out: string[] = [];
  for (const [file, targets] of g) {
    for (const target of targets) {
      if (!g.has(target)) continue;
      const [from, to] = [partOf(file), partOf(target)];
      if (to > from || SIBLINGS.has(`${PARTS[from]!.name} ${PARTS[to]!.name}`)) out.push(`src/${file} -> src/${target}`);
    }
  }
  return out;
}

/** The circles of the graph (strongly connected components of more than one file, or a file importing itself). */
export function circles(g: Graph): string[][] {
  let index = 0;
  const stack: string[] = [];
  const on = new Set<string>();
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const out: string[][] = [];
  const visit = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of g.get(v) ?? []) {
      if (!g.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (g.get(v) ?? []).includes(v)) out.push(component.sort());
    }
  };
  for (const v of g.keys()) if (!idx.has(v)) visit(v);
  return out;
}

const house = () => graph(Object.fromEntries(sources().map((f) => [f, readFileSync(join(SRC, f), "utf8")])));

it("every file of src/ belongs to a part, and imports run one way: never from a part to one above it, nor between the saver and the store", () => {
  const g = house();
  for (const file of g.keys()) partOf(file);
  expect(wrongWay(g)).toEqual([]);
});

it("no circle of imports, type imports included", () => {
  expect(circles(house())).toEqual([]);
});

it("the rules see a planted wrong-way import and a planted circle", () => {
  const g = house();
  // The migrator (core) importing the adoption (the wing), as it once did.
  g.set("db/migrate.ts", [...g.get("db/migrate.ts")!, "ops/adopt.ts"]);
  expect(wrongWay(g)).toContain("src/db/migrate.ts -> src/ops/adopt.ts");
  // The store importing the saver, its sibling.
  g.set("store/store.ts", [...g.get("store/store.ts")!, "saver/options.ts"]);
  expect(wrongWay(g)).toContain("src/store/store.ts -> src/saver/options.ts");
  // Two files of one part importing each other, one of them only for a type.
  const planted = graph({ "saver/a.ts": `import type { B } from "./b.js";`, "saver/b.ts": `export { a } from "./a.js";` });
  expect(circles(planted)).toEqual([["saver/a.ts", "saver/b.ts"]]);
});

it("docs/architecture.md's picture is the code's: its arrows are the imports between parts (the ground, errors and base, left out)", () => {
  const diagrams = docBlocks("docs/architecture.md").filter((b) => b.lang === "mermaid");
  expect(diagrams).toHaveLength(1);
  const drawn = new Set([...diagrams[0]!.code.matchAll(/^\s*(\w+)(?:\["[^"]*"\])?\s*-->\s*(\w+)/gm)].map((m) => `${m[1]} --> ${m[2]}`));
  const ground = new Set(["errors", "base"]);
  const code = new Set<string>();
  for (const [file, targets] of house()) {
    for (const target of targets) {
      const [a, b] = [PARTS[partOf(file)]!.name, PARTS[partOf(target)]!.name];
      if (a !== b && !ground.has(b)) code.add(`${a} --> ${b}`);
    }
  }
  expect([...drawn].sort()).toEqual([...code].sort());
});
