/**
 * Which database the CLI (and the demo) talks to: `--database-url`, else
 * `--data-dir` (embedded), else `DATABASE_URL`, else the embedded database in
 * `./.langgraph-pg`. Closes only what it opened.
 */
import { existsSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import pg from "pg";
import type { PGliteLike } from "../db/db.js";
import { DEFAULT_DATA_DIR, embeddedExtensions, openEmbedded, type OpenEmbeddedOptions } from "../db/embedded.js";
import { CheckpointerError } from "../errors.js";
import { NoEmbeddedDatabaseError } from "./exit.js";
import { maskUrl, resolveUrl, scrub } from "./mask.js";

export interface Target {
  databaseUrl?: string;
  dataDir?: string;
}

export interface Connection {
  pool: pg.Pool | PGliteLike;
  driver: "pg" | "pglite";
  /** Where, for people: a URL with its password masked, or the embedded folder. */
  label: string;
  close(): Promise<void>;
}

/** A connection that failed to open. Exit code 1; the message never holds the password. */
export class ConnectError extends CheckpointerError {
  constructor(label: string, cause: unknown) {
    const why = cause instanceof Error ? cause.message.split("\n")[0] : String(cause);
    super("DATABASE_ERROR", `Could not connect to ${label}: ${why}`, { cause, retryable: true });
  }
}

/**
 * Open the target. `create: false` refuses to create an embedded folder that
 * does not exist (read commands must not leave a database behind).
 */
export async function connect(
  target: Target,
  // vector: load pgvector into the embedded database when it is installed (the store's --dims).
  options: { create: boolean; applicationName: string; loadDataDir?: OpenEmbeddedOptions["loadDataDir"]; vector?: boolean },
): Promise<Connection> {
  const url = resolveUrl(target);
  if (url) {
    const label = maskUrl(url);
    const pool = new pg.Pool({ connectionString: url, application_name: options.applicationName, max: 4, connectionTimeoutMillis: 15_000 });
    // An idle client dying must not crash the CLI with an unhandled 'error' event.
    pool.on("error", () => undefined);
    try {
      await pool.query("SELECT 1");
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw new ConnectError(label, new Error(scrub(err instanceof Error ? err.message : String(err), url)));
    }
    return { pool, driver: "pg", label, close: () => pool.end() };
  }
  const dir = resolve(target.dataDir ?? DEFAULT_DATA_DIR);
  const shown = relative(process.cwd(), dir) || ".";
  const label = `embedded database in ${shown.startsWith("..") ? dir : `./${shown}`}`;
  if (!options.create && !existsSync(join(dir, "pgdata"))) throw new NoEmbeddedDatabaseError(dir);
  const extensions = options.vector ? await embeddedExtensions() : undefined;
  const embedded = await openEmbedded(dir, { ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}), ...(extensions ? { extensions } : {}) });
  return { pool: embedded.db, driver: "pglite", label, close: embedded.close };
}
