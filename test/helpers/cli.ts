/**
 * Spawns the real CLI (or demo) from source, as a child process, the way a
 * user or a CI step runs it: `node .test-build/cli.mjs ...`, a bundle of src/
 * that global setup builds once per run ({@link bundleScripts}); any other
 * script, or a run without that setup, goes through `node --import tsx src/...`.
 *
 * @example
 * ```ts
 * const { code, stdout } = await runCli(["status", "--database-url", db.url]);
 * expect(code).toBe(0);
 * ```
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { inject } from "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    /** The scripts global setup bundled for this run (see {@link bundleScripts}). */
    bundledScripts: string[] | undefined;
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
  /** Written to stdin, then stdin is closed (stdin is always a pipe, never a TTY). */
  input?: string;
  cwd?: string;
}

export function runScript(script: string, args: string[], options: RunOptions = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env };
  if (!options.env?.DATABASE_URL) delete env.DATABASE_URL;
  delete env.FORCE_COLOR;
  const bundled = inject("bundledScripts")?.includes(script) ? [bundlePath(script)] : undefined;
  const child = spawn(process.execPath, [...(bundled ?? ["--import", TSX, join(ROOT, script)]), ...args], { cwd: options.cwd ?? ROOT, env, stdio: "pipe" });
  child.stdin.end(options.input ?? "");
  return collect(child);
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

export const runCli = (args: string[], options?: RunOptions) => runScript("src/cli.ts", args, options);
export const runDemo = (args: string[], options?: RunOptions) => runScript("src/demo.ts", args, options);

/** The scripts the tests spawn, bundled once per run by global setup. */
export const SCRIPTS = ["src/cli.ts", "src/demo.ts"];
/**
 * One level below the root, so a bundle's `../migrations` and `../package.json` resolve as
 * they do from src/ (and from dist/, what users run).
 */
const BUNDLE_DIR = join(ROOT, ".test-build");
const bundlePath = (script: string) => join(BUNDLE_DIR, script.replace(/^src\//, "").replace(/\.ts$/, ".mjs"));

/**
 * Bundles {@link SCRIPTS} (our source in one file, packages left as imports): a spawned CLI then
 * starts in plain node, a third of the CPU time under tsx, whose loader hooks see every module
 * load. The CLI tests spawn dozens of processes; on a busy machine that is most of their time.
 * Returns the scripts bundled; a script not in it runs through tsx.
 */
export async function bundleScripts(): Promise<string[]> {
  const { build } = await import("esbuild");
  await build({
    entryPoints: SCRIPTS.map((s) => join(ROOT, s)),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    outdir: BUNDLE_DIR,
    outExtension: { ".js": ".mjs" },
    logLevel: "warning",
  });
  return SCRIPTS;
}
