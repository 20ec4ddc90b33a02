/**
 * Typed errors. Every error this package throws is a {@link CheckpointerError}
 * with a stable `code`; database failures keep the driver error as `cause`
 * (with its SQLSTATE) but never copy parameters or payloads into messages.
 * This file is where the package and its users import them from: the base
 * class lives in errors/base.ts, database failures and their classification
 * in errors/database.ts.
 */
import { CheckpointerError } from "./errors/base.js";
import { isRetryable, sqlStateOf } from "./errors/database.js";

export { CheckpointerError, type CheckpointerErrorCode } from "./errors/base.js";
export { DatabaseOperationError, UnconfirmedCommitError, classify, describeFailure, failureText, isRetryable, sqlStateOf, type FailureClass } from "./errors/database.js";

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
  /** Whose migrations: the checkpointer's, or the store's (`PostgresStore`, migrations/store/). */
  readonly track: "checkpointer" | "store";
  constructor(schema: string, appliedVersion: number, requiredVersion: number, options?: { cause?: unknown; track?: "checkpointer" | "store" }) {
    const track = options?.track ?? "checkpointer";
    const run =
      track === "store"
        ? `Run the store's migrations first: \`npx langgraph-checkpoint-pg migrate --store --schema ${JSON.stringify(schema)}\`, ` +
          "`await migrateStore({ pool, schema })` in a deploy step, or `await store.setup()`."
        : `Run the migrations first: \`npx langgraph-checkpoint-pg migrate --schema ${JSON.stringify(schema)}\`, ` +
          "`await migrate({ pool, schema })` in a deploy step, or `await saver.setup()`.";
    super(
      "SCHEMA_NOT_MIGRATED",
      `Schema "${schema}" ${appliedVersion > 0 ? `is at ${track} migration ${migrationNumber(appliedVersion)}` : `has no ${track} migration`}, ` +
        `this code needs migrations up to ${migrationNumber(requiredVersion)}. ${run}`,
      options?.cause === undefined ? undefined : { cause: options.cause },
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
 * `partitions` and move the threads over (`export | import`, README "Scaling out").
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
    const flag = track === "store" ? "migrate --store-only" : "migrate";
    super(
      "PARTITIONS_MISMATCH",
      `Schema "${schema}" was created ${found === 0 ? "with plain tables" : `with ${found} partitions per table`} (the ${track}'s), not ${requested}: ` +
        "a schema's partitioning is decided when it is first migrated, and Postgres cannot partition a table in place. Nothing was changed. " +
        `To partition it: \`npx langgraph-checkpoint-pg ${flag} --schema <new schema> --partitions ${requested}\`, then move ` +
        (track === "store"
          ? "the items (INSERT INTO <new schema>.store_items SELECT * FROM <this schema>.store_items)"
          : "the threads (`export --all | import --schema <new schema>`)") +
        ' (README "Scaling out"); or leave out partitions to migrate the schema as it is.',
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
 * A `put` or `putWrites` on a deleted thread that continues its deleted
 * history: a run that was still in flight when the thread was deleted
 * (`deleteThread`, `prune`'s expiry, the CLI), writing after it. Nothing was
 * written, and the thread stays deleted. Not retryable: `withRetry` and
 * `withConflictRetry` rethrow it at once. A new conversation on the same
 * thread id (a run that starts from no checkpoint) is not refused. The rule is
 * in the README ("Deleted threads stay deleted").
 *
 * - `history`: the write names a checkpoint of the deleted history (its
 *   parent, its own id, or the checkpoint of the writes) that is not stored.
 * - `thread`: nothing has started the thread again since it was deleted, and
 *   the write does not start a conversation (it has a parent, or is a
 *   subgraph's checkpoint, or is pending writes).
 *
 * @example
 * ```ts
 * try { await graph.invoke(input, config); }
 * catch (e) { if (e instanceof ThreadDeletedError) console.log(`thread ${e.threadId} was deleted during the run`); }
 * ```
 */
export class ThreadDeletedError extends CheckpointerError {
  readonly threadId: string;
  readonly checkpointNs: string;
  /** The checkpoint the refused put stores, or the refused writes belong to. */
  readonly checkpointId: string;
  readonly operation: "put" | "putWrites";
  readonly reason: "history" | "thread";
  constructor(info: { threadId: string; checkpointNs: string; checkpointId: string; operation: "put" | "putWrites"; reason: "history" | "thread" }) {
    super(
      "THREAD_DELETED",
      `${info.operation} on thread ${JSON.stringify(info.threadId)} namespace ${JSON.stringify(info.checkpointNs)} (checkpoint ${info.checkpointId}) refused: ` +
        (info.reason === "history"
          ? "the thread was deleted, and this continues its deleted history. "
          : "the thread was deleted, and no new conversation has started on it since. ") +
        "Nothing was written; a run that starts anew (from no checkpoint) may use the thread id.",
    );
    this.threadId = info.threadId;
    this.checkpointNs = info.checkpointNs;
    this.checkpointId = info.checkpointId;
    this.operation = info.operation;
    this.reason = info.reason;
  }
}

/**
 * `copyThread` (or the CLI's `threads copy`) refused, and wrote nothing:
 * - `source-missing`: the source thread holds no checkpoint;
 * - `target-exists`: the target thread holds rows (pass `overwrite: true`, or
 *   `--overwrite`, to replace them);
 * - `checkpoint-missing`: `upTo` names no checkpoint of the source's root namespace;
 * - `needs-serializer`: the source holds values encrypted for their rows
 *   (`EncryptedSerializer`) and the saver copying it has not that serializer
 *   (the CLI: `--module`), so the copy could not be read.
 * Not retryable.
 *
 * @example
 * ```ts
 * try { await saver.copyThread("chat-1", "chat-2"); }
 * catch (e) { if (e instanceof ThreadCopyError && e.reason === "target-exists") await saver.copyThread("chat-1", "chat-2", { overwrite: true }); }
 * ```
 */
export type ThreadCopyRefusal = "source-missing" | "target-exists" | "checkpoint-missing" | "needs-serializer";

export class ThreadCopyError extends CheckpointerError {
  readonly fromThreadId: string;
  readonly toThreadId: string;
  readonly reason: ThreadCopyRefusal;
  constructor(info: { fromThreadId: string; toThreadId: string; upTo?: string; reason: ThreadCopyRefusal }) {
    const what = {
      "source-missing": `thread ${JSON.stringify(info.fromThreadId)} holds no checkpoint`,
      "target-exists": `thread ${JSON.stringify(info.toThreadId)} exists (pass overwrite: true, or --overwrite, to replace it)`,
      "checkpoint-missing": `thread ${JSON.stringify(info.fromThreadId)} has no checkpoint ${JSON.stringify(info.upTo)} in its root namespace`,
      "needs-serializer": `thread ${JSON.stringify(info.fromThreadId)} holds values encrypted for their rows; copy it with the saver's serializer (the CLI: --module)`,
    }[info.reason];
    super("THREAD_COPY_REFUSED", `copyThread ${JSON.stringify(info.fromThreadId)} -> ${JSON.stringify(info.toThreadId)} refused: ${what}. Nothing was written.`);
    this.fromThreadId = info.fromThreadId;
    this.toThreadId = info.toThreadId;
    this.reason = info.reason;
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

// ---------------------------------------------------------------- the store (src/store)

/** What a store's vector index is, or is asked to be: dimensions, distance metric, index type. */
export interface VectorIndexShape {
  dims: number;
  distanceMetric: "cosine" | "l2" | "inner_product";
  indexType: "hnsw" | "ivfflat";
}

/**
 * A store with `index` (vector search) on a database without the pgvector
 * extension. Nothing was changed. Install pgvector on the server (a DBA runs
 * `CREATE EXTENSION vector` if the migrating role may not), use the embedded
 * database with `@electric-sql/pglite-pgvector` installed, or leave `index` out.
 *
 * @example
 * ```ts
 * try { await store.setup(); } catch (e) { if (e instanceof VectorExtensionMissingError) console.error(e.message); }
 * ```
 */
export class VectorExtensionMissingError extends CheckpointerError {
  readonly schema: string;
  constructor(schema: string, where: "server" | "pglite") {
    super(
      "VECTOR_EXTENSION_MISSING",
      `The store in schema "${schema}" is configured with \`index\` (vector search), which needs the pgvector extension, and ` +
        (where === "pglite"
          ? "the embedded database was opened without it: install @electric-sql/pglite-pgvector (npm install @electric-sql/pglite-pgvector) and open it again, "
          : "this Postgres server does not have it (no \"vector\" in pg_available_extensions): install pgvector on the server, ") +
        "or leave `index` out (search by filter and text works without it). Nothing was changed.",
    );
    this.schema = schema;
  }
}

/**
 * The store's vector table has other dimensions, another distance metric or
 * another index type than the store is configured with. Nothing was changed:
 * changing them is a migration to run on purpose (the CLI prints it with
 * `--dry-run`), after which the stored embeddings are re-made with
 * `store.reindex()` when the dimensions changed.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof StoreIndexMismatchError) console.error(e.current, e.wanted); }
 * ```
 */
export class StoreIndexMismatchError extends CheckpointerError {
  readonly schema: string;
  readonly current: VectorIndexShape;
  readonly wanted: VectorIndexShape;
  constructor(schema: string, current: VectorIndexShape, wanted: VectorIndexShape) {
    const show = (s: VectorIndexShape) => `${s.dims} dimensions, ${s.distanceMetric}, ${s.indexType}`;
    super(
      "STORE_INDEX_MISMATCH",
      `The store's vector index in schema "${schema}" has ${show(current)}; this store is configured with ${show(wanted)}. Nothing was changed. ` +
        `To change it: \`npx langgraph-checkpoint-pg migrate --store-only --schema ${JSON.stringify(schema)} --dims ${wanted.dims} --metric ${wanted.distanceMetric} ` +
        `--index-type ${wanted.indexType} --dry-run\` prints the migration, without --dry-run it runs it` +
        (current.dims !== wanted.dims ? "; the stored embeddings are dropped with the old dimensions: re-make them with `await store.reindex()`." : "."),
    );
    this.schema = schema;
    this.current = current;
    this.wanted = wanted;
  }
}

/**
 * The store's first `setup()` or `migrate --store` found the tables of the
 * official `PostgresStore` (`store`, `store_migrations`) in its own schema and
 * was not told what to do with them. Nothing was changed. Copy their items (`adopt: { from }`,
 * CLI `--adopt-store <schema>`), or start empty beside them (`adopt: false`).
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof StoreAdoptionRequiredError) console.error(e.found); }
 * ```
 */
export class StoreAdoptionRequiredError extends CheckpointerError {
  readonly schema: string;
  /** The schemas holding the official store's tables. */
  readonly found: string[];
  constructor(schema: string, found: string[]) {
    super(
      "ADOPTION_REQUIRED",
      `Setting up the store in schema "${schema}" stopped: ${found.map((f) => `schema "${f}"`).join(", ")} holds the tables of the official PostgresStore ` +
        "(@langchain/langgraph-checkpoint-postgres/store). langgraph-checkpoint-pg never changes them. Nothing was changed. " +
        // --store-only: the store's migration alone. With --store the checkpointer's runs first, and refuses
        // a schema that also holds the official saver's tables (their usual place, beside the official store).
        `To copy their items (the official tables stay as they are): \`npx langgraph-checkpoint-pg migrate --store-only --schema ${JSON.stringify(schema)} --adopt-store ${found[0]} --dry-run\` ` +
        `prints the plan, without --dry-run it runs it; in code: \`store.setup({ adopt: { from: "${found[0]}" } })\`. To start empty beside them: \`adopt: false\`. ` +
        'See "Switching from the official PostgresStore" in the README.',
    );
    this.schema = schema;
    this.found = found;
  }
}
