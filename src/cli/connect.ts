/**
 * Which database the CLI (and the demo) talks to: `--database-url`, else
 * `--data-dir` (embedded), else `DATABASE_URL`, else the embedded database in
 * `./.langgraph-pg`: a fallback refused with NODE_ENV=production and
 * announced on stderr elsewhere (the demo neither: it is a demo). Closes
 * only what it opened.
 */
import { existsSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import pg from "pg";
import type { PGliteLike } from "../db/db.js";
import { DEFAULT_DATA_DIR, embeddedExtensions, openEmbedded, refuseImplicitEmbedded } from "../db/embedded.js";
import { CheckpointerError, failureText, isRetryable } from "../errors.js";
import { BIN } from "./args.js";
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

/**
 * A connection that failed to open. Exit code 1; retryable as its cause is
 * (a server still starting, yes; a wrong password, no). The message carries
 * what the server said, never the password.
 */
export class ConnectError extends CheckpointerError {
  constructor(label: string, cause: unknown, url: string) {
    super("DATABASE_ERROR", `Could not connect to ${label} ${scrub(failureText(cause), url)}`, { cause, retryable: isRetryable(cause) });
  }
}

/** What to pass for the embedded database instead, said when the CLI refuses or announces the fallback. */
const EXPLICITLY = `--data-dir ${DEFAULT_DATA_DIR}`;

/**
 * Open the target. `create: false` refuses to create an embedded folder that
 * does not exist (read commands must not leave a database behind). `notice`
 * (the CLI's stderr): falling back to the embedded database, when nothing
 * named a database, is refused with NODE_ENV=production and otherwise
 * announced through it. The demo passes none.
 */
export async function connect(
  target: Target,
  // vector: load pgvector into the embedded database when it is installed (the store's --dims).
  // schema: the one the command works on, for the command a missing embedded database suggests.
  options: { create: boolean; applicationName: string; notice?: (line: string) => void; vector?: boolean; schema?: string },
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
      throw new ConnectError(label, err, url);
    }
    return { pool, driver: "pg", label, close: () => pool.end() };
  }
  const dir = resolve(target.dataDir ?? DEFAULT_DATA_DIR);
  const shown = relative(process.cwd(), dir) || ".";
  const label = `embedded database in ${shown.startsWith("..") ? dir : `./${shown}`}`;
  const implicit = target.dataDir === undefined && options.notice !== undefined;
  if (implicit) refuseImplicitEmbedded(dir, `${EXPLICITLY} (or another folder)`);
  if (!options.create && !existsSync(join(dir, "pgdata"))) throw new NoEmbeddedDatabaseError(dir, { schema: options.schema ?? "public", dataDirGiven: target.dataDir !== undefined });
  const extensions = options.vector ? await embeddedExtensions() : undefined;
  const embedded = await openEmbedded(dir, extensions ? { extensions } : {});
  if (implicit) {
    options.notice!(
      `${BIN}: no --database-url and no DATABASE_URL: using the ${label}${embedded.created ? " (created now)" : ""}; ` +
        `set DATABASE_URL to use a Postgres server, or pass ${EXPLICITLY} to choose this one without this line`,
    );
  }
  return { pool: embedded.db, driver: "pglite", label, close: embedded.close };
}
