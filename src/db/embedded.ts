/**
 * The zero-setup default: Postgres in WebAssembly (PGlite) persisted in a data
 * folder. PGlite is single-process: two processes opening one folder lose
 * writes silently, so a lock file guards the folder. A lock left by a killed
 * process (its pid no longer runs on this host) is taken over safely. A new
 * folder starts from the shipped empty database (snapshot.ts). Falling back to
 * it when no database was named is refused in production
 * ({@link refuseImplicitEmbedded}).
 */
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { CheckpointerError, InvalidOptionsError } from "../errors.js";
import type { PGliteLike } from "./db.js";
import { extractDataDir, shippedSnapshot } from "./snapshot.js";
import { DataDirLockedError, DatabaseUrlMissingError, type LockInfo } from "../errors.js";

/** The embedded database's buffer cache: a local, one-process database; its pages are in the OS cache anyway. */
const EMBEDDED_SHARED_BUFFERS = "16MB";

/** Where the embedded database lives unless told otherwise: `./.langgraph-pg` under the working directory. */
export const DEFAULT_DATA_DIR = ".langgraph-pg";



export interface EmbeddedDatabase {
  db: PGliteLike;
  dataDir: string;
  /** Set when this call created the database: from the shipped (or a given) snapshot, or by PGlite's initdb. */
  created?: "snapshot" | "initdb";
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
   * PGlite version. Returning `undefined` runs initdb. Default: the empty
   * database this package ships for its PGlite version (see src/db/snapshot.ts),
   * or initdb with any other version.
   */
  loadDataDir?: () => Uint8Array | undefined | Promise<Uint8Array | undefined>;
  /** PGlite extensions to load (`{ vector }` from `@electric-sql/pglite-pgvector`), as PGlite's own option takes them. */
  extensions?: Record<string, unknown>;
}

/**
 * Open (creating if needed) the embedded PGlite database in `dataDir`, locked
 * to this process. Needs `@electric-sql/pglite`, an optional dependency (installed unless left out with `--omit=optional`).
 *
 * @example
 * ```ts
 * const { db, close } = await openEmbedded(".langgraph-pg");
 * await migrate({ pool: db });
 * await close();
 * ```
 */
export function openEmbedded(dataDir: string = DEFAULT_DATA_DIR, options: OpenEmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  return openEmbeddedFor("dataDir", dataDir, options);
}

/**
 * {@link openEmbedded}, its errors naming `field`: the option that led here
 * (`PostgresSaver.open()` without a database URL names `databaseUrl`).
 */
export async function openEmbeddedFor(field: string, dataDir: string, options: OpenEmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  if (typeof dataDir !== "string" || dataDir === "") throw new InvalidOptionsError("dataDir", "expected a folder path");
  if (options === null || typeof options !== "object") throw new InvalidOptionsError("options", "expected { loadDataDir? }");
  if (options.loadDataDir !== undefined && typeof options.loadDataDir !== "function") {
    throw new InvalidOptionsError("loadDataDir", "expected a function returning the tar's bytes (or undefined)");
  }
  const dir = resolve(dataDir);
  let mod: {
    PGlite: (new (dir: string, options?: { startParams?: string[]; extensions?: Record<string, unknown> }) => PGliteLike & { waitReady: Promise<void> }) & {
      defaultStartParams?: string[];
    };
  };
  try {
    mod = (await import("@electric-sql/pglite")) as unknown as typeof mod;
  } catch {
    throw new InvalidOptionsError(
      field,
      `${field === "databaseUrl" ? "none was given and DATABASE_URL is not set, and " : ""}the embedded database needs the optional package ` +
        "@electric-sql/pglite (npm install @electric-sql/pglite), or set DATABASE_URL",
    );
  }
  const release = lockDataDir(dir);
  try {
    const pgdata = join(dir, "pgdata");
    let created: EmbeddedDatabase["created"];
    // Decided under the lock: no other process can be creating the folder.
    if (!existsSync(pgdata)) {
      const tar = options.loadDataDir ? await options.loadDataDir() : shippedSnapshot();
      if (tar !== undefined) extractDataDir(tar, pgdata);
      created = tar === undefined ? "initdb" : "snapshot";
    }
    // PGlite touches every shared buffer as it starts: Postgres' default 128 MB is a third of an
    // embedded database's peak memory. Its own start parameters stay (where this PGlite says what they are).
    const defaults = mod.PGlite.defaultStartParams;
    const db = new mod.PGlite(pgdata, {
      ...(Array.isArray(defaults) ? { startParams: [...defaults, "-c", `shared_buffers=${EMBEDDED_SHARED_BUFFERS}`] } : {}),
      ...(options.extensions ? { extensions: options.extensions } : {}),
    });
    await db.waitReady;
    return {
      db,
      dataDir: dir,
      ...(created ? { created } : {}),
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
 * The embedded database in `dataDir` for one more user in this process (its
 * errors naming `field`, as {@link openEmbeddedFor}'s): a
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
export async function shareEmbedded(dataDir: string = DEFAULT_DATA_DIR, field = "dataDir"): Promise<EmbeddedDatabase> {
  if (typeof dataDir !== "string" || dataDir === "") throw new InvalidOptionsError("dataDir", "expected a folder path");
  const dir = resolve(dataDir);
  let entry = shared.get(dir);
  let first = false;
  if (!entry) {
    first = true;
    const open = (async () => openEmbeddedFor(field, dir, { extensions: await embeddedExtensions() }))();
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
    // Only the opener whose call created the folder says so.
    ...(first && embedded.created ? { created: embedded.created } : {}),
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


/**
 * The rule for every fallback to the embedded database (open(), the CLI):
 * refused with `NODE_ENV=production` ({@link DatabaseUrlMissingError}, saying
 * how to ask for it `explicitly`), allowed elsewhere.
 */
export function refuseImplicitEmbedded(dataDir: string, explicitly: string): void {
  if (process.env.NODE_ENV?.trim().toLowerCase() === "production") throw new DatabaseUrlMissingError(resolve(dataDir), explicitly);
}
