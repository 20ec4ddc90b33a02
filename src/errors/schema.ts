/**
 * The errors of a schema's migrations: not migrated yet, migrated by a newer
 * release, unsafe to migrate, a failed or refused migration, a partitioning
 * that differs, the official saver's tables in the way or rolled back to.
 * Users import them from src/errors.ts.
 */
import { suggest, type SuggestedCommand } from "../hint.js";
import { CheckpointerError } from "./base.js";
import { isRetryable, sqlStateOf } from "./database.js";

/**
 * A migration as people see it: the number its file starts with (`0005` for
 * migrations/0005_heads_table.sql), from its 1-based position (6). Versions,
 * levels and counts in code stay 1-based; messages show file numbers.
 *
 * @example
 * ```ts
 * migrationNumber(7); // "0006"
 * ```
 */
export function migrationNumber(version: number): string {
  return String(Math.max(version - 1, 0)).padStart(4, "0");
}

/**
 * The target schema lacks some or all of this package's migrations. The saver
 * never runs DDL on its own: run `migrate()` (or `saver.setup()`) first.
 *
 * @example
 * ```ts
 * await saver.getTuple(config); // SchemaNotMigratedError until `await saver.setup()` ran once
 * ```
 */
export class SchemaNotMigratedError extends CheckpointerError {
  readonly schema: string;
  /** How many migrations the schema has (`0004_pending_tasks` applied last: 5). */
  readonly appliedVersion: number;
  /** How many this code ships (7 when its last is `0006_unversioned_values`). */
  readonly requiredVersion: number;
  /** Whose migrations: the checkpointer's, or the store's (`PostgresStore`, migrations/store/). */
  readonly track: "checkpointer" | "store";
  constructor(schema: string, appliedVersion: number, requiredVersion: number, options?: { cause?: unknown; track?: "checkpointer" | "store" }) {
    const track = options?.track ?? "checkpointer";
    // The store's alone (--store-only): --store would also create the checkpointer's tables.
    const command: SuggestedCommand = { words: track === "store" ? ["migrate", "--store-only"] : ["migrate"], schema };
    const run =
      track === "store"
        ? `Run the store's migrations first: ${suggest(command)}, ` + "`await migrateStore({ pool, schema })` in a deploy step, or `await store.setup()`."
        : `Run the migrations first: ${suggest(command)}, ` + "`await migrate({ pool, schema })` in a deploy step, or `await saver.setup()`.";
    super(
      "SCHEMA_NOT_MIGRATED",
      `Schema "${schema}" ${appliedVersion > 0 ? `is at ${track} migration ${migrationNumber(appliedVersion)}` : `has no ${track} migration`}, ` +
        `this code needs migrations up to ${migrationNumber(requiredVersion)}. ${run}`,
      { ...(options?.cause === undefined ? {} : { cause: options.cause }), suggested: [command] },
    );
    this.schema = schema;
    this.appliedVersion = appliedVersion;
    this.requiredVersion = requiredVersion;
    this.track = track;
  }
}

/**
 * The target schema has migrations this code does not know: a newer release
 * migrated it (for example a rolled-back deploy). Upgrade this package instead.
 *
 * @example
 * ```ts
 * await migrate({ pool }); // SchemaTooNewError when a newer release already migrated the schema
 * ```
 */
export class SchemaTooNewError extends CheckpointerError {
  readonly schema: string;
  /** How many migrations the schema has (counting from 1: migration `0007` is 8). */
  readonly appliedVersion: number;
  /** How many this code ships (7 when its last is `0006_unversioned_values`). */
  readonly knownVersion: number;
  /**
   * The oldest code level the schema's newer migrations work with (see
   * src/db/compat.ts; a level counts migrations: code at level 7 knows `0000` to
   * `0006`): this code is below it. Equal to `appliedVersion` when a newer
   * migration did not record one.
   */
  readonly compatibleFrom: number;
  /** Whose migrations: the checkpointer's, or the store's. */
  readonly track: "checkpointer" | "store";
  constructor(
    schema: string,
    appliedVersion: number,
    knownVersion: number,
    compatibleFrom = appliedVersion,
    options?: { cause?: unknown; track?: "checkpointer" | "store" },
  ) {
    const track = options?.track ?? "checkpointer";
    super(
      "SCHEMA_TOO_NEW",
      `Schema "${schema}" is at ${track} migration ${migrationNumber(appliedVersion)}, newer than this code knows (${migrationNumber(knownVersion)}), ` +
        `and works only with code that knows migration ${migrationNumber(compatibleFrom)} or later: this code refuses to use it. ` +
        "Upgrade the package; never point older code at a newer schema.",
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
    this.schema = schema;
    this.appliedVersion = appliedVersion;
    this.knownVersion = knownVersion;
    this.compatibleFrom = compatibleFrom;
    this.track = track;
  }
}

/**
 * The schema holds, or lets other roles create, what would run with the
 * migrating role's rights. Nothing was changed. `roles` are the untrusted
 * roles found (`PUBLIC` for everyone); `findings` say what each one can do.
 *
 * @example
 * ```ts
 * try { await migrate({ pool, schema: "public" }); }
 * catch (e) { if (e instanceof UnsafeSchemaError) console.error(e.schema, e.roles, e.findings); }
 * ```
 */
export class UnsafeSchemaError extends CheckpointerError {
  readonly schema: string;
  readonly roles: string[];
  readonly findings: string[];
  constructor(schema: string, migratingRole: string, findings: { text: string; role: string }[]) {
    const roles = [...new Set(findings.map((f) => f.role))];
    const creators = findings.some((f) => f.text.includes("may CREATE"));
    super(
      "UNSAFE_SCHEMA",
      `Refusing to migrate schema "${schema}": ${findings.map((f) => f.text).join("; ")}. ` +
        `Their code would run with the rights of ${JSON.stringify(migratingRole)}, the migrating role. ` +
        (creators ? `Revoke it (e.g. REVOKE CREATE ON SCHEMA ${JSON.stringify(schema)} FROM PUBLIC), or ` : "") +
        "migrate as the role that owns these objects, or have them reviewed and reassigned (ALTER ... OWNER TO). Nothing was changed.",
    );
    this.schema = schema;
    this.roles = roles;
    this.findings = findings.map((f) => f.text);
  }
}

/**
 * A migration failed; its transaction was rolled back, so the schema is exactly
 * as it was before the call. When a database error caused it, `sqlState` holds
 * its SQLSTATE and `retryable` says whether trying again may succeed (the same
 * rule as {@link DatabaseOperationError}: connection failures, deadlocks,
 * serialization failures, timeouts).
 *
 * @example
 * ```ts
 * try { await migrate({ pool }); } catch (e) { if (e instanceof MigrationError) console.error(e.migration, e.sqlState, e.retryable); }
 * ```
 */
export class MigrationError extends CheckpointerError {
  readonly migration: string | undefined;
  readonly sqlState: string | undefined;
  constructor(message: string, options?: { cause?: unknown; migration?: string }) {
    const cause = options?.cause;
    super("MIGRATION_FAILED", message, { cause, retryable: cause === undefined ? false : isRetryable(cause) });
    this.migration = options?.migration;
    this.sqlState = sqlStateOf(cause);
  }
}

/**
 * A migration asked for a partitioning (`partitions`) the schema does not have:
 * a schema's tables are hash partitioned, or not, when it is first migrated,
 * and Postgres cannot turn a table into a partitioned one in place. Nothing
 * was changed. `found` is the schema's number of partitions per table (0:
 * plain tables). To partition an existing schema, migrate a new one with
 * `partitions` and move the threads over (`export | import`, docs/scaling-out.md).
 *
 * @example
 * ```ts
 * try { await migrate({ pool, partitions: 16 }); }
 * catch (e) { if (e instanceof PartitionsMismatchError) console.error(e.schema, e.requested, e.found); }
 * ```
 */
export class PartitionsMismatchError extends CheckpointerError {
  readonly schema: string;
  /** Whose tables: the checkpointer's, or the store's. */
  readonly track: "checkpointer" | "store";
  readonly requested: number;
  readonly found: number;
  constructor(schema: string, track: "checkpointer" | "store", requested: number, found: number) {
    const create: SuggestedCommand = { words: [...(track === "store" ? ["migrate", "--store-only"] : ["migrate"]), "--schema", "<new schema>", "--partitions", String(requested)] };
    const exportAll: SuggestedCommand = { words: ["export", "--all"], schema };
    const importAll: SuggestedCommand = { words: ["import", "--schema", "<new schema>"] };
    super(
      "PARTITIONS_MISMATCH",
      `Schema "${schema}" was created ${found === 0 ? "with plain tables" : `with ${found} partitions per table`} (the ${track}'s), not ${requested}: ` +
        "a schema's partitioning is decided when it is first migrated, and Postgres cannot partition a table in place. Nothing was changed. " +
        `To partition it: ${suggest(create)}, then move ` +
        (track === "store"
          ? "the items (INSERT INTO <new schema>.store_items SELECT * FROM <this schema>.store_items)"
          : `the threads (${suggest(exportAll)} piped into ${suggest(importAll)})`) +
        ' (docs/scaling-out.md); or leave out partitions to migrate the schema as it is.',
      { suggested: track === "store" ? [create] : [create, exportAll, importAll] },
    );
    this.schema = schema;
    this.track = track;
    this.requested = requested;
    this.found = found;
  }
}

/** Where another saver's tables were found, and which saver left them. */
export interface OfficialTables {
  schema: string;
  /** `js`: @langchain/langgraph-checkpoint-postgres (migrations up to 4); `python`: langgraph-checkpoint-postgres (5 and later). */
  source: "js" | "python";
  /** The last version in its `checkpoint_migrations` table (-1: none readable). */
  officialVersion: number;
}

/**
 * `setup()` or `migrate` found the tables of the official LangGraph Postgres
 * saver (JS or Python) in the schema it was to set up, and was not told what
 * to do with them. Nothing was changed. Give this package its own schema and
 * adopt them there (`setup({ adopt: { from } })`, `migrate --adopt <schema>`).
 * (Official tables in other schemas do not stop a migration: it says so once,
 * an `officialTablesFound` event, and goes on beside them.)
 *
 * @example
 * ```ts
 * try { await saver.setup(); }
 * catch (e) { if (e instanceof AdoptionRequiredError) console.error(e.found); }
 * ```
 */
export class AdoptionRequiredError extends CheckpointerError {
  /** The schema this package was asked to migrate. */
  readonly schema: string;
  readonly found: OfficialTables[];
  constructor(schema: string, found: OfficialTables[]) {
    const what = found
      .map((f) => `schema "${f.schema}" holds the tables of the official ${f.source === "js" ? "JS saver (@langchain/langgraph-checkpoint-postgres" : "Python saver (langgraph-checkpoint-postgres"}, checkpoint_migrations at version ${f.officialVersion})`)
      .join("; ");
    const inTarget = found.some((f) => f.schema === schema);
    const from = found[0]!.schema;
    const target = inTarget ? "langgraph" : schema;
    const adopt: SuggestedCommand = { words: ["migrate", "--adopt", from, "--dry-run"], schema: target };
    super(
      "ADOPTION_REQUIRED",
      `Migrating schema "${schema}" stopped: ${what}. langgraph-checkpoint-pg never changes another saver's tables on its own. Nothing was changed. ` +
        (inTarget ? `Its tables cannot share a schema with the official saver's: give this saver its own schema (e.g. "${target}"), then ` : "To ") +
        `adopt the official threads (the official tables stay as they are, official instances keep working until replaced): ` +
        `${suggest(adopt)} prints the plan; without --dry-run it runs it; ` +
        `in code: \`new PostgresSaver(pool, { schema: "${target}" }).setup({ adopt: { from: "${from}" } })\`. ` +
        (inTarget ? "" : "To start empty beside them instead, pass `adopt: false`. ") +
        "See docs/adoption.md (switching from @langchain/langgraph-checkpoint-postgres).",
      { suggested: [adopt] },
    );
    this.schema = schema;
    this.found = found;
  }
}

/**
 * This saver's schema was rolled back to the official saver (`migrate
 * --rollback-adoption`): its tables refuse every write, so nothing is written
 * where the official saver would not see it. Deploy the official saver.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof AdoptionRolledBackError) console.error(`switch back to the official saver on ${e.schema}`); }
 * ```
 */
export class AdoptionRolledBackError extends CheckpointerError {
  readonly schema: string;
  constructor(schema: string, options?: { cause?: unknown }) {
    super(
      "ADOPTION_ROLLED_BACK",
      `Schema "${schema}" was rolled back to the official LangGraph saver: it refuses writes. Nothing was written. ` +
        "Run the official saver on its schema again (this instance belongs to the rolled-back deploy).",
      options,
    );
    this.schema = schema;
  }
}
