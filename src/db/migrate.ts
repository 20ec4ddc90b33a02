/**
 * Versioned schema migrations. The SQL files in `migrations/` are drizzle-kit
 * output; this module applies the pending ones to a target schema:
 * - in ONE transaction (all or nothing: never a half-migrated schema),
 * - under a transaction-scoped advisory lock keyed by database and schema,
 *   so concurrent migrators queue instead of racing,
 * - recorded in our own table `checkpointer_migrations` inside the target
 *   schema (never drizzle's shared default table, which a host app's own
 *   drizzle migrations also use),
 * - taking the saver's tables first (ACCESS EXCLUSIVE, bounded by a lock
 *   timeout), so no statement of any release lands in the middle of a
 *   migration (see compat.ts),
 * - refusing a schema where another role may create, or owns, code the
 *   migration would run with the migrating role's rights (see trust.ts),
 * - refusing a schema newer than this code unless its newer migrations say
 *   this code still works with them (compat.ts), or one whose applied
 *   migrations were edited after the fact,
 * - refusing, with a typed error that says how to adopt them, to start next
 *   to the tables of the official LangGraph Postgres saver unless told
 *   (`adopt`), and adopting them when told (see adopt.ts),
 * - retrying what may succeed later (the database not up yet, a deadlock, a
 *   lock wait that timed out) with backoff, reporting each attempt.
 */
import pg from "pg";
import { SCHEMA_LOCK_SQL, type AdoptionStep, type AdoptionSummary } from "./official.js";
import { dbOf, type Db, type PGliteLike, type Queryable } from "./db.js";
import { CheckpointerError, InvalidOptionsError, MigrationError, SchemaTooNewError, failureText, type OfficialTables } from "../errors.js";
import { emit, guard, type EventHandler, type HandlerErrorHandler } from "../events.js";
import { inspectAdoptionSource, inspectTrust, refuse, type TrustReport } from "./trust.js";
import { checkSchemaName, quoteIdent } from "../validate.js";
import { CHECKPOINTER_TRACK, MIGRATIONS_TABLE, loadMigrations, type Migration, type MigrationTrack } from "./migrations.js";
import { OWN_TABLES } from "./names.js";
import { checkPartitions, partitionStatements, planPartitions, type PartitionPlan } from "./partitions.js";
import { adoptionDecision, checkAdopt, officialTablesDecision, officialTablesEvent, type AdoptOption } from "./adopt-decision.js";
import { withRetry, type RetryOptions } from "./backoff.js";

// The shipped migrations and the schema-level checks live in migrations.ts; imported from here too.
export {
  CHECKPOINTER_TRACK,
  MIGRATIONS_TABLE,
  assertSchemaCurrent,
  latestVersion,
  loadMigrations,
  schemaLevel,
  schemaVersion,
  type Migration,
  type MigrationTrack,
} from "./migrations.js";
// Backoff and the adoption decision have files of their own; imported from here too.
export { DEFAULT_RETRY, checkRetry, withBackoff, withRetry, type RetryNotice, type RetryOptions } from "./backoff.js";
export { checkAdopt, type AdoptOption } from "./adopt-decision.js";

/** Where a plain function (`migrate`, `finishAdoption`, ...) runs. */
export interface TargetOptions {
  /** A `pg.Pool` or `pg.Client` (not closed), or a PGlite instance. Or give `connectionString`. */
  pool?: pg.Pool | pg.Client | PGliteLike;
  /** Used when no `pool` is given; the connection is closed afterwards. */
  connectionString?: string;
  /** The saver's schema (`migrate` creates it if missing). Default `public`. */
  schema?: string;
  /** Receives events (`migrate`, `retry`...); may be async. Its failures never change the outcome. */
  onEvent?: EventHandler;
  /** Receives every error `onEvent` throws or rejects with (default: the first one, on stderr). */
  onHandlerError?: HandlerErrorHandler;
}

export interface MigrateOptions extends TargetOptions {
  /** Report what would run, change nothing. */
  dryRun?: boolean;
  /**
   * Hash partition the tables by `thread_id` into this many partitions each
   * (2 to 1024), on Postgres's declarative partitioning; for a schema created
   * by this call. A schema migrated before keeps its layout: asking it for
   * another one is a `PartitionsMismatchError`. See docs/scaling-out.md.
   */
  partitions?: number;
  /** See {@link AdoptOption}. */
  adopt?: AdoptOption;
  /** See {@link RetryOptions}; `false`: one attempt. Default {@link DEFAULT_RETRY}. */
  retry?: RetryOptions | false;
}

export type { AdoptionStep } from "./official.js";

export interface MigrateResult {
  schema: string;
  /** Version before the call. */
  fromVersion: number;
  /** Version after the call (equal to `fromVersion` for a dry run). */
  toVersion: number;
  /** Migrations applied by this call, or that would be, for a dry run. */
  applied: { version: number; name: string; sql: string }[];
  /** Set when `adopt` named official tables: what was (or, in a dry run, would be) done. */
  adoption?: AdoptionSummary;
}

/**
 * How long a migration waits for each lock (its own table lock, DDL, the
 * official tables when adopting) before giving up and retrying: writers
 * queue behind a waiting lock request, so it must not wait long.
 */
export const MIGRATION_LOCK_TIMEOUT = "10s";

/**
 * Apply pending migrations to `options.schema` on `options`' target, retrying
 * as {@link RetryOptions} says (each attempt on a new connection when the
 * target is a connection string); `adoption`: what runs when told to adopt
 * (the public `migrate()`, src/ops/migrate.ts, hands in the wing's).
 */
export async function migrateTarget(options: MigrateOptions, adoption: AdoptionStep | undefined): Promise<MigrateResult> {
  const schema = checkSchemaName(options.schema ?? "public");
  const onEvent = guard(options.onEvent, "onEvent", options.onHandlerError);
  const settings = { dryRun: options.dryRun, onEvent, adopt: checkAdopt(options.adopt), partitions: checkPartitions(options.partitions), adoption };
  return withRetry({ operation: "migrate", schema, retry: options.retry, onEvent }, () => withTarget(options, "migrate", (db) => migrateOnce(db, schema, settings)));
}

/**
 * Run `fn` on the target of `options`: the caller's pool or client, or a
 * client on `connectionString` opened for the call and closed afterwards.
 */
export async function withTarget<T>(options: TargetOptions, operation: string, fn: (db: Db) => Promise<T>): Promise<T> {
  if (!options.pool && !options.connectionString) {
    throw new InvalidOptionsError("pool", "give a pg.Pool, a pg.Client, a PGlite instance, or a connectionString");
  }
  const own = options.pool ? undefined : new pg.Client({ connectionString: options.connectionString, application_name: `langgraph-checkpoint-pg:${operation}` });
  if (own) {
    // A failing connection emits 'error' as well as rejecting: without a listener that would crash the process.
    own.on("error", () => undefined);
    await own.connect().catch(async (cause: unknown) => {
      await own.end().catch(() => undefined);
      throw new MigrationError(`could not connect to run ${operation} ${failureText(cause)}`, { cause });
    });
  }
  try {
    return await fn(dbOf(own ?? options.pool!));
  } finally {
    if (own) await own.end().catch(() => undefined);
  }
}

/**
 * Apply pending migrations through `db` (any driver), retrying as
 * {@link RetryOptions} says. `setup()` and the CLI call this.
 */
export function runMigrations(
  db: Db,
  schema: string,
  options: {
    dryRun?: boolean;
    onEvent?: EventHandler;
    onHandlerError?: HandlerErrorHandler;
    adopt?: AdoptOption;
    retry?: RetryOptions | false;
    operation?: "setup" | "migrate";
    partitions?: number;
    /** What runs when told to adopt (see {@link AdoptionStep}). */
    adoption?: AdoptionStep;
  } = {},
): Promise<MigrateResult> {
  const onEvent = guard(options.onEvent, "onEvent", options.onHandlerError);
  const settings = { dryRun: options.dryRun, onEvent, adopt: checkAdopt(options.adopt), partitions: checkPartitions(options.partitions), adoption: options.adoption };
  return withRetry({ operation: options.operation ?? "migrate", schema, retry: options.retry, onEvent }, () => migrateOnce(db, schema, settings));
}

/** The migration run itself, on any driver: one transaction, under the lock. */
async function migrateOnce(
  db: Db,
  schema: string,
  options: { dryRun?: boolean; onEvent?: EventHandler; adopt?: AdoptOption; partitions?: number; adoption?: AdoptionStep },
): Promise<MigrateResult> {
  const started = performance.now();
  const q = quoteIdent(schema);
  const dryRun = options.dryRun ?? false;
  const progress: TrackProgress = {};
  let elsewhere: OfficialTables[] = [];
  try {
    const result = await db.transaction(
      async (tx) => {
        // First, before any name is resolved: pg_catalog is searched before the
        // schema (it is, when the path does not name it), so nothing created in
        // the schema shadows a built-in; new objects still go into the schema.
        await tx.query(`SET LOCAL search_path TO ${q}, pg_temp`);
        await tx.query(SCHEMA_LOCK_SQL, [schema]);
        // Bounded lock waits for everything below: writers queue behind a waiting lock request.
        await tx.query("SELECT pg_catalog.set_config('lock_timeout', $1, true)", [MIGRATION_LOCK_TIMEOUT]);
        // Nothing another role owns or may create must run with our rights (see trust.ts).
        const trust = await inspectTrust(tx, schema);
        refuse(trust, schema, trust.always);
        const exists = await tx.query("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1", [schema]);
        if (exists.rows.length === 0 && !dryRun) await tx.query(`CREATE SCHEMA ${q}`);
        const present = await tablesIn(tx, schema, [MIGRATIONS_TABLE, ...OWN_TABLES, "checkpoint_migrations"]);
        const hasTable = present.has(MIGRATIONS_TABLE);
        if (!hasTable) refuse(trust, schema, trust.whenApplying);
        const first = hasTable ? undefined : await officialTablesDecision(tx, schema, present, options.adopt);
        elsewhere = first?.elsewhere ?? [];
        const { adoptFrom, already } = first ? { adoptFrom: first.adoptFrom, already: undefined } : await adoptionDecision(tx, schema, options.adopt);
        if (adoptFrom !== undefined) {
          await tx.query(SCHEMA_LOCK_SQL, [adoptFrom]);
          // Adopting reads the official tables and puts triggers on them: nothing there may be another role's code either.
          refuse(trust, schema, [...trust.whenApplying, ...(await inspectAdoptionSource(tx, adoptFrom))]);
        }
        const { fromVersion, toVersion, pending } = await applyTrack(tx, schema, CHECKPOINTER_TRACK, {
          trust,
          hasTable,
          dryRun,
          progress,
          partitions: options.partitions,
        });
        const result: MigrateResult = { schema, fromVersion, toVersion, applied: pending };
        if (already) {
          result.adoption = { from: already.from, source: already.source, officialVersion: already.officialVersion, adopted: false, sql: "" };
        } else if (adoptFrom !== undefined) {
          const adoption = options.adoption;
          if (adoption === undefined) {
            throw new InvalidOptionsError("adopt", "this entry point does not adopt: use migrate() or PostgresSaver from langgraph-checkpoint-pg, or the CLI's migrate --adopt");
          }
          if (hasTable && !(await adoption.isEmpty(tx, schema))) {
            throw new MigrationError(
              `Schema "${schema}" holds threads already; adopt the official tables into an empty schema (a new one is simplest). Nothing was changed.`,
              { migration: "adoption" },
            );
          }
          const plan = await adoption.plan(tx, schema, adoptFrom, { lock: !dryRun });
          if (!dryRun) for (const statement of plan.statements) await tx.query(statement);
          result.adoption = { from: plan.from, source: plan.source, officialVersion: plan.officialVersion, adopted: true, sql: plan.sql };
        }
        return result;
      },
      { rollback: dryRun },
    );
    if (elsewhere.length > 0) emit(options.onEvent, officialTablesEvent(schema, elsewhere));
    emit(options.onEvent, {
      type: "migrate",
      schema,
      applied: result.applied.map((m) => m.name),
      fromVersion: result.fromVersion,
      toVersion: result.toVersion,
      dryRun,
      durationMs: performance.now() - started,
    });
    return result;
  } catch (err) {
    if (err instanceof CheckpointerError) throw err;
    throw new MigrationError(
      progress.current
        ? `migration ${progress.current.name} failed on schema "${schema}" ${failureText(err)}; nothing was applied`
        : `migrating schema "${schema}" failed ${failureText(err)}; nothing was applied`,
      { cause: err, migration: progress.current?.name },
    );
  }
}

/** Which migration is running, for the error message when one fails. */
export interface TrackProgress {
  current?: Migration;
}

/**
 * The part of a migration run every track shares, inside the caller's
 * transaction (search_path set, the schema lock and the lock timeout taken,
 * the trust report read): create the record table if missing, refuse a
 * schema too new for this code or whose applied migrations were edited, then
 * take the track's tables and apply what is pending, each recorded first, as
 * the schema's partitioning says (partitions.ts: `partitions` for a new
 * schema). `pending` carries each migration's SQL as it runs (or would run).
 */
export async function applyTrack(
  tx: Queryable,
  schema: string,
  track: MigrationTrack,
  {
    trust,
    hasTable,
    dryRun,
    progress,
    partitions,
  }: { trust: TrustReport; hasTable: boolean; dryRun: boolean; progress: TrackProgress; partitions?: number | undefined },
): Promise<{ fromVersion: number; toVersion: number; pending: { version: number; name: string; sql: string }[]; plan: PartitionPlan }> {
  const migrations = loadMigrations(track);
  const known = migrations.length;
  const q = quoteIdent(schema);
  const table = `${q}.${track.table}`;
  if (!hasTable && !dryRun) {
    await tx.query(
      `CREATE TABLE ${table} (
         version integer PRIMARY KEY,
         name text NOT NULL,
         sha256 text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
         compatible_from integer
       )`,
    );
  }
  if (hasTable && !dryRun && !(await hasColumn(tx, table, "compatible_from"))) {
    // Created by a release before compat.ts: older releases never read this column.
    await tx.query(`ALTER TABLE ${table} ADD COLUMN compatible_from integer`);
  }
  const applied = hasTable ? await appliedRows(tx, table) : [];
  const fromVersion = applied.reduce((m, r) => Math.max(m, r.version), 0);
  if (fromVersion > known) {
    const required = requiredLevel(applied, known);
    if (required > known) throw new SchemaTooNewError(schema, fromVersion, known, required, { track: track.name });
  }
  for (const row of applied) {
    const shipped = migrations[row.version - 1];
    if (row.version <= known && (!shipped || shipped.sha256 !== row.sha256)) {
      throw new MigrationError(
        `migration ${row.name} applied to schema "${schema}" differs from the one shipped in this package; ` +
          "released migrations must never be edited",
        { migration: row.name },
      );
    }
  }
  const plan = await planPartitions(tx, schema, track, { requested: partitions, fresh: fromVersion === 0 });
  const pending = migrations.slice(Math.min(fromVersion, known));
  const statements = new Map(pending.map((m) => [m, partitionStatements(m.statements, plan.layout, plan.partitioned)]));
  if (pending.length > 0) refuse(trust, schema, trust.whenApplying);
  if (!dryRun && pending.length > 0) {
    // Statements of any release run before all of it or after it, never in between. The mode the
    // DDL needs anyway: a weaker one first would deadlock with readers when the DDL upgrades it.
    const own = await tablesIn(tx, schema, [...track.ownTables]);
    const locked = track.ownTables.filter((t) => own.has(t));
    if (locked.length > 0) await tx.query(`LOCK TABLE ${locked.map((t) => `${q}.${t}`).join(", ")} IN ACCESS EXCLUSIVE MODE`);
    for (const m of pending) {
      progress.current = m;
      // Record first: a concurrent migrator that somehow got past the lock clashes on the key.
      await tx.query(`INSERT INTO ${table} (version, name, sha256, compatible_from) VALUES ($1, $2, $3, $4)`, [
        m.version,
        m.name,
        m.sha256,
        track.compatibleFrom(m.version),
      ]);
      for (const statement of statements.get(m)!) await tx.query(statement);
    }
    progress.current = undefined;
  }
  const unrecorded = applied.filter((r) => r.compatibleFrom === null && r.version <= known);
  if (!dryRun && unrecorded.length > 0) {
    await tx.query(
      `UPDATE ${table} m SET compatible_from = c.level
         FROM ROWS FROM (pg_catalog.unnest($1::int[]), pg_catalog.unnest($2::int[])) AS c(version, level) WHERE m.version = c.version`,
      [unrecorded.map((r) => r.version), unrecorded.map((r) => track.compatibleFrom(r.version))],
    );
  }
  return {
    fromVersion,
    toVersion: dryRun ? fromVersion : Math.max(fromVersion, known),
    // Partitioned, the file's text is not what runs: show what does.
    pending: pending.map((m) => ({ version: m.version, name: m.name, sql: plan.layout ? statementsText(statements.get(m)!) : m.sql })),
    plan,
  };
}

/** Statements as one SQL text, each ended by a semicolon. */
export function statementsText(statements: readonly string[]): string {
  return statements.map((st) => `${st.trim().replace(/;\s*$/, "")};`).join("\n");
}

/** Which of `names` are tables in `schema`. */
export async function tablesIn(tx: Queryable, schema: string, names: string[]): Promise<Set<string>> {
  const { rows } = await tx.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = ANY ($2::text[]) AND c.relkind IN ('r', 'p')`,
    [schema, names],
  );
  return new Set(rows.map((r) => r.name));
}

async function hasColumn(tx: Queryable, table: string, column: string): Promise<boolean> {
  const { rows } = await tx.query("SELECT 1 FROM pg_attribute WHERE attrelid = pg_catalog.to_regclass($1) AND attname = $2 AND NOT attisdropped", [table, column]);
  return rows.length > 0;
}

interface AppliedRow {
  version: number;
  name: string;
  sha256: string;
  /** NULL: recorded by a release before compat.ts. */
  compatibleFrom: number | null;
}

async function appliedRows(tx: Queryable, table: string): Promise<AppliedRow[]> {
  // to_jsonb: reads compatible_from where the column exists, NULL where a release before it made the table.
  const { rows } = await tx.query<{ version: number; name: string; sha256: string; cf: number | null }>(
    `SELECT version, name, sha256, (pg_catalog.to_jsonb(m) ->> 'compatible_from')::int AS cf FROM ${table} m ORDER BY version`,
  );
  return rows.map((r) => ({ version: r.version, name: r.name, sha256: r.sha256, compatibleFrom: r.cf }));
}

/** The oldest code level the migrations after `known` work with (unrecorded: their own version, i.e. none older). */
function requiredLevel(applied: { version: number; compatibleFrom: number | null }[], known: number): number {
  return applied.filter((r) => r.version > known).reduce((m, r) => Math.max(m, r.compatibleFrom ?? r.version), 0);
}
