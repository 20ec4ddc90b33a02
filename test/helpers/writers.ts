/**
 * Drives test/helpers/writer.ts: a writer process (the official saver, or an
 * older release of this package) that keeps writing while a test migrates,
 * adopts or rolls back under it.
 *
 * @example
 * ```ts
 * const w = startWriter("official", db.url, "public", ["t1", "t2"]);
 * await w.ready;
 * await w.waitForAcks(10);
 * const { code } = await w.stop();
 * ```
 */
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT } from "./cli.js";

const TSX = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

export interface Ack {
  thread: string;
  ns: string;
  id: string;
}

export interface WriterError {
  thread: string;
  /** The error's `code` (a SQLSTATE from pg, a stable code from this package). */
  code: string | undefined;
  /** The SQLSTATE, from pg or from this package's `sqlState`. */
  sqlState: string | undefined;
  message: string;
}

export interface Writer {
  /** Every checkpoint the writer's saver acknowledged, in order. */
  acks: Ack[];
  /** Every invocation that failed. */
  errors: WriterError[];
  /** Resolves once the writer writes. */
  ready: Promise<void>;
  /** Resolves once at least `n` acks arrived in all (rejects if the process ends first). */
  waitForAcks(n: number): Promise<void>;
  /** Resolves once at least `n` failed invocations were reported (rejects if the process ends first). */
  waitForErrors(n: number): Promise<void>;
  /** Ends stdin (the writer finishes the invocation in flight) and waits for the exit. */
  stop(): Promise<{ code: number | null; stderr: string }>;
}

export function startWriter(kind: string, url: string, schema: string, threads: string[]): Writer {
  const child = spawn(process.execPath, ["--import", TSX, join(ROOT, "test/helpers/writer.ts"), kind, url, schema, threads.join(",")], {
    cwd: ROOT,
    stdio: "pipe",
  });
  const acks: Ack[] = [];
  const errors: WriterError[] = [];
  let stderr = "";
  let buffer = "";
  let exited: { code: number | null } | undefined;
  const listeners = new Set<() => void>();
  const notify = () => listeners.forEach((l) => l());
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    listeners.add(() => {
      if (exited) reject(new Error(`writer exited (${exited.code}) before it was ready: ${stderr.slice(-2000)}`));
    });
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    buffer += d;
    let nl: number;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      const msg = JSON.parse(line) as { ready?: true; ack?: Ack; error?: WriterError };
      if (msg.ready) markReady();
      if (msg.ack) acks.push(msg.ack);
      if (msg.error) errors.push(msg.error);
    }
    notify();
  });
  const done = new Promise<{ code: number | null; stderr: string }>((resolve) => {
    child.on("close", (code) => {
      exited = { code };
      notify();
      resolve({ code, stderr });
    });
  });
  /** Resolves when `condition` holds after a message; rejects if the writer exits first. */
  const until = (condition: () => boolean, what: string) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (condition()) {
          listeners.delete(check);
          resolve();
        } else if (exited) {
          listeners.delete(check);
          reject(new Error(`writer exited (${exited.code}) before ${what} (${acks.length} acks, ${errors.length} errors): ${stderr.slice(-2000)}`));
        }
      };
      listeners.add(check);
      check();
    });
  return {
    acks,
    errors,
    ready,
    waitForAcks: (n) => until(() => acks.length >= n, `${n} acks`),
    waitForErrors: (n) => until(() => errors.length >= n, `${n} errors`),
    async stop() {
      child.stdin.end();
      return done;
    },
  };
}
