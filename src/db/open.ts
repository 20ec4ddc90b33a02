/**
 * What `PostgresSaver.open()` and `PostgresStore.open()` share: where the
 * database is (a server, or the embedded one, whose implicit fallback is
 * refused in production and announced elsewhere), opening it (the embedded
 * one shared by both in a process), setting up, and never waiting for it in
 * silence. The callers check every option first, with {@link checkLocation}
 * for these, before anything is opened.
 */
import type pg from "pg";
import { InvalidOptionsError } from "../errors.js";
import type { EventHandler } from "../events.js";
import type { PGliteLike } from "./db.js";
import { DEFAULT_DATA_DIR, refuseImplicitEmbedded, shareEmbedded } from "./embedded.js";

/** How long `open()` waits for a database in silence before it says so on each failed attempt. */
const WAIT_NOTICE_MS = 2000;

/**
 * Where `open()` finds its database, and what it says: the options
 * `PostgresSaver.open()` and `PostgresStore.open()` share.
 *
 * @example
 * ```ts
 * const where: OpenLocationOptions = { databaseUrl: process.env.DATABASE_URL, pool: { max: 20 }, log: false };
 * await PostgresStore.open({ ...where, schema: "memory" });
 * ```
 */
export interface OpenLocationOptions {
  /** A postgres:// URL. Default: the `DATABASE_URL` environment variable, unless `embedded` or `dataDir` asks for the embedded database. */
  databaseUrl?: string;
  /**
   * `true`: the embedded database (PGlite), chosen explicitly: also with
   * `NODE_ENV=production`, and without the notice on stderr. `false`: a server,
   * never the embedded database. Default: a server if a URL is given or set,
   * else the embedded database, which `NODE_ENV=production` refuses.
   */
  embedded?: boolean;
  /** The embedded database's folder (default `./.langgraph-pg`); giving it asks for the embedded database, like `embedded: true`. */
  dataDir?: string;
  /** Apply pending migrations (default true). */
  migrate?: boolean;
  /** Options of the `pg.Pool` that `open()` creates (with `BOUNDED_POOL`'s defaults). */
  pool?: pg.PoolConfig;
  /**
   * Where `open()` writes its own lines: that it fell back to the embedded
   * database, and, once the database has kept it waiting for two seconds, each
   * failed attempt. Default: stderr. A function receives each line; `false`:
   * none (the `retry` events still go to `onEvent`).
   */
  log?: false | ((line: string) => void);
}

/** The names of {@link OpenLocationOptions}. */
export const LOCATION_OPTIONS: readonly string[] = ["databaseUrl", "dataDir", "embedded", "migrate", "pool", "log"] satisfies (keyof OpenLocationOptions)[];

/** {@link OpenLocationOptions}, checked, with their defaults. */
export interface Location {
  databaseUrl: string | undefined;
  dataDir: string | undefined;
  embedded: boolean | undefined;
  migrate: boolean;
  pool: pg.PoolConfig | undefined;
  log: ((line: string) => void) | undefined;
}

/** Each of {@link OpenLocationOptions} checked (no side effect); the caller has refused unknown keys already. */
export function checkLocation(o: OpenLocationOptions): Location {
  const { databaseUrl, dataDir, embedded, migrate, pool, log } = o;
  if (databaseUrl !== undefined && (typeof databaseUrl !== "string" || databaseUrl === "")) throw new InvalidOptionsError("databaseUrl", "expected a postgres:// URL");
  if (dataDir !== undefined && (typeof dataDir !== "string" || dataDir === "")) throw new InvalidOptionsError("dataDir", "expected a folder path");
  if (embedded !== undefined && typeof embedded !== "boolean") throw new InvalidOptionsError("embedded", "expected true or false");
  if (migrate !== undefined && typeof migrate !== "boolean") throw new InvalidOptionsError("migrate", "expected true or false");
  if (pool !== undefined && (pool === null || typeof pool !== "object")) throw new InvalidOptionsError("pool", "expected pg.Pool options (an object)");
  if (log !== undefined && log !== false && typeof log !== "function") throw new InvalidOptionsError("log", "expected false or a function receiving each line");
  if (databaseUrl !== undefined && (embedded === true || dataDir !== undefined)) {
    throw new InvalidOptionsError("databaseUrl", `a server URL and the embedded database (${embedded === true ? "embedded: true" : "dataDir"}) exclude each other`);
  }
  if (embedded === false && dataDir !== undefined) throw new InvalidOptionsError("embedded", "embedded: false and a dataDir exclude each other");
  return {
    databaseUrl,
    dataDir,
    embedded,
    migrate: migrate ?? true,
    pool,
    log: log === false ? undefined : (log ?? ((line) => process.stderr.write(`${line}\n`))),
  };
}

/** Where a URL points, for people: host, port and database, never its credentials. */
function serverLabel(url: string): string {
  try {
    const u = new URL(url);
    return `the database at ${u.hostname}${u.port ? `:${u.port}` : ""}${u.pathname}`;
  } catch {
    return "the database server";
  }
}

/** What an opener makes on the database it chose, and how it sets that up and ends it. */
export interface OpenTarget<T> {
  /** The class, for messages (`PostgresSaver`, `PostgresStore`). */
  name: string;
  /** On a server: a new pool it owns. `onEvent` is the caller's handler with the wait notice around it. */
  onServer(url: string, pool: pg.PoolConfig | undefined, onEvent: EventHandler | undefined): T;
  /** On the embedded database: `close` releases this opener's share of it. */
  onEmbedded(db: PGliteLike, onEvent: EventHandler | undefined, close: () => Promise<void>): T;
  setup(opened: T): Promise<unknown>;
  end(opened: T): Promise<void>;
}

/**
 * `open()` of the saver and of the store: choose the database, open it, set
 * up unless `migrate: false` (ending what was opened if that fails).
 *
 * @example
 * ```ts
 * const store = await openOn(checkLocation({}), undefined, { name: "PostgresStore", onServer, onEmbedded, setup: (s) => s.setup(), end: (s) => s.stop() });
 * ```
 */
export async function openOn<T>(location: Location, userOnEvent: EventHandler | undefined, target: OpenTarget<T>): Promise<T> {
  const o = location;
  const started = performance.now();
  const explicit = o.embedded === true || o.dataDir !== undefined;
  const url = o.databaseUrl ?? (explicit ? undefined : process.env.DATABASE_URL || undefined);
  if (!url && o.embedded === false) throw new InvalidOptionsError("databaseUrl", "embedded: false, but no databaseUrl was given and DATABASE_URL is not set");
  let opening = true;
  let where = "the embedded database";
  // Waiting in silence looks like a hang: once it has lasted a while, each failed attempt is said.
  const log = o.log;
  const onEvent: EventHandler | undefined = log
    ? (e) => {
        // Official tables left alone in other schemas: said once, as the CLI says it.
        if (e.type === "officialTablesFound") log(`langgraph-checkpoint-pg: ${e.message}`);
        if (opening && e.type === "retry" && performance.now() - started + e.delayMs >= WAIT_NOTICE_MS) {
          log(`langgraph-checkpoint-pg: waiting for ${where}: attempt ${e.attempt} of ${e.attempts} failed (${e.code ?? "error"}); trying again in ${(e.delayMs / 1000).toFixed(1)} s`);
        }
        return userOnEvent?.(e);
      }
    : userOnEvent;
  let opened: T;
  if (url) {
    where = serverLabel(url);
    opened = target.onServer(url, o.pool, onEvent);
  } else {
    const dataDir = o.dataDir ?? DEFAULT_DATA_DIR;
    if (!explicit) refuseImplicitEmbedded(dataDir, `${target.name}.open({ embedded: true }), or open({ dataDir })`);
    // Shared with the other opener of this process (a saver and a store): the folder admits one process, not one opener.
    const embedded = await shareEmbedded(dataDir, o.dataDir !== undefined ? "dataDir" : explicit ? "embedded" : "databaseUrl");
    try {
      opened = target.onEmbedded(embedded.db, onEvent, embedded.close);
    } catch (err) {
      await embedded.close();
      throw err;
    }
    if (!explicit) {
      log?.(
        `langgraph-checkpoint-pg: no DATABASE_URL: using the embedded database (PGlite) in ${embedded.dataDir}${embedded.created ? " (created now)" : ""}; ` +
          `set DATABASE_URL to use a Postgres server, or pass ${target.name}.open({ embedded: true }) to choose this one without this line`,
      );
    }
  }
  try {
    if (o.migrate) await target.setup(opened);
  } catch (err) {
    await target.end(opened);
    throw err;
  } finally {
    opening = false;
  }
  return opened;
}
