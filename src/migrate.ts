/**
 * Versioned schema migrations. The SQL files in `migrations/` are drizzle-kit
 * output; this module applies the pending ones to a target schema:
 * - in ONE transaction (all or nothing: never a half-migrated schema),
 * - under a transaction-scoped advisory lock keyed by database and schema,
 *   so concurrent migrators queue instead of racing,
 * - recorded in our own table `checkpointer_migrations` inside the target
 *   schema (never drizzle's shared default table, which a host app's own
 *   drizzle migrations also use),
 * - refusing a schema newer than this code, or one whose applied migrations
 *   were edited after the fact,
 * - refusing a schema where another role may create, or owns, code the
 *   migration would run with the migrating role's rights (see trust.ts),
 * - adopting in place the tables of the official LangGraph Postgres saver
 *   (same names) instead of creating them (see adopt.ts).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import pg from "pg";
import { planAdoption, type AdoptionSummary } from "./adopt.js";
import { dbOf, type Db, type PGliteLike, type Queryable } from "./db.js";
import { DatabaseOperationError, InvalidOptionsError, isRetryable, MigrationError, SchemaNotMigratedError, SchemaTooNewError, sqlStateOf, UnsafeSchemaError } from "./errors.js";
import { guard, type EventHandler, type HandlerErrorHandler } from "./events.js";
import { inspectTrust, refuse } from "./trust.js";
import { checkSchemaName, quoteIdent } from "./validate.js";

/** Name of the table, inside the target schema, that records applied migrations. */
export const MIGRATIONS_TABLE = "checkpointer_migrations";

/** One migration file. `version` is 1-based and dense. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
  sha256: string;
  statements: string[];
}

const MIGRATIONS_DIR = new URL("../migrations/", import.meta.url);

let cached: Migration[] | undefined;

/**
 * The migrations shipped with this package, in order.
 *
 * @example
 * ```ts
 * console.log(loadMigrations().map((m) => m.name)); // ["0000_init", ...]
 * ```
 */
export function loadMigrations(): Migration[] {
  if (cached) return cached;
  const journal = JSON.parse(readFileSync(new URL("meta/_journal.json", MIGRATIONS_DIR), "utf8")) as {
    entries: { idx: number; tag: string }[];
  };
  cached = [...journal.entries]
    .sort((a, b) => a.idx - b.idx)
    .map((entry, i) => {
      if (entry.idx !== i) throw new MigrationError(`migrations/meta/_journal.json is not dense at index ${i}`);
      const sql = readFileSync(new URL(`${entry.tag}.sql`, MIGRATIONS_DIR), "utf8");
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
  return cached;
}

/** The migration version this code requires. */
export function latestVersion(): number {
  return loadMigrations().length;
}

export interface MigrateOptions {
  /** Where to migrate: a `pg.Pool` or `pg.Client` (not closed), or a PGlite instance. Or give `connectionString`. */
  pool?: pg.Pool | pg.Client | PGliteLike;
  /** Used when no `pool` is given; the connection is closed afterwards. */
  connectionString?: string;
  /** Target Postgres schema; created if missing. Default `public`. */
  schema?: string;
  /** Report what would run, change nothing. */
  dryRun?: boolean;
  /** Receives the `migrate` event; may be async. Its failures never change the outcome. */
  onEvent?: EventHandler;
  /** Receives every error `onEvent` throws or rejects with (default: the first one, on stderr). */
  onHandlerError?: HandlerErrorHandler;
}

export interface MigrateResult {
  schema: string;
  /** Version before the call. */
  fromVersion: number;
  /** Version after the call (equal to `fromVersion` for a dry run). */
  toVersion: number;
  /** Migrations applied by this call, or that would be, for a dry run. */
  applied: { version: number; name: string; sql: string }[];
  /**
   * Set when the schema held the official LangGraph saver's tables: they were
   * (or, for a dry run, would be) adopted in place of `0000_init`, whose
   * `applied` entry then shows the adoption SQL.
   */
  adoption?: AdoptionSummary;
}

/** Per database and schema: two migrators of different schemas never wait for each other. */
const LOCK_SQL =
  "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('langgraph-checkpoint-pg:migrate'), " +
  "pg_catalog.hashtext(pg_catalog.concat(pg_catalog.current_database(), '.', $1::text)))";

/**
 * Apply pending migrations to `schema`. Idempotent and safe to run from many
 * processes at once (CI, deploy hooks, app start-up): each migration is
 * applied exactly once.
 *
 * @example
 * ```ts
 * import pg from "pg";
 * import { migrate } from "langgraph-checkpoint-pg";
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const { applied } = await migrate({ pool, schema: "agents" });
 * console.log(`applied ${applied.length} migration(s)`);
 * await pool.end();
 * ```
 */
export async function migrate(options: MigrateOptions = {}): Promise<MigrateResult> {
  const schema = checkSchemaName(options.schema ?? "public");
  if (!options.pool && !options.connectionString) {
    throw new InvalidOptionsError("pool", "give a pg.Pool, a pg.Client, a PGlite instance, or a connectionString");
  }
  const own = options.pool ? undefined : new pg.Client({ connectionString: options.connectionString, application_name: "langgraph-checkpoint-pg:migrate" });
  if (own) {
    // A connection dying (e.g. while queued on the migration lock) also emits
    // 'error'; unheard, that crashes the process. The query in flight rejects
    // with it anyway, so listening is all that is needed.
    own.on("error", () => undefined);
    await own.connect().catch((cause: unknown) => {
      throw new MigrationError("could not connect to run migrations", { cause, retryable: isRetryable(cause) });
    });
  }
  const target = own ?? options.pool!;
  const db = dbOf(target);
  try {
    return await runMigrations(db, schema, options);
  } finally {
    if (own) await own.end().catch(() => undefined);
  }
}

/** The migration run itself, on any driver: one transaction, under the lock. */
export async function runMigrations(db: Db, schema: string, options: { dryRun?: boolean; onEvent?: EventHandler; onHandlerError?: HandlerErrorHandler } = {}): Promise<MigrateResult> {
  const migrations = loadMigrations();
  const started = performance.now();
  const q = quoteIdent(schema);
  const table = `${q}.${MIGRATIONS_TABLE}`;
  let current: Migration | undefined;
  try {
    const result = await db.transaction(
      async (tx) => {
        // First, before any name is resolved: pg_catalog is searched before the
        // schema (it is, when the path does not name it), so nothing created in
        // the schema shadows a built-in; new objects still go into the schema.
        await tx.query(`SET LOCAL search_path TO ${q}, pg_temp`);
        await tx.query(LOCK_SQL, [schema]);
        // Nothing another role owns or may create must run with our rights (see trust.ts).
        const trust = await inspectTrust(tx, schema);
        refuse(trust, schema, trust.always);
        const exists = await tx.query("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1", [schema]);
        if (exists.rows.length === 0 && !options.dryRun) await tx.query(`CREATE SCHEMA ${q}`);
        const hasTable = (await tx.query<{ ok: boolean }>("SELECT pg_catalog.to_regclass($1) IS NOT NULL AS ok", [table])).rows[0]!.ok;
        if (!hasTable) refuse(trust, schema, trust.whenApplying);
        if (!hasTable && !options.dryRun) {
          await tx.query(
            `CREATE TABLE ${table} (
               version integer PRIMARY KEY,
               name text NOT NULL,
               sha256 text NOT NULL,
               applied_at timestamptz NOT NULL DEFAULT pg_catalog.now()
             )`,
          );
        }
        // No history of ours: the official saver's tables may be there (refused here if unknown).
        const adoption = hasTable ? undefined : await planAdoption(tx, schema);
        const applied = hasTable
          ? (await tx.query<{ version: number; name: string; sha256: string }>(`SELECT version, name, sha256 FROM ${table} ORDER BY version`)).rows
          : [];
        const fromVersion = applied.length === 0 ? 0 : Math.max(...applied.map((r) => r.version));
        if (fromVersion > migrations.length) throw new SchemaTooNewError(schema, fromVersion, migrations.length);
        for (const row of applied) {
          const known = migrations[row.version - 1];
          if (!known || known.sha256 !== row.sha256) {
            throw new MigrationError(
              `migration ${row.version} (${row.name}) applied to schema "${schema}" differs from the one shipped in this package; ` +
                "released migrations must never be edited",
              { migration: row.name },
            );
          }
        }
        const pending = migrations.slice(fromVersion);
        if (pending.length > 0) refuse(trust, schema, trust.whenApplying);
        if (!options.dryRun) {
          for (const m of pending) {
            current = m;
            // Record first: a concurrent migrator that somehow got past the lock clashes on the key.
            await tx.query(`INSERT INTO ${table} (version, name, sha256) VALUES ($1, $2, $3)`, [m.version, m.name, m.sha256]);
            const statements = m.version === 1 && adoption ? adoption.statements : m.statements;
            for (const statement of statements) await tx.query(statement);
          }
          current = undefined;
        }
        const result: MigrateResult = {
          schema,
          fromVersion,
          toVersion: options.dryRun ? fromVersion : migrations.length,
          applied: pending.map((m) => ({ version: m.version, name: m.name, sql: m.version === 1 && adoption ? adoption.sql : m.sql })),
        };
        if (adoption) result.adoption = { source: adoption.source, officialVersion: adoption.officialVersion, sql: adoption.sql };
        return result;
      },
      { rollback: options.dryRun ?? false },
    );
    guard(options.onEvent, "onEvent", options.onHandlerError)?.({
      type: "migrate",
      schema,
      applied: result.applied.map((m) => m.name),
      fromVersion: result.fromVersion,
      toVersion: result.toVersion,
      dryRun: options.dryRun ?? false,
      durationMs: performance.now() - started,
    });
    return result;
  } catch (err) {
    if (err instanceof SchemaTooNewError || err instanceof MigrationError || err instanceof UnsafeSchemaError) throw err;
    throw new MigrationError(
      current
        ? `migration ${current.version} (${current.name}) failed on schema "${schema}" (SQLSTATE ${sqlStateOf(err) ?? "none"}); nothing was applied`
        : `migrating schema "${schema}" failed (SQLSTATE ${sqlStateOf(err) ?? "none"}); nothing was applied`,
      { cause: err, migration: current?.name, retryable: isRetryable(err) },
    );
  }
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
export async function schemaVersion(db: Queryable, schema: string): Promise<number> {
  try {
    const res = await db.query<{ v: number }>(`SELECT coalesce(pg_catalog.max(version), 0)::int AS v FROM ${quoteIdent(schema)}.${MIGRATIONS_TABLE}`);
    return res.rows[0]!.v;
  } catch (err) {
    // 42P01 undefined_table, 3F000 invalid_schema_name: nothing migrated yet.
    if (sqlStateOf(err) === "42P01" || sqlStateOf(err) === "3F000") return 0;
    throw err;
  }
}

/**
 * Refuse a schema this code cannot work on: not (fully) migrated, or migrated
 * by a newer release. `operation` names the caller in a connection error.
 *
 * @example
 * ```ts
 * await assertSchemaCurrent(db, "public", "prune"); // SchemaNotMigratedError until migrate() ran
 * ```
 */
export async function assertSchemaCurrent(db: Queryable, schema: string, operation: string): Promise<void> {
  let version: number;
  try {
    version = await schemaVersion(db, schema);
  } catch (err) {
    throw new DatabaseOperationError(`${operation} (checking the schema version)`, err);
  }
  const required = latestVersion();
  if (version < required) throw new SchemaNotMigratedError(schema, version, required);
  if (version > required) throw new SchemaTooNewError(schema, version, required);
}
