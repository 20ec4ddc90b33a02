/** The embedded database: its folder held by another process, or a fallback to it refused in production. */
import { CheckpointerError } from "./base.js";

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

/**
 * Nothing named a database: no URL (`DATABASE_URL` included) and no explicit
 * request for the embedded one. With `NODE_ENV=production` that is a missing
 * setting, not a wish for a local folder: in a container the folder and every
 * conversation in it go with the next deploy, and other instances never see
 * it. So {@link refuseImplicitEmbedded} refuses it there.
 *
 * @example
 * ```ts
 * try { await PostgresSaver.open(); } catch (e) { if (e instanceof DatabaseUrlMissingError) console.error(e.message); }
 * ```
 */
export class DatabaseUrlMissingError extends CheckpointerError {
  /** The folder it would have used. */
  readonly dataDir: string;
  constructor(dataDir: string, explicitly: string) {
    super(
      "DATABASE_URL_MISSING",
      `NODE_ENV is production and no database URL is set: refusing to fall back to the embedded database in ${dataDir}, a local folder ` +
        `that a redeploy loses and other instances never see. Set DATABASE_URL to your Postgres server, or ask for the embedded database explicitly: ${explicitly}.`,
    );
    this.dataDir = dataDir;
  }
}
