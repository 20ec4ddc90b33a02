/**
 * Typed errors. Every error this package throws is a {@link CheckpointerError}
 * with a stable `code`; database failures keep the driver error as `cause`
 * (with its SQLSTATE) but never copy parameters or payloads into messages.
 */

/** Stable error codes. Match on these, never on messages. */
export type CheckpointerErrorCode =
  | "INVALID_INPUT"
  | "INVALID_OPTIONS"
  | "SCHEMA_NOT_MIGRATED"
  | "SCHEMA_TOO_NEW"
  | "MIGRATION_FAILED"
  | "CHECKPOINT_CONFLICT"
  | "SERIALIZATION_FAILED"
  | "DESERIALIZATION_FAILED"
  | "DATABASE_ERROR"
  | "DATA_DIR_LOCKED"
  | "UPCASTER_MISSING"
  | "STATE_VERSION_TOO_NEW"
  | "ADOPTION_REQUIRED"
  | "ADOPTION_ROLLED_BACK";

/**
 * Base class of every error thrown by this package.
 *
 * @example
 * ```ts
 * try { await saver.getTuple(config); }
 * catch (err) { if (err instanceof CheckpointerError && err.retryable) retry(); else throw err; }
 * ```
 */
export class CheckpointerError extends Error {
  /** Stable, machine-readable code. */
  readonly code: CheckpointerErrorCode;
  /** True when repeating the same operation later may succeed. */
  readonly retryable: boolean;

  constructor(code: CheckpointerErrorCode, message: string, options?: { cause?: unknown; retryable?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options?.retryable ?? false;
  }
}

/**
 * Bad input to a saver method or function, detected before any SQL runs.
 * `field` names the offending input, e.g. `config.configurable.thread_id`.
 *
 * @example
 * ```ts
 * await saver.getTuple({ configurable: { thread_id: 42 } }); // throws InvalidInputError, field "config.configurable.thread_id"
 * ```
 */
export class InvalidInputError extends CheckpointerError {
  readonly field: string;
  constructor(field: string, problem: string) {
    super("INVALID_INPUT", `Invalid ${field}: ${problem}`);
    this.field = field;
  }
}

/**
 * Bad options passed to a constructor or a plain function (`migrate`, `prune`, ...).
 *
 * @example
 * ```ts
 * new PostgresSaver(pool, { schema: "" }); // throws InvalidOptionsError, option "schema"
 * ```
 */
export class InvalidOptionsError extends CheckpointerError {
  readonly option: string;
  constructor(option: string, problem: string) {
    super("INVALID_OPTIONS", `Invalid option ${option}: ${problem}`);
    this.option = option;
  }
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
  readonly appliedVersion: number;
  readonly requiredVersion: number;
  constructor(schema: string, appliedVersion: number, requiredVersion: number, options?: { cause?: unknown }) {
    super(
      "SCHEMA_NOT_MIGRATED",
      `Schema "${schema}" is at checkpointer migration ${appliedVersion}, this code needs ${requiredVersion}. ` +
        `Run the migrations first: \`npx langgraph-checkpoint-pg migrate --schema ${JSON.stringify(schema)}\`, ` +
        "`await migrate({ pool, schema })` in a deploy step, or `await saver.setup()`.",
      options,
    );
    this.schema = schema;
    this.appliedVersion = appliedVersion;
    this.requiredVersion = requiredVersion;
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
  readonly appliedVersion: number;
  readonly knownVersion: number;
  /**
   * The oldest code level the schema's newer migrations work with (see
   * src/compat.ts): this code is below it. Equal to `appliedVersion` when a
   * newer migration did not record one.
   */
  readonly compatibleFrom: number;
  constructor(schema: string, appliedVersion: number, knownVersion: number, compatibleFrom = appliedVersion, options?: { cause?: unknown }) {
    super(
      "SCHEMA_TOO_NEW",
      `Schema "${schema}" is at checkpointer migration ${appliedVersion}, newer than this code knows (${knownVersion}), ` +
        `and works only with code at migration level ${compatibleFrom} or later: this code refuses to use it. ` +
        "Upgrade the package; never point older code at a newer schema.",
      options,
    );
    this.schema = schema;
    this.appliedVersion = appliedVersion;
    this.knownVersion = knownVersion;
    this.compatibleFrom = compatibleFrom;
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
 * saver (JS or Python) and was not told what to do with them. Nothing was
 * changed. Adopt them explicitly (`setup({ adopt: true })`, `migrate --adopt
 * <schema>`), or start empty beside them (`adopt: false`).
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
    super(
      "ADOPTION_REQUIRED",
      `Migrating schema "${schema}" stopped: ${what}. langgraph-checkpoint-pg never changes another saver's tables on its own. Nothing was changed. ` +
        (inTarget ? `Its tables cannot share a schema with the official saver's: give this saver its own schema (e.g. "${target}"), then ` : "To ") +
        `adopt the official threads (the official tables stay as they are, official instances keep working until replaced): ` +
        `\`npx langgraph-checkpoint-pg migrate --schema ${target} --adopt ${from} --dry-run\` prints the plan; without --dry-run it runs it; ` +
        `in code: \`new PostgresSaver(pool, { schema: "${target}" }).setup({ adopt: { from: "${from}" } })\`. ` +
        (inTarget ? "" : "To start empty beside them instead, pass `adopt: false`. ") +
        'See "Switching from @langchain/langgraph-checkpoint-postgres" in the README.',
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

export type ConflictReason = "head-moved" | "run-in-progress" | "parent-missing";

/**
 * A `put` in `lineage: "linear"` mode whose parent is not the lineage's
 * current head: another writer got there first. Nothing was written.
 * Retryable: re-run the invocation from the new head (see `withConflictRetry`).
 *
 * @example
 * ```ts
 * try { await graph.invoke(input, config); }
 * catch (e) { if (e instanceof CheckpointConflictError) console.log(e.actualHead); }
 * ```
 */
export class CheckpointConflictError extends CheckpointerError {
  readonly threadId: string;
  readonly checkpointNs: string;
  /** The parent the rejected put named (undefined for a root put). */
  readonly expectedParent: string | undefined;
  /** The head the lineage had when the put was rejected (undefined if none). */
  readonly actualHead: string | undefined;
  /**
   * `head-moved`: another writer advanced the lineage first.
   * `run-in-progress`: the head is right, but another run has unfinished steps
   * on it; a new run (input or state update) must wait for it.
   * `parent-missing`: the parent was deleted (deleteThread, prune) under the
   * run; in either lineage mode, since the new checkpoint would inherit values
   * that are gone.
   */
  readonly reason: ConflictReason;
  constructor(info: {
    threadId: string;
    checkpointNs: string;
    expectedParent: string | undefined;
    actualHead: string | undefined;
    reason?: ConflictReason;
  }) {
    const reason = info.reason ?? "head-moved";
    super(
      "CHECKPOINT_CONFLICT",
      `Checkpoint conflict on thread ${JSON.stringify(info.threadId)} namespace ${JSON.stringify(info.checkpointNs)}: ` +
        (reason === "run-in-progress"
          ? `another run has unfinished steps on the head ${info.actualHead}. `
          : reason === "parent-missing"
            ? `the parent ${info.expectedParent} no longer exists (the thread was deleted or pruned). `
            : `the put expected parent ${info.expectedParent ?? "(none: a root)"} but the head is ${info.actualHead ?? "(none)"}. `) +
        "Nothing was written. Retry when the other run is done.",
      { retryable: true },
    );
    this.reason = reason;
    this.threadId = info.threadId;
    this.checkpointNs = info.checkpointNs;
    this.expectedParent = info.expectedParent;
    this.actualHead = info.actualHead;
  }
}

/**
 * A value could not be encoded (e.g. a function or a class instance the
 * serializer does not know). Nothing was written.
 *
 * @example
 * ```ts
 * await serde.dumpsTyped({ f: () => 1 }); // throws SerializationError
 * ```
 */
export class SerializationError extends CheckpointerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("SERIALIZATION_FAILED", message, options);
  }
}

/**
 * Stored bytes could not be decoded into an allowed value (corrupt data, an
 * unknown type tag or extension, a type outside the allowlist).
 *
 * @example
 * ```ts
 * await serde.loadsTyped("msgpack", new Uint8Array([0xc1])); // throws DeserializationError
 * ```
 */
export class DeserializationError extends CheckpointerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("DESERIALIZATION_FAILED", message, options);
  }
}

/**
 * A database operation failed. `cause` is the driver error (with `code`, the
 * SQLSTATE); `sqlState` repeats it. `retryable` is true for connection loss,
 * serialization failures, deadlocks and timeouts.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof DatabaseOperationError && e.retryable) scheduleRetry(); }
 * ```
 */
export class DatabaseOperationError extends CheckpointerError {
  readonly operation: string;
  readonly sqlState: string | undefined;
  constructor(operation: string, cause: unknown) {
    const sqlState = sqlStateOf(cause);
    super(
      "DATABASE_ERROR",
      `${operation} failed: ${sqlState ? `SQLSTATE ${sqlState}` : "connection error"}` +
        (cause instanceof Error && !sqlState ? ` (${cause.message.split("\n")[0]})` : ""),
      { cause, retryable: isRetryable(cause) },
    );
    this.operation = operation;
    this.sqlState = sqlState;
  }
}

/** The SQLSTATE of a driver error, if it has one. */
export function sqlStateOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

// Class 08 connection exceptions, 40001 serialization failure, 40P01 deadlock,
// 57P01-57P03 admin shutdown / crash / cannot connect now, 53300 too many connections,
// 57014 query_canceled (statement_timeout), 55P03 lock_not_available (lock_timeout).
const RETRYABLE_SQLSTATE = /^(08...|40001|40P01|57P0[123]|53300|57014|55P03)$/;

/**
 * Whether repeating an operation that failed with `err` may succeed: the one
 * rule behind every error's `retryable` flag.
 *
 * @example
 * ```ts
 * if (isRetryable(err)) await retryLater();
 * ```
 */
export function isRetryable(err: unknown): boolean {
  if (err instanceof CheckpointerError) return err.retryable;
  const state = sqlStateOf(err);
  if (state) return RETRYABLE_SQLSTATE.test(state);
  // No SQLSTATE: a socket-level failure (ECONNRESET, ECONNREFUSED, "Connection terminated").
  return err instanceof Error;
}
