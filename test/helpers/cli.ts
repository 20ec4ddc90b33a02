/**
 * Spawns the real CLI (or demo) from source, as a child process, the way a
 * user or a CI step runs it: `node --import tsx src/cli.ts ...`, `node scripts/demo.mjs ...`.
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
  const child = spawn(process.execPath, ["--import", TSX, join(ROOT, script), ...args], { cwd: options.cwd ?? ROOT, env, stdio: "pipe" });
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

/** The demo as `npm run demo` runs it: scripts/demo.mjs bundles src/demo.ts and runs it without tsx. */
export function runDemo(args: string[], options: RunOptions = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env };
  if (!options.env?.DATABASE_URL) delete env.DATABASE_URL;
  delete env.FORCE_COLOR;
  const child = spawn(process.execPath, [join(ROOT, "scripts", "demo.mjs"), ...args], { cwd: options.cwd ?? ROOT, env, stdio: "pipe" });
  child.stdin.end(options.input ?? "");
  return collect(child);
}
