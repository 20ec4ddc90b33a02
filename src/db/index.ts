/**
 * The database layer, below the saver and the operations tools: the drivers
 * (db.ts: a pg pool or client, or PGlite, behind one `Db`), the table
 * definitions (schema.ts, drizzle; the migrations are generated from it and
 * names.ts checks the statements' names against it), the migrations runner
 * (migrate.ts, the shipped files and the schema checks in migrations.ts, its
 * trust checks in trust.ts, the compatibility levels in compat.ts), the
 * embedded database (embedded.ts; the empty database a new folder starts from
 * in snapshot.ts), and what the saver's and the store's `open()` share (open.ts:
 * which database, the production rule, the notices). Nothing here knows LangGraph. This file is
 * what the package exports from the folder.
 */
export {
  migrate,
  loadMigrations,
  latestVersion,
  schemaVersion,
  MIGRATIONS_TABLE,
  DEFAULT_RETRY,
  type MigrateOptions,
  type MigrateResult,
  type Migration,
  type AdoptOption,
  type RetryOptions,
  type TargetOptions,
} from "./migrate.js";
export { COMPATIBILITY, type MigrationCompatibility } from "./compat.js";
export {
  openEmbedded,
  lockDataDir,
  DataDirLockedError,
  DatabaseUrlMissingError,
  DEFAULT_DATA_DIR,
  type EmbeddedDatabase,
  type LockInfo,
  type OpenEmbeddedOptions,
} from "./embedded.js";
export type { OpenLocationOptions } from "./open.js";
export type { PGliteLike } from "./db.js";
