/**
 * Spawns the real CLI (or demo) from source, as a child process, the way a
 * user or a CI step runs it: `node scripts/demo.mjs ...` (as `npm run demo`), and
 * the CLI as `node .test-build/<run>/main.mjs ...`, a bundle of src/ that global
 * setup builds once per run ({@link bundleScripts}); any other script, or a run
 * without that setup, goes through `node --import tsx src/...`. Also what files
 * that spawn it share: temporary folders, the embedded database in its default
 * place, the demo's walkthrough of the article's checkpoints.
 *
 * @example
 * ```ts
 * const { code, stdout } = await runCli(["status", "--database-url", db.url]);
 * expect(code).toBe(0);
 * ```
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, expect, inject } from "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    /** Where global setup bundled which scripts for this run (see {@link bundleScripts}). */
    scriptBundle: { dir: string; scripts: string[] } | undefined;
  }
}

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** Absolute, so the child may run in any working directory (a temp folder for the embedded default). */
const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** Extra environment; DATABASE_URL is removed from the inherited one unless given here. */
  env?: Record<string, string>;
  /**
   * Written to stdin, then stdin is closed (stdin is always a pipe, never a TTY). Chunks of an
   * iterable are written as the child reads them: input larger than a test would hold.
   */
  input?: string | Uint8Array | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
  cwd?: string;
}

export function runScript(script: string, args: string[], options: RunOptions = {}): Promise<Run> {
  return collect(spawnScript(script, args, options));
}

/** {@link runScript}'s child process, for a test that watches its output while it runs. */
export function spawnScript(script: string, args: string[], options: RunOptions = {}): ChildProcessWithoutNullStreams {
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env };
  if (!options.env?.DATABASE_URL) delete env.DATABASE_URL;
  delete env.FORCE_COLOR;
  const bundle = inject("scriptBundle");
  const entry = bundle?.scripts.includes(script) ? [join(bundle.dir, basename(script).replace(/\.ts$/, ".mjs"))] : ["--import", TSX, join(ROOT, script)];
  // --liftoff-only, as `npm run demo` runs: a command on the embedded database compiles PGlite's WebAssembly
  // once, without the optimizing second pass that a process of seconds never gains back.
  const child = spawn(process.execPath, ["--liftoff-only", ...entry, ...args], { cwd: options.cwd ?? ROOT, env, stdio: "pipe" });
  feed(child, options.input);
  return child;
}

function feed(child: ChildProcessWithoutNullStreams, input: RunOptions["input"] = ""): void {
  if (typeof input === "string" || input instanceof Uint8Array) child.stdin.end(input);
  // The child may stop reading and exit before the end (EPIPE): what it did is in its exit code and output.
  else pipeline(Readable.from(input), child.stdin).catch(() => undefined);
}

/** A child's exit code and all it printed. */
export function collect(child: ChildProcessWithoutNullStreams): Promise<Run> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

export const runCli = (args: string[], options?: RunOptions) => runScript("src/cli/main.ts", args, options);

/** The first line a run wrote to stderr: where the CLI says what went wrong. */
export const firstLine = (r: Run) => r.stderr.split("\n")[0]!;

/**
 * Temporary folders (working directories, files to import), each made when asked for and all removed
 * after the file that calls this (at its top level; in a describe, after that describe).
 *
 * @example
 * ```ts
 * const tempDir = tempDirs("lgpg-cli-");
 * const r = await runCli(["threads"], { cwd: tempDir() });
 * ```
 */
export function tempDirs(prefix: string): () => string {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  return () => {
    const d = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(d);
    return d;
  };
}

/**
 * `migrate` with no database named, run in `cwd`: it creates the embedded database in the default place
 * (./.langgraph-pg of the working directory), and says so, once, on stderr. Creating a PGlite folder costs
 * seconds: a file makes one in beforeAll and its tests reuse it. Returns the folder.
 */
export async function migrateEmbeddedDefault(cwd: string): Promise<string> {
  const m = await runCli(["migrate"], { cwd });
  if (m.code !== 0) throw new Error(`migrate on the embedded default failed: ${m.stderr}`);
  expect(m.stdout).toMatch(/Migrated schema "public" in embedded database in \.\/\.langgraph-pg from no migration: applied 0000_init, /);
  // Nothing named a database: the CLI says where it went, once, on stderr.
  expect(m.stderr).toBe(
    "langgraph-checkpoint-pg: no --database-url and no DATABASE_URL: using the embedded database in ./.langgraph-pg (created now); " +
      "set DATABASE_URL to use a Postgres server, or pass --data-dir .langgraph-pg to choose this one without this line\n",
  );
  return join(cwd, ".langgraph-pg");
}

/**
 * Runs the CLI as {@link runCli} does, with a loader hook (test/helpers/module-log.mjs) recording the
 * URL of every module the process loaded: what a command loads at start, seen without timing it.
 *
 * @example
 * ```ts
 * const { run, modules } = await modulesLoadedBy(["--help"]);
 * expect(modules.filter((m) => m.includes("/@langchain/"))).toEqual([]);
 * ```
 */
export async function modulesLoadedBy(args: string[], options: RunOptions = {}): Promise<{ run: Run; modules: string[] }> {
  const dir = await mkdtemp(join(tmpdir(), "lgpg-modules-"));
  const log = join(dir, "modules.txt");
  try {
    const hook = `--import=${new URL("./module-log.mjs", import.meta.url).href}`;
    const env = { ...options.env, MODULE_LOG: log, NODE_OPTIONS: [process.env.NODE_OPTIONS, hook].filter(Boolean).join(" ") };
    const run = await runCli(args, { ...options, env });
    const modules = (await readFile(log, "utf8").catch(() => "")).split("\n").filter((l) => l !== "");
    return { run, modules };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The CLI commands a message suggests (each `npx langgraph-checkpoint-pg ...` in backquotes), as the
 * words a POSIX shell would pass (quotes removed), to run them as written with {@link runCli}.
 *
 * @example
 * ```ts
 * const [args] = suggestedCommands(err.message);
 * const run = await runCli(args!, { env: { DATABASE_URL: db.url } });
 * ```
 */
export function suggestedCommands(message: string): string[][] {
  return [...message.matchAll(/`npx langgraph-checkpoint-pg ([^`]*)`/g)].map(([, line]) => shellWords(line!));
}

/** A command line split as sh splits it: '...' literal, "..." with \" and \\ escaped, words on spaces. */
function shellWords(line: string): string[] {
  const words: string[] = [];
  for (const [, single, double, bare] of line.matchAll(/'([^']*)'|"((?:[^"\\]|\\.)*)"|(\S+)/g)) {
    words.push(single ?? double?.replace(/\\(.)/g, "$1") ?? bare!);
  }
  return words;
}

/** The demo as `npm run demo` runs it: scripts/demo.mjs bundles src/demo.ts and runs it without tsx. */
export function runDemo(args: string[], options: RunOptions = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env };
  if (!options.env?.DATABASE_URL) delete env.DATABASE_URL;
  delete env.FORCE_COLOR;
  const child = spawn(process.execPath, [join(ROOT, "scripts", "demo.mjs"), ...args], { cwd: options.cwd ?? ROOT, env, stdio: "pipe" });
  feed(child, options.input);
  return collect(child);
}

/** The form of every channel version the demo prints. */
const VERSION = /^-[a-z][0-9a-z]+\.[0-9][0-9a-z]{7}$/;

/** What `demo --json` prints. */
export interface DemoJson {
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

/** A demo run's --json output, after checking that it ran clean (exit 0, nothing on stderr). */
export const parseDemo = (r: Run) => {
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as DemoJson;
};

/** The article's walkthrough, checkpoint by checkpoint. */
export function expectArticle(d: DemoJson) {
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

/** The scripts the tests spawn, and the library their child processes import ({@link libraryImport}), bundled once per run by global setup. */
export const SCRIPTS = ["src/cli/main.ts", "src/index.ts"];

/**
 * How a child process imports the package's API from source: the URL of global setup's bundle of
 * src/index.ts, run by plain node (a third of the CPU time of tsx, whose hooks see every module
 * load), or, in a run without that setup, src/index.ts itself through tsx. `file`: the name to
 * give a child's module, by its extension plain JavaScript or TypeScript.
 *
 * @example
 * ```ts
 * const lib = libraryImport();
 * writeFileSync(join(dir, lib.file("app")), `import { PostgresSaver } from ${JSON.stringify(lib.url)};\n...`);
 * spawn(process.execPath, [...lib.nodeArgs, lib.file("app")], { cwd: dir });
 * ```
 */
export function libraryImport(): { url: string; nodeArgs: string[]; file(name: string): string } {
  const bundle = inject("scriptBundle");
  if (bundle?.scripts.includes("src/index.ts")) return { url: pathToFileURL(join(bundle.dir, "index.mjs")).href, nodeArgs: [], file: (name) => `${name}.mjs` };
  return { url: pathToFileURL(join(ROOT, "src", "index.ts")).href, nodeArgs: ["--import", TSX], file: (name) => `${name}.mts` };
}

/**
 * Bundles {@link SCRIPTS}: our source compiled into a few files (split at its dynamic imports, so
 * `--help` still loads no driver), packages left as imports. A spawned CLI then starts in plain
 * node, a third of the CPU time under tsx, whose loader hooks see every module load; the CLI
 * tests spawn dozens of processes. The bundle lives in the repository (packages resolve from its
 * node_modules), one folder per run. `import.meta.url` reads as a file in src/cli/, so src/cli/main.ts's
 * `../../package.json` and src/db/migrate.ts's search for `migrations/` resolve as from src/ (src/cli/module.ts
 * only hands it to tsx as a parent URL).
 */
export async function bundleScripts(): Promise<{ dir: string; scripts: string[]; remove(): Promise<void> }> {
  const { build } = await import("esbuild");
  const dir = join(ROOT, ".test-build", String(process.pid));
  await build({
    // Named by file (main.mjs, index.mjs): several entry points would otherwise keep their folders.
    entryPoints: Object.fromEntries(SCRIPTS.map((s) => [basename(s, ".ts"), join(ROOT, s)])),
    bundle: true,
    splitting: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    define: { "import.meta.url": JSON.stringify(pathToFileURL(join(ROOT, "src", "cli", "bundled.mjs")).href) },
    outdir: dir,
    outExtension: { ".js": ".mjs" },
    logLevel: "warning",
  });
  return { dir, scripts: SCRIPTS, remove: () => rm(dir, { recursive: true, force: true }) };
}
