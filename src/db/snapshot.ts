/**
 * The data folder a new embedded database starts from. PGlite's initdb runs
 * a second Postgres in WebAssembly (initdb.wasm driving its own instance)
 * before the real one starts: on a new folder that was most of the first
 * run's time and half its peak memory (issue 28). So the package ships what
 * initdb makes, once, saved by PGlite (`npm run embedded:snapshot`):
 * `embedded/initdb.tar.br` (brotli), described by `embedded/initdb.json`. It
 * holds no migration, so a new migration never makes it stale; a data folder
 * belongs to one Postgres build, so it is used only with the PGlite version
 * that made it, and otherwise initdb runs as before.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { InvalidOptionsError } from "../errors.js";
import { packageFile } from "./migrations.js";

/** The snapshot and its description, relative to the package's root. */
export const SNAPSHOT_FILE = "embedded/initdb.tar.br";
export const SNAPSHOT_INFO = "embedded/initdb.json";

/** What `embedded/initdb.json` says about the snapshot. */
export interface SnapshotInfo {
  /** The PGlite version that made it (the only one that uses it). */
  pglite: string;
  /** Its Postgres version (`SHOW server_version`). */
  postgres: string;
  /** `pg_control_system().system_identifier`: every folder started from it has this one; initdb makes a new one. */
  systemIdentifier: string;
}

/** The shipped snapshot's description, if the package has one. */
export function snapshotInfo(): SnapshotInfo | undefined {
  const file = packageFile(SNAPSHOT_INFO);
  return file ? (JSON.parse(readFileSync(file, "utf8")) as SnapshotInfo) : undefined;
}

/** The tar of the shipped snapshot when it belongs to the installed PGlite; undefined otherwise (initdb then runs). */
export function shippedSnapshot(): Uint8Array | undefined {
  const info = snapshotInfo();
  const file = packageFile(SNAPSHOT_FILE);
  if (!info || !file || info.pglite !== installedPGlite()) return undefined;
  return brotliDecompressSync(readFileSync(file));
}

/** The installed PGlite's version (its package.json is not exported: found above its entry point). */
export function installedPGlite(): string | undefined {
  let dir: string;
  try {
    dir = dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite"));
  } catch {
    return undefined;
  }
  for (; !existsSync(join(dir, "package.json")); dir = dirname(dir)) if (dirname(dir) === dir) return undefined;
  return (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { version?: string }).version;
}

/**
 * Writes a tar of a data folder (regular files and folders only) into `dir`,
 * which must not exist: first into a sibling folder, renamed at the end, so a
 * crash never leaves a half-written database behind. Plain file writes: an
 * order of magnitude cheaper than PGlite's own loadDataDir, which writes
 * through its emulated file system.
 */
export function extractDataDir(tar: Uint8Array, dir: string): void {
  const data = tar[0] === 0x1f && tar[1] === 0x8b ? gunzipSync(tar) : tar;
  const temp = `${dir}.loading-${process.pid}`;
  rmSync(temp, { recursive: true, force: true });
  try {
    writeEntries(data, temp);
  } catch (err) {
    rmSync(temp, { recursive: true, force: true });
    throw err;
  }
  renameSync(temp, dir);
}

/** The tar's entries into `temp`, each path checked to stay inside it. */
function writeEntries(data: Uint8Array, temp: string): void {
  const bad = (why: string) => new InvalidOptionsError("loadDataDir", `not a PGlite data folder tar: ${why}`);
  const text = (header: Uint8Array, from: number, to: number) => {
    const field = header.subarray(from, to);
    const end = field.indexOf(0);
    return Buffer.from(end < 0 ? field : field.subarray(0, end)).toString("utf8");
  };
  for (let at = 0; at + 512 <= data.length; ) {
    const header = data.subarray(at, at + 512);
    if (header.every((b) => b === 0)) break;
    const prefix = text(header, 345, 500);
    const name = (prefix ? `${prefix}/` : "") + text(header, 0, 100);
    const size = Number.parseInt(text(header, 124, 136).trim() || "0", 8);
    const type = header[156] === 0 ? "0" : String.fromCharCode(header[156]!);
    const parts = name.split("/").filter((p) => p !== "" && p !== ".");
    if (!Number.isSafeInteger(size) || size < 0 || at + 512 + size > data.length) throw bad(`entry ${JSON.stringify(name)} is cut short`);
    if (parts.some((p) => p === "..")) throw bad(`entry ${JSON.stringify(name)} leaves the folder`);
    const path = join(temp, ...parts);
    if (type === "5") mkdirSync(path, { recursive: true, mode: 0o700 });
    else if (type === "0") {
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      writeFileSync(path, data.subarray(at + 512, at + 512 + size), { mode: 0o600 });
    } else throw bad(`entry ${JSON.stringify(name)} is neither a file nor a folder`);
    at += 512 + Math.ceil(size / 512) * 512;
  }
  if (!existsSync(join(temp, "PG_VERSION"))) throw bad("it holds no PG_VERSION");
}
