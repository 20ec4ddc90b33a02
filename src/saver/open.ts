/**
 * What `PostgresSaver.open()` does: choose the database (a server, or the
 * embedded one, whose implicit fallback is refused in production and
 * announced elsewhere), open it, migrate, and never wait for it in silence.
 * Every option is checked first (options.ts), before anything is opened.
 */
import type pg from "pg";
import type { PGliteLike } from "../db/db.js";
import { DEFAULT_DATA_DIR, openEmbeddedFor, refuseImplicitEmbedded } from "../db/embedded.js";
import { InvalidOptionsError } from "../errors.js";
import type { EventHandler } from "../events.js";
import { openOptions, type OpenOptions, type PostgresSaverOptions, type SetupOptions } from "./options.js";

/** How long `open()` waits for a database in silence before it says so on each failed attempt. */
const WAIT_NOTICE_MS = 2000;

/** The saver, as open() needs it: made on a URL or on a database it then owns; set up; ended. */
export interface OpenedSaver {
  setup(options: SetupOptions): Promise<unknown>;
  end(): Promise<void>;
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

/** `PostgresSaver.open()` (see there); `make` builds the saver on what it chose. */
export async function openSaver<S extends OpenedSaver>(
  options: OpenOptions,
  make: {
    onServer(url: string, options: PostgresSaverOptions & { pool?: pg.PoolConfig }): S;
    onEmbedded(db: PGliteLike, options: PostgresSaverOptions, close: () => Promise<void>): S;
  },
): Promise<S> {
  const o = openOptions(options);
  const started = performance.now();
  const explicit = o.embedded === true || o.dataDir !== undefined;
  const url = o.databaseUrl ?? (explicit ? undefined : process.env.DATABASE_URL || undefined);
  if (!url && o.embedded === false) throw new InvalidOptionsError("databaseUrl", "embedded: false, but no databaseUrl was given and DATABASE_URL is not set");
  let opening = true;
  let where = "the embedded database";
  // Waiting in silence looks like a hang: once it has lasted a while, each failed attempt is said.
  const user = o.saver.onEvent;
  const log = o.log;
  const onEvent: EventHandler | undefined = log
    ? (e) => {
        if (opening && e.type === "retry" && performance.now() - started + e.delayMs >= WAIT_NOTICE_MS) {
          log(`langgraph-checkpoint-pg: waiting for ${where}: attempt ${e.attempt} of ${e.attempts} failed (${e.code ?? "error"}); trying again in ${(e.delayMs / 1000).toFixed(1)} s`);
        }
        return user?.(e);
      }
    : user;
  let saver: S;
  if (url) {
    where = serverLabel(url);
    saver = make.onServer(url, { ...o.saver, onEvent, pool: o.pool });
  } else {
    const dataDir = o.dataDir ?? DEFAULT_DATA_DIR;
    if (!explicit) refuseImplicitEmbedded(dataDir, "PostgresSaver.open({ embedded: true }), or open({ dataDir })");
    const embedded = await openEmbeddedFor(o.dataDir !== undefined ? "dataDir" : explicit ? "embedded" : "databaseUrl", dataDir);
    saver = make.onEmbedded(embedded.db, { ...o.saver, onEvent }, embedded.close);
    if (!explicit) {
      log?.(
        `langgraph-checkpoint-pg: no DATABASE_URL: using the embedded database (PGlite) in ${embedded.dataDir}${embedded.created ? " (created now)" : ""}; ` +
          "set DATABASE_URL to use a Postgres server, or pass PostgresSaver.open({ embedded: true }) to choose this one without this line",
      );
    }
  }
  try {
    if (o.migrate) await saver.setup(o.setup);
  } catch (err) {
    await saver.end();
    throw err;
  } finally {
    opening = false;
  }
  return saver;
}
