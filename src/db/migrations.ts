/**
 * The migrations this package ships (`migrations/`, drizzle-kit output read
 * from the journal) and where a schema stands against them: its version,
 * its compatibility level (compat.ts), and the check every operation makes
 * before it touches the tables ({@link assertSchemaCurrent}). Applying them
 * is migrate.ts's job.
 *
 * Two tracks of migrations share all of this: the checkpointer's (the
 * default everywhere here) and the store's (`migrations/store/`, see
 * src/store/migrations.ts), each numbered on its own and recorded in its own
 * table, so that a store migration and a checkpointer migration written at
 * the same time never claim the same number, and a checkpointer-only schema
 * never gets the store's tables.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Queryable } from "./db.js";
import { DatabaseOperationError, MigrationError, SchemaNotMigratedError, SchemaTooNewError, sqlStateOf } from "../errors.js";
import { emit, type EventHandler } from "../events.js";
import { quoteIdent } from "../validate.js";
import { compatibleFrom } from "./compat.js";
import { CHECKPOINTS, OWN_TABLES } from "./names.js";

/** Name of the table, inside the target schema, that records applied migrations. */
export const MIGRATIONS_TABLE = "checkpointer_migrations";

/**
 * One numbered sequence of migrations: where its files are, which table
 * records it, which tables a migration of it locks first, and its
 * compatibility levels (compat.ts for the checkpointer's).
 *
 * @example
 * ```ts
 * latestVersion(CHECKPOINTER_TRACK); // the same as latestVersion()
 * ```
 */
export interface MigrationTrack {
  /** Names the track in messages. */
  readonly name: "checkpointer" | "store";
  /** Its folder inside the package's `migrations/` (`""`: that folder itself). */
  readonly folder: string;
  /** The table, in the target schema, that records its applied migrations. */
  readonly table: string;
  /** The tables its migrations lock (ACCESS EXCLUSIVE) before the first pending one runs. */
  readonly ownTables: readonly string[];
  /** The oldest code level that keeps working once migration `version` is applied (see compat.ts). */
  compatibleFrom(version: number): number;
  /** The column its tables are hash partitioned on, when a schema asks for partitions (partitions.ts): every table that has it. */
  readonly partitionKey: string;
  /** The table its first migration creates: how many partitions it has is the schema's layout. */
  readonly firstTable: string;
}

/** The checkpointer's migrations: `migrations/`, recorded in `checkpointer_migrations`. */
export const CHECKPOINTER_TRACK: MigrationTrack = {
  name: "checkpointer",
  folder: "",
  table: MIGRATIONS_TABLE,
  ownTables: OWN_TABLES,
  compatibleFrom,
  partitionKey: CHECKPOINTS.threadId,
  firstTable: CHECKPOINTS.table,
};

/** One migration file. `version` is 1-based and dense. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
  sha256: string;
  statements: string[];
}

const PACKAGE_NAME = "langgraph-checkpoint-pg";

/**
 * The `migrations/` folder of this package: the first folder above this module
 * whose package.json is this package's (src/ and dist/ in a clone, dist/ and
 * dist/cjs/ where installed, a bundle under node_modules/.cache). Checking the
 * name matters: a host application using drizzle has its own
 * `migrations/meta/_journal.json`, which must never be applied here.
 * (The CommonJS build defines `import.meta.url` as its own file's URL.)
 */
function migrationsDir(): string {
  const journal = packageFile(join("migrations", "meta", "_journal.json"));
  if (journal) return dirname(dirname(journal));
  throw new MigrationError(
    `the migrations of ${PACKAGE_NAME} were not found in any folder above ${dirname(fileURLToPath(import.meta.url))}: ` +
      `keep the package's files together (a bundler must leave ${PACKAGE_NAME} external, or copy its migrations/ folder next to its package.json)`,
  );
}

/**
 * A file this package ships (`relative` to its root), found as
 * {@link migrationsDir} finds the migrations; undefined when it is not there.
 */
export function packageFile(relative: string): string | undefined {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, relative)) && packageName(join(dir, "package.json")) === PACKAGE_NAME) return join(dir, relative);
    if (dirname(dir) === dir) return undefined;
  }
}

function packageName(file: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(file, "utf8")) as { name?: string }).name;
  } catch {
    return undefined;
  }
}

const cached = new Map<MigrationTrack, Migration[]>();

/**
 * The migrations shipped with this package, in order (the checkpointer's, or another track's).
 *
 * @example
 * ```ts
 * console.log(loadMigrations().map((m) => m.name)); // ["0000_init", ...]
 * ```
 */
export function loadMigrations(track: MigrationTrack = CHECKPOINTER_TRACK): Migration[] {
  const known = cached.get(track);
  if (known) return known;
  const dir = join(migrationsDir(), track.folder);
  const journal = JSON.parse(readFileSync(join(dir, "meta", "_journal.json"), "utf8")) as {
    entries: { idx: number; tag: string }[];
  };
  const loaded = [...journal.entries]
    .sort((a, b) => a.idx - b.idx)
    .map((entry, i) => {
      if (entry.idx !== i) throw new MigrationError(`${join("migrations", track.folder, "meta", "_journal.json")} is not dense at index ${i}`);
      const sql = readFileSync(join(dir, `${entry.tag}.sql`), "utf8");
      return {
        version: i + 1,
        name: entry.tag,
        sql,
        sha256: createHash("sha256").update(sql).digest("hex"),
        statements: sql
          .split("--> statement-breakpoint")
          .map((s) => s.trim())
          .filter((s) => s.length > 0),
      };
    });
  cached.set(track, loaded);
  return loaded;
}

/** The migration version this code requires. */
export function latestVersion(track: MigrationTrack = CHECKPOINTER_TRACK): number {
  return loadMigrations(track).length;
}

/**
 * The migration version recorded in `schema` (0 when none). Read-only.
 *
 * @example
 * ```ts
 * const v = await schemaVersion(pool, "public");
 * if (v < latestVersion()) console.log("migrations pending");
 * ```
 */
export async function schemaVersion(db: Queryable, schema: string, track: MigrationTrack = CHECKPOINTER_TRACK): Promise<number> {
  try {
    const res = await db.query<{ v: number }>(`SELECT coalesce(pg_catalog.max(version), 0)::int AS v FROM ${quoteIdent(schema)}.${track.table}`);
    return res.rows[0]!.v;
  } catch (err) {
    // 42P01 undefined_table, 3F000 invalid_schema_name: nothing migrated yet.
    if (sqlStateOf(err) === "42P01" || sqlStateOf(err) === "3F000") return 0;
    throw err;
  }
}

/**
 * The schema's migration level, and the oldest code level its migrations
 * newer than this code work with (see compat.ts). Read-only.
 */
export async function schemaLevel(db: Queryable, schema: string, track: MigrationTrack = CHECKPOINTER_TRACK): Promise<{ version: number; compatibleFrom: number }> {
  const known = latestVersion(track);
  try {
    const res = await db.query<{ v: number; cf: number }>(
      `SELECT coalesce(pg_catalog.max(version), 0)::int AS v,
              coalesce(pg_catalog.max(coalesce((pg_catalog.to_jsonb(m) ->> 'compatible_from')::int, version)) FILTER (WHERE version > $1), 0)::int AS cf
         FROM ${quoteIdent(schema)}.${track.table} m`,
      [known],
    );
    return { version: res.rows[0]!.v, compatibleFrom: res.rows[0]!.cf };
  } catch (err) {
    // 42P01 undefined_table, 3F000 invalid_schema_name: nothing migrated yet.
    if (sqlStateOf(err) === "42P01" || sqlStateOf(err) === "3F000") return { version: 0, compatibleFrom: 0 };
    throw err;
  }
}

/**
 * Refuse a schema this code cannot work on: not (fully) migrated, or migrated
 * by a newer release whose newer migrations this code does not work with. A
 * newer schema whose newer migrations are additive (compat.ts) is accepted,
 * with a `schemaNewer` event. `operation` names the caller in a connection error.
 *
 * @example
 * ```ts
 * await assertSchemaCurrent(db, "public", "prune"); // SchemaNotMigratedError until migrate() ran
 * ```
 */
export async function assertSchemaCurrent(
  db: Queryable,
  schema: string,
  operation: string,
  onEvent?: EventHandler,
  track: MigrationTrack = CHECKPOINTER_TRACK,
): Promise<void> {
  let level: { version: number; compatibleFrom: number };
  try {
    level = await schemaLevel(db, schema, track);
  } catch (err) {
    throw new DatabaseOperationError(`${operation} (checking the schema version)`, err);
  }
  const known = latestVersion(track);
  if (level.version < known) throw new SchemaNotMigratedError(schema, level.version, known, { track: track.name });
  if (level.version > known) {
    if (level.compatibleFrom > known) throw new SchemaTooNewError(schema, level.version, known, level.compatibleFrom, { track: track.name });
    emit(onEvent, { type: "schemaNewer", schema, schemaVersion: level.version, codeVersion: known });
  }
}
