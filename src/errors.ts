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
  | "CHECKPOINT_PARENT_MISSING"
  | "SERIALIZATION_FAILED"
  | "DESERIALIZATION_FAILED"
  | "DATABASE_ERROR"
  | "DATA_DIR_LOCKED"
  | "UPCASTER_MISSING"
  | "STATE_VERSION_TOO_NEW"
  | "ADOPTION_REQUIRED"
  | "ADOPTION_ROLLED_BACK"
  | "HISTORY_CORRUPT"
  | "UNSAFE_SCHEMA";

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
 * A value, or everything one statement would carry, is larger than the saver
 * accepts: a single serialized value above `maxValueBytes`, or a whole `put` /
 * `putWrites` above what Postgres takes in one message (1 GiB, less 1 MiB
 * kept for keys and framing). Found after serialization and before any SQL;
 * nothing was written. Not retryable: the same input fails the same way.
 * `largest` names the biggest parts (channels, writes), largest first.
 *
 * @example
 * ```ts
 * try { await saver.put(config, checkpoint, metadata, versions); }
 * catch (e) { if (e instanceof PayloadTooLargeError) console.error(e.largest.map((p) => `${p.name}: ${p.bytes}`)); }
 * ```
 */
export class PayloadTooLargeError extends InvalidInputError {
  /** Serialized size of the value, or of the whole statement's payload. */
  readonly bytes: number;
  /** The limit it exceeded. */
  readonly limit: number;
  /** The largest parts, largest first (at most 5). */
  readonly largest: { name: string; bytes: number }[];
  constructor(field: string, problem: string, info: { bytes: number; limit: number; largest: { name: string; bytes: number }[] }) {
    super(field, problem);
    this.bytes = info.bytes;
    this.limit = info.limit;
    this.largest = info.largest;
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
  constructor(schema: string, appliedVersion: number, requiredVersion: number, options?: { cause?: unknown }) {
    super(
      "SCHEMA_NOT_MIGRATED",
      `Schema "${schema}" ${appliedVersion > 0 ? `is at checkpointer migration ${migrationNumber(appliedVersion)}` : "has no checkpointer migration"}, ` +
        `this code needs migrations up to ${migrationNumber(requiredVersion)}. ` +
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
  constructor(schema: string, appliedVersion: number, knownVersion: number, compatibleFrom = appliedVersion, options?: { cause?: unknown }) {
    super(
      "SCHEMA_TOO_NEW",
      `Schema "${schema}" is at checkpointer migration ${migrationNumber(appliedVersion)}, newer than this code knows (${migrationNumber(knownVersion)}), ` +
        `and works only with code that knows migration ${migrationNumber(compatibleFrom)} or later: this code refuses to use it. ` +
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

export type ConflictReason = "head-moved" | "run-in-progress";

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
   * (A parent that is not stored is not a conflict: see {@link CheckpointParentMissingError}.)
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
 * A walk over a thread's parent links found them broken: a cycle (a
 * checkpoint is its own ancestor) or, where the walk needs it, a parent that
 * does not exist. Only a corrupted or hand-edited row does this; the walk
 * stops (it never runs on), and nothing was changed. Not retryable.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof HistoryCorruptError) console.error(e.threadId, e.checkpointId, e.reason); }
 * ```
 */
export class HistoryCorruptError extends CheckpointerError {
  readonly threadId: string;
  readonly checkpointNs: string;
  /** Where the walk stopped: a checkpoint on the cycle, or the one whose parent is missing. */
  readonly checkpointId: string;
  readonly reason: "cycle" | "missing-parent";
  constructor(info: { threadId: string; checkpointNs: string; checkpointId: string; reason: "cycle" | "missing-parent"; operation: string }) {
    super(
      "HISTORY_CORRUPT",
      `${info.operation}: the parent links of thread ${JSON.stringify(info.threadId)} namespace ${JSON.stringify(info.checkpointNs)} are broken at checkpoint ` +
        `${JSON.stringify(info.checkpointId)}: ${info.reason === "cycle" ? "they form a cycle" : "its parent does not exist"}. ` +
        "A row was changed by hand or corrupted; see its rows with `langgraph-checkpoint-pg export <thread>`.",
    );
    this.threadId = info.threadId;
    this.checkpointNs = info.checkpointNs;
    this.checkpointId = info.checkpointId;
    this.reason = info.reason;
  }
}

/**
 * A `put` named a parent checkpoint that is not stored, and the checkpoint
 * cannot stand without it. Nothing was written. Not retryable:
 * `withConflictRetry` rethrows it at once.
 *
 * - Branch mode accepts an unknown parent as long as every channel value the
 *   new checkpoint refers to (`channel_versions`) is written by the put or
 *   already stored; `missing` lists the ones that are gone (the thread was
 *   deleted, or pruned, under a running graph).
 * - Linear mode needs the parent to be the lineage's head, so an unknown
 *   parent is refused even when no value is missing (`missing` may be empty).
 *
 * @example
 * ```ts
 * try { await graph.invoke(null, config); }
 * catch (e) { if (e instanceof CheckpointParentMissingError) console.log(e.parentCheckpointId, e.missing); }
 * ```
 */
export class CheckpointParentMissingError extends CheckpointerError {
  readonly threadId: string;
  readonly checkpointNs: string;
  /** The id of the checkpoint that was refused. */
  readonly checkpointId: string;
  /** The parent the put named, which is not stored. */
  readonly parentCheckpointId: string;
  /** The channel values the checkpoint refers to that are not stored, as `{ channel, version }`. */
  readonly missing: ReadonlyArray<{ channel: string; version: string }>;
  constructor(info: {
    threadId: string;
    checkpointNs: string;
    checkpointId: string;
    parentCheckpointId: string;
    missing: ReadonlyArray<{ channel: string; version: string }>;
  }) {
    const shown = info.missing.slice(0, 10).map((m) => `${JSON.stringify(m.channel)}@${m.version}`);
    if (info.missing.length > shown.length) shown.push(`and ${info.missing.length - shown.length} more`);
    super(
      "CHECKPOINT_PARENT_MISSING",
      `Checkpoint ${info.checkpointId} on thread ${JSON.stringify(info.threadId)} namespace ${JSON.stringify(info.checkpointNs)} ` +
        `names parent ${info.parentCheckpointId}, which is not stored` +
        (info.missing.length > 0
          ? `, and refers to channel values that are not stored either: ${shown.join(", ")} (the thread was deleted or pruned under the run?). `
          : "; linear lineage needs the parent to be the head. ") +
        "Nothing was written.",
    );
    this.threadId = info.threadId;
    this.checkpointNs = info.checkpointNs;
    this.checkpointId = info.checkpointId;
    this.parentCheckpointId = info.parentCheckpointId;
    this.missing = info.missing;
  }
}

/**
 * A value could not be encoded (a function as the whole value, nesting deeper
 * than the serializer allows; in strict mode anything that would not come back
 * exactly, such as a class instance). Nothing was written.
 *
 * @example
 * ```ts
 * await new MsgpackSerializer({ strict: true }).dumpsTyped({ link: new URL("https://x.dev") });
 * // throws SerializationError, path "$.link"
 * ```
 */
export class SerializationError extends CheckpointerError {
  /** The saver input that held the value, e.g. `put checkpoint.channel_values["messages"]` (set by the saver). */
  readonly field: string | undefined;
  /** Where inside the value, e.g. `$.items[2].link`, when the serializer could tell. */
  readonly path: string | undefined;
  constructor(message: string, options?: { cause?: unknown; field?: string; path?: string }) {
    super("SERIALIZATION_FAILED", options?.field === undefined ? message : `${options.field}: ${message}`, { cause: options?.cause });
    this.field = options?.field;
    this.path = options?.path;
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
 * A database operation failed. `cause` is the driver error; `sqlState` is the
 * SQLSTATE the server sent (undefined for a socket or client-side failure,
 * whose Node `code` stays on `cause`). `retryable` follows
 * {@link isRetryable}'s table: connection loss, a server that cannot take
 * writes now (shutdown, restart, failover, read-only), serialization failures,
 * deadlocks and timeouts.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof DatabaseOperationError && e.retryable) scheduleRetry(); }
 * ```
 */
export class DatabaseOperationError extends CheckpointerError {
  readonly operation: string;
  readonly sqlState: string | undefined;
  /**
   * @param options.retryable overrides the classification of `cause`, for
   * failures this package detects itself (e.g. a head that kept moving).
   */
  constructor(operation: string, cause: unknown, options?: { retryable?: boolean }) {
    const sqlState = sqlStateOf(cause);
    const failure = classify(cause);
    const code = sqlState ? undefined : socketCodeOf(cause);
    const detail = cause instanceof Error ? cause.message.split("\n")[0] : "unknown error";
    const what = sqlState ? `SQLSTATE ${sqlState}` : failure.connection ? `connection error${code ? ` ${code}` : ""} (${detail})` : detail;
    super("DATABASE_ERROR", `${operation} failed: ${what}`, { cause, retryable: options?.retryable ?? failure.retryable });
    this.operation = operation;
    this.sqlState = sqlState;
  }
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * The SQLSTATE of an error the server sent, if it is one. Only a driver
 * `DatabaseError` (pg's, another copy of pg's, PGlite's: each carries the
 * server's `severity`) has one; a Node socket error's `code` (`EPIPE`,
 * `EBADF`...) has the same shape and is not a SQLSTATE.
 *
 * @example
 * ```ts
 * if (sqlStateOf(err) === "23505") throw new ThreadExistsError(threadId, { cause: err });
 * ```
 */
export function sqlStateOf(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const e = err as { code?: unknown; severity?: unknown; errno?: unknown; syscall?: unknown };
  if (typeof e.code !== "string" || !SQLSTATE.test(e.code)) return undefined;
  return typeof e.severity === "string" && e.errno === undefined && e.syscall === undefined ? e.code : undefined;
}

/**
 * SQLSTATEs worth retrying. `drop`: the connection (and, for a server-wide
 * event, every connection made before it) must not be reused.
 */
const RETRYABLE_SQLSTATES: ReadonlyArray<readonly [pattern: RegExp, drop: boolean]> = [
  // Class 08, connection exception (PgBouncer sends 08P01 for its own timeouts and lost servers).
  [/^08...$/, true],
  // read_only_sql_transaction: a standby, or a primary being switched over.
  [/^25006$/, true],
  // admin_shutdown (also pg_terminate_backend), crash_shutdown, cannot_connect_now (starting, stopping, promoting).
  [/^57P0[123]$/, true],
  // idle_session_timeout, idle_in_transaction_session_timeout: this session ended, the server is fine.
  [/^(57P05|25P03)$/, false],
  // serialization_failure, deadlock_detected (both also for conflicts with recovery on a standby),
  // query_canceled (statement_timeout, a cancel, recovery conflicts), lock_not_available (lock_timeout),
  // too_many_connections.
  [/^(40001|40P01|57014|55P03|53300)$/, false],
];

/** Node socket error codes of a connection that failed or went away. */
const SOCKET_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "ENETRESET",
  "ENOTCONN",
  "EAI_AGAIN",
  "ERR_STREAM_DESTROYED",
  "ERR_STREAM_WRITE_AFTER_END",
]);

/**
 * pg's own errors for a lost or silent connection carry no code, only these
 * messages (pg 8: client.js, pg-pool). Matched exactly; anything else without
 * a SQLSTATE or a socket code is not retryable.
 */
const CONNECTION_MESSAGES = new Set([
  "Connection terminated unexpectedly",
  "Connection terminated",
  "Connection terminated due to connection timeout",
  "Query read timeout",
  "timeout expired",
  "Client has encountered a connection error and is not queryable",
]);

/** pg-pool's "no free client in time": retryable, but says nothing about the server. */
const POOL_WAIT_TIMEOUT = "timeout exceeded when trying to connect";

/** The Node socket error code of `err` or of an error it wraps. */
function socketCodeOf(err: unknown): string | undefined {
  for (const e of chain(err)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && SOCKET_CODES.has(code)) return code;
  }
  return undefined;
}

/** `err`, the errors it wraps (`cause`), and an AggregateError's members (a host with several addresses). */
function* chain(err: unknown, depth = 0): Generator<object> {
  if (typeof err !== "object" || err === null || depth > 5) return;
  yield err;
  const { cause, errors } = err as { cause?: unknown; errors?: unknown };
  yield* chain(cause, depth + 1);
  if (Array.isArray(errors)) for (const member of errors) yield* chain(member, depth + 1);
}

/**
 * The `cause` of a retryable {@link DatabaseOperationError}: Postgres
 * committed locally but its synchronous standby had not confirmed the commit
 * (the wait for it was canceled, e.g. by `pg_cancel_backend`; the server only
 * warns). Such a commit may be missing after a failover, so it is not reported
 * as a success; repeating the write is safe.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof DatabaseOperationError && e.cause instanceof UnconfirmedCommitError) metrics.unconfirmed++; }
 * ```
 */
export class UnconfirmedCommitError extends Error {
  constructor() {
    super("the commit was not confirmed by the synchronous standby (the wait for it was canceled); it may not survive a failover");
    this.name = "UnconfirmedCommitError";
  }
}

/** What a failure means for a retry and for the connection it happened on. */
export interface FailureClass {
  /** Repeating the operation later may succeed. */
  retryable: boolean;
  /** No answer from the server: the link or the connection failed (or none was free in time). */
  connection: boolean;
  /**
   * The connection, and the server or link behind it, cannot be trusted: drop
   * it, and do not reuse connections opened before it either.
   */
  connectionLost: boolean;
}

/** See {@link isRetryable}; also says whether the connection behind the failure is done for. */
export function classify(err: unknown): FailureClass {
  const none = { retryable: false, connection: false, connectionLost: false };
  if (err instanceof DatabaseOperationError) return { ...classify(err.cause), retryable: err.retryable };
  if (err instanceof CheckpointerError) return { ...none, retryable: err.retryable };
  if (err instanceof UnconfirmedCommitError) return { ...none, retryable: true };
  for (const e of chain(err)) {
    const state = sqlStateOf(e);
    if (state) {
      const rule = RETRYABLE_SQLSTATES.find(([pattern]) => pattern.test(state));
      return rule ? { retryable: true, connection: false, connectionLost: rule[1] } : none;
    }
  }
  const lost = { retryable: true, connection: true, connectionLost: true };
  if (socketCodeOf(err)) return lost;
  for (const e of chain(err)) {
    const message = (e as { message?: unknown }).message;
    if (typeof message !== "string") continue;
    if (CONNECTION_MESSAGES.has(message)) return lost;
    if (message === POOL_WAIT_TIMEOUT) return { retryable: true, connection: true, connectionLost: false };
  }
  return none;
}

/**
 * True when repeating the failed operation later may succeed: the one rule
 * every retry in and around this package follows. For this package's errors it
 * is their `retryable` flag; for driver errors (what `cause` holds, or what a
 * pool you use directly throws) it is decided by the SQLSTATE the server sent,
 * else by the Node socket code, else by pg's connection-loss messages:
 *
 * | SQLSTATE or code | meaning | retryable |
 * |---|---|---|
 * | `08xxx` | connection exception | yes |
 * | `25006` | read-only transaction: a standby, or a primary being switched over | yes |
 * | `57P01` `57P02` `57P03` | shutdown, crash, cannot connect now (starting, promoting) | yes |
 * | `57P05` `25P03` | idle session / idle-in-transaction timeout | yes |
 * | `40001` `40P01` | serialization failure, deadlock (also recovery conflicts) | yes |
 * | `57014` `55P03` | statement canceled or timed out, lock timeout | yes |
 * | `53300` | too many connections | yes |
 * | `ECONNRESET` `ECONNREFUSED` `EPIPE` `ETIMEDOUT` `EHOSTUNREACH` ... | socket errors | yes |
 * | pg: `Connection terminated`, `Query read timeout`, connection or pool timeout | no answer in time | yes |
 * | anything else (`23505`, `42501`, `ENOTFOUND`, TLS and password errors...) | | no |
 *
 * A retry is safe: a re-put of the same checkpoint is accepted once, and
 * writes are idempotent per (task, idx).
 *
 * @example
 * ```ts
 * for (let attempt = 1; ; attempt++) {
 *   try { return await graph.invoke(input, config); }
 *   catch (err) { if (!isRetryable(err) || attempt === 10) throw err; await sleep(100 * 2 ** attempt); }
 * }
 * ```
 */
export function isRetryable(err: unknown): boolean {
  return classify(err).retryable;
}
