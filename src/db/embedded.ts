/**
 * The zero-setup default: Postgres in WebAssembly (PGlite) persisted in a data
 * folder. PGlite is single-process: two processes opening one folder lose
 * writes silently, so a lock file guards the folder. A lock left by a killed
 * process (its pid no longer runs on this host) is taken over safely.
 */
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join, resolve } from "node:path";
import { gunzipSync } from "node:zlib";
import { CheckpointerError, InvalidOptionsError } from "../errors.js";
import type { PGliteLike } from "./db.js";

/** Where the embedded database lives unless told otherwise: `./.langgraph-pg` under the working directory. */
export const DEFAULT_DATA_DIR = ".langgraph-pg";

/**
 * Another process holds the embedded data folder. Stop it, or point this one at
 * another folder or at a real server (`DATABASE_URL`).
 *
 * @example
 * ```ts
 * try { await openEmbedded(); } catch (e) { if (e instanceof DataDirLockedError) console.error(e.holder); }
 * ```
 */
export class DataDirLockedError extends CheckpointerError {
  readonly dataDir: string;
  readonly holder: LockInfo;
  constructor(dataDir: string, holder: LockInfo) {
    super(
      "DATA_DIR_LOCKED",
      `The embedded database in ${dataDir} is in use by process ${holder.pid} on ${holder.host} (since ${holder.since}` +
        `${holder.command ? `, ${holder.command}` : ""}). PGlite allows one process per folder: stop that process, ` +
        "use another data folder, or set DATABASE_URL to share a real Postgres server.",
      { retryable: true },
    );
    this.dataDir = dataDir;
    this.holder = holder;
  }
}

export interface LockInfo {
  pid: number;
  host: string;
  since: string;
  command?: string;
}

export interface EmbeddedDatabase {
  db: PGliteLike;
  dataDir: string;
  /** Close the database and release the folder lock. */
  close(): Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function readLock(file: string): LockInfo | undefined {
  try {
    const info = JSON.parse(readFileSync(file, "utf8")) as LockInfo;
    return Number.isInteger(info.pid) ? info : undefined;
  } catch {
    return undefined;
  }
}

/** Take the folder lock (O_EXCL create), taking over a stale one; returns its release function. */
export function lockDataDir(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, "lock.json");
  const mine: LockInfo = { pid: process.pid, host: hostname(), since: new Date().toISOString(), command: process.argv.slice(1, 3).join(" ") };
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(file, "wx");
      writeSync(fd, JSON.stringify(mine));
      closeSync(fd);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        process.off("exit", release);
        // Only remove our own lock.
        if (readLock(file)?.pid === process.pid) rmSync(file, { force: true });
      };
      process.on("exit", release);
      return release;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const holder = readLock(file);
      if (holder && holder.host === hostname() && !alive(holder.pid)) {
        // Stale: its process is gone. Remove it only if it is still that same lock.
        if (readLock(file)?.pid === holder.pid) rmSync(file, { force: true });
        continue;
      }
      if (holder) throw new DataDirLockedError(dataDir, holder);
      // Unreadable lock: another process is writing it right now; look again.
    }
  }
  throw new DataDirLockedError(dataDir, readLock(file) ?? { pid: -1, host: "unknown", since: "unknown" });
}

/**
 * Options of {@link openEmbedded}.
 *
 * @example
 * ```ts
 * // saved once: writeFileSync("empty.tar", Buffer.from(await (await new PGlite().dumpDataDir("none")).arrayBuffer()))
 * const options: OpenEmbeddedOptions = { loadDataDir: () => readFileSync("empty.tar") };
 * ```
 */
export interface OpenEmbeddedOptions {
  /**
   * Called only when the folder holds no database yet: returns a data folder
   * saved by PGlite's `dumpDataDir()` (a tar, gzipped or not) to start from,
   * instead of running initdb (seconds of CPU). It must come from the same
   * PGlite version. Returning `undefined` runs initdb.
   */
  loadDataDir?: () => Uint8Array | undefined | Promise<Uint8Array | undefined>;
  /** PGlite extensions to load (`{ vector }` from `@electric-sql/pglite-pgvector`), as PGlite's own option takes them. */
  extensions?: Record<string, unknown>;
}

/**
 * Writes a tar of a data folder (regular files and folders only) into `dir`,
 * which must not exist: first into a sibling folder, renamed at the end, so a
 * crash never leaves a half-written database behind. Plain file writes: an
 * order of magnitude cheaper than PGlite's own loadDataDir, which writes
 * through its emulated file system.
 */
function extractDataDir(tar: Uint8Array, dir: string): void {
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

/**
 * Open (creating if needed) the embedded PGlite database in `dataDir`, locked
 * to this process. Needs the optional peer `@electric-sql/pglite`.
 *
 * @example
 * ```ts
 * const { db, close } = await openEmbedded(".langgraph-pg");
 * await migrate({ pool: db });
 * await close();
 * ```
 */
export async function openEmbedded(dataDir: string = DEFAULT_DATA_DIR, options: OpenEmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  if (typeof dataDir !== "string" || dataDir === "") throw new InvalidOptionsError("dataDir", "expected a folder path");
  if (options === null || typeof options !== "object") throw new InvalidOptionsError("options", "expected { loadDataDir? }");
  if (options.loadDataDir !== undefined && typeof options.loadDataDir !== "function") {
    throw new InvalidOptionsError("loadDataDir", "expected a function returning the tar's bytes (or undefined)");
  }
  const dir = resolve(dataDir);
  let mod: { PGlite: new (dir: string, options?: { extensions?: Record<string, unknown> }) => PGliteLike & { waitReady: Promise<void> } };
  try {
    mod = (await import("@electric-sql/pglite")) as unknown as typeof mod;
  } catch {
    throw new InvalidOptionsError(
      "dataDir",
      "the embedded database needs the optional package @electric-sql/pglite (npm install @electric-sql/pglite), or set DATABASE_URL",
    );
  }
  const release = lockDataDir(dir);
  try {
    const pgdata = join(dir, "pgdata");
    // Decided under the lock: no other process can be creating the folder.
    if (options.loadDataDir && !existsSync(pgdata)) {
      const tar = await options.loadDataDir();
      if (tar !== undefined) extractDataDir(tar, pgdata);
    }
    const db = new mod.PGlite(pgdata, options.extensions ? { extensions: options.extensions } : undefined);
    await db.waitReady;
    return {
      db,
      dataDir: dir,
      async close() {
        try {
          if (!db.closed) await db.close();
        } finally {
          release();
        }
      },
    };
  } catch (err) {
    release();
    throw err;
  }
}

/** Embedded databases this process has open through {@link shareEmbedded}, by folder. */
const shared = new Map<string, { open: Promise<EmbeddedDatabase>; users: number }>();

/**
 * The embedded database in `dataDir` for one more user in this process: a
 * saver and a store (`PostgresSaver.open()`, `PostgresStore.open()`) share
 * one PGlite instance and its folder lock, which admits one process, not one
 * opener. The database closes when its last user closes it. pgvector is
 * loaded when `@electric-sql/pglite-pgvector` is installed, so a store with
 * vector search can share the database with a saver opened first.
 *
 * @example
 * ```ts
 * const a = await shareEmbedded(".langgraph-pg");
 * const b = await shareEmbedded(".langgraph-pg"); // the same db
 * await a.close(); await b.close(); // closed now
 * ```
 */
export async function shareEmbedded(dataDir: string = DEFAULT_DATA_DIR): Promise<EmbeddedDatabase> {
  if (typeof dataDir !== "string" || dataDir === "") throw new InvalidOptionsError("dataDir", "expected a folder path");
  const dir = resolve(dataDir);
  let entry = shared.get(dir);
  if (!entry) {
    const open = (async () => openEmbedded(dir, { extensions: await embeddedExtensions() }))();
    entry = { open, users: 0 };
    shared.set(dir, entry);
    open.catch(() => shared.delete(dir));
  }
  entry.users++;
  const current = entry;
  let embedded: EmbeddedDatabase;
  try {
    embedded = await current.open;
  } catch (err) {
    current.users--;
    throw err;
  }
  let closed = false;
  return {
    db: embedded.db,
    dataDir: embedded.dataDir,
    async close() {
      if (closed) return;
      closed = true;
      if (--current.users > 0) return;
      shared.delete(dir);
      await embedded.close();
    },
  };
}

/**
 * The PGlite extensions the embedded database loads: pgvector when the
 * optional package `@electric-sql/pglite-pgvector` is installed (the store's
 * vector search needs it), else none.
 *
 * @example
 * ```ts
 * const { db } = await openEmbedded(dir, { extensions: await embeddedExtensions() });
 * ```
 */
export async function embeddedExtensions(): Promise<Record<string, unknown> | undefined> {
  const vector = await import("@electric-sql/pglite-pgvector" as string).then((m: { vector?: unknown }) => m.vector).catch(() => undefined);
  return vector ? { vector } : undefined;
}
