/**
 * PostgresSaver: LangGraph's `BaseCheckpointSaver` on three Postgres tables
 * (and the lineage heads). SQL lives in queries.ts; this file validates input,
 * serializes (before any connection is taken), runs one statement per
 * operation (deleteThread: two, in one transaction) and rebuilds tuples.
 */
import { createHash } from "node:crypto";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type DeltaChannelHistory,
  type PendingWrite,
  type SerializerProtocol,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  maxChannelVersion,
  writesSortKey,
} from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { isPGlite, pgliteDb, poolDb, type Db, type PGliteLike } from "./db/db.js";
import { DEFAULT_DATA_DIR, openEmbedded } from "./db/embedded.js";
import { ADOPTION_SQLSTATE } from "./ops/adopt.js";
import {
  AdoptionRolledBackError,
  CheckpointConflictError,
  CheckpointParentMissingError,
  CheckpointerError,
  DatabaseOperationError,
  HistoryCorruptError,
  InvalidInputError,
  InvalidOptionsError,
  PayloadTooLargeError,
  SchemaNotMigratedError,
  SchemaTooNewError,
  SerializationError,
  sqlStateOf,
} from "./errors.js";
import { emit, guard, type EventHandler, type HandlerErrorHandler } from "./events.js";
import { readFilter } from "./filter.js";
import { InFlight } from "./inflight.js";
import { Coalescer, type WriteRows } from "./coalesce.js";
import { decodeMetadata, encodeMetadata } from "./serde/metadata.js";
import { assertSchemaCurrent, latestVersion, runMigrations, schemaLevel, type AdoptOption, type MigrateResult, type RetryOptions } from "./db/migrate.js";
import { buildQueries, type ListWhere, type Queries, type ReadRow } from "./queries.js";
import { dumpsForRow, loadsForRow, type ValueRow } from "./serde/rowserde.js";
import { MsgpackSerializer } from "./serde.js";
import { parseDuration } from "./duration.js";
import { checkVersioning, isSyntheticVersion, realVersion, upcastTuple, type StateVersioning, type Upcaster } from "./serde/upcast.js";
import { LIMITS, checkKey, checkSchemaName, readConfig } from "./validate.js";
import { nextVersion } from "./version.js";

/** The fixed statements (all but `list`'s, which are built per call). */
type StatementName = { [K in keyof Queries]: Queries[K] extends string ? K : never }[keyof Queries];

/**
 * How a put whose parent is not the lineage's current head is handled.
 * - `"branch"` (default): LangGraph's semantics. It commits as a new branch,
 *   becomes the head, and a `fork` event reports the displaced head.
 * - `"linear"`: it is rejected with {@link CheckpointConflictError} and writes
 *   nothing, unless the invocation sets `configurable.allow_fork: true`.
 */
export type LineageMode = "branch" | "linear";

export interface PostgresSaverOptions {
  /** Postgres schema holding the tables (any identifier, quotes and dashes included). Default `public`. */
  schema?: string;
  /** Serializer for channel values and writes. Default {@link MsgpackSerializer}. */
  serde?: SerializerProtocol;
  /** See {@link LineageMode}. Default `"branch"`. */
  lineage?: LineageMode;
  /**
   * Receives structured events (put, putWrites, conflict, fork, migrate,
   * connectionError). It may be async; whatever it throws or rejects with is
   * contained (see `onHandlerError`) and never changes an operation's outcome.
   */
  onEvent?: EventHandler;
  /**
   * Receives every error the `onEvent` handler (or `upgradeState`'s
   * `onProgress`) throws or rejects with. Default: the first error of each
   * handler is printed on stderr as a process warning, later ones are not.
   */
  onHandlerError?: HandlerErrorHandler;
  /**
   * Thread time-to-live: a duration (`"30d"`, `"12h"`, or milliseconds)
   * recorded with each checkpoint. `prune()` deletes threads idle for longer
   * than the TTL their latest checkpoint was written with. Default: none.
   */
  ttl?: string | number;
  /**
   * Linear mode only: how long a run's newest checkpoint keeps the thread busy
   * for other runs. A run that crashed mid-way leaves unfinished steps behind;
   * after this long without a new step, another run may start on top of them.
   * Default 300000 (5 minutes); set it above your slowest single step.
   */
  runLeaseMs?: number;
  /**
   * The version of your graph's state schema: a positive integer you raise
   * when the state changes (a channel renamed, split, added...). Each
   * checkpoint records the version it was written with; older ones are upcast
   * on read through {@link PostgresSaverOptions.upcasters}. Default: off.
   */
  stateVersion?: number;
  /**
   * `upcasters[N]` turns the channel values of a version-N checkpoint into
   * version N+1's: a pure function of the values, or `{ rename, values }`.
   * A missing step fails loudly with `StateVersionError`.
   */
  upcasters?: Record<number, Upcaster>;
  /**
   * Largest serialized channel value or write accepted, in bytes. A larger
   * one is refused before any SQL with a {@link PayloadTooLargeError} naming
   * the channel. Default 64 MiB (67108864); at most 1 GiB - 1 MiB. Whatever
   * this is, one `put` or `putWrites` carries at most 1 GiB - 1 MiB in all
   * (Postgres takes no larger message): a larger one is refused the same way,
   * naming its largest channels.
   */
  maxValueBytes?: number;
  /**
   * Use named prepared statements (faster: each statement is parsed and
   * planned once per connection). Turn off behind a pooler that does not
   * support them (PgBouncer in transaction mode before 1.21). Default true.
   */
  preparedStatements?: boolean;
}

/** Every option of {@link PostgresSaverOptions}: anything else is refused, never ignored. */
const SAVER_OPTIONS: ReadonlySet<string> = new Set([
  "schema",
  "serde",
  "lineage",
  "onEvent",
  "onHandlerError",
  "ttl",
  "runLeaseMs",
  "stateVersion",
  "upcasters",
  "maxValueBytes",
  "preparedStatements",
] satisfies (keyof PostgresSaverOptions)[]);

/**
 * What `setup()` may be told.
 *
 * @example
 * ```ts
 * await saver.setup({ retry: { attempts: 30 }, adopt: false });
 * ```
 */
export interface SetupOptions {
  /**
   * The official LangGraph saver's tables: adopt them (`true`, or `{ from:
   * "<schema>" }`), or start empty beside them (`false`). Without it, setup()
   * on a database holding them stops with `AdoptionRequiredError` and changes
   * nothing. See README, "Switching from @langchain/langgraph-checkpoint-postgres".
   */
  adopt?: AdoptOption;
  /**
   * Retrying while the database is not reachable yet (or restarting, or a
   * lock wait timed out): each attempt is reported as a `retry` event.
   * Default: 10 attempts, 250 ms doubling to 5 s (about 30 s in all); `false`: one attempt.
   */
  retry?: RetryOptions | false;
}

/** The `configurable` flag that lets one invocation fork deliberately in linear mode. */
export const ALLOW_FORK_KEY = "allow_fork";

/**
 * Defaults for pools the saver creates (spread them into a pool you make):
 * nothing waits forever, and a dead or silent server is noticed in seconds.
 * - connecting, or waiting for a free client: 5 s (`connectionTimeoutMillis`);
 * - a statement: 20 s on the server (`statement_timeout`), 25 s on the client
 *   (`query_timeout`: the server's own timeout cannot fire when the link is
 *   silent); a lock wait 10 s; an idle transaction 60 s;
 * - TCP keepalive probes after 10 s without traffic (`keepAliveInitialDelayMillis`;
 *   Node then probes every second, 10 times), so a connection to a host that
 *   died or dropped off the network fails within about 20 s, also one waiting
 *   for an answer (a statement the dead host never received is left to
 *   `query_timeout`). Without an initial delay the OS default applies: 2 hours.
 * Override any of them with the `pool` option.
 *
 * @example
 * ```ts
 * const pool = new pg.Pool({ ...BOUNDED_POOL, connectionString: process.env.DATABASE_URL, max: 20 });
 * const saver = new PostgresSaver(pool);
 * ```
 */
export const BOUNDED_POOL: pg.PoolConfig = {
  application_name: "langgraph-checkpoint-pg",
  connectionTimeoutMillis: 5_000,
  statement_timeout: 20_000,
  lock_timeout: 10_000,
  idle_in_transaction_session_timeout: 60_000,
  query_timeout: 25_000,
  keepAlive: true,
  keepAliveInitialDelayMillis: 10_000,
};

/**
 * Bound on re-runs of a put that lost the race to create its lineage's head
 * row (the re-run sees the winner's head; only a thread deleted and re-created
 * in between each time could need another).
 */
const MAX_PUT_ATTEMPTS = 10;

/**
 * What one statement may carry in all: Postgres refuses a protocol message over
 * 1 GiB; 1 MiB is kept for ids, names and framing (which are also counted).
 */
const MAX_STATEMENT_BYTES = 1024 ** 3 - 1024 ** 2;

/** A run lease to release after a failed put or putWrites (linear mode). */
interface PendingRelease {
  threadId: string;
  checkpointNs: string;
  /** The checkpoints the failed run may have left as the head. */
  heads: string[];
  failedAt: number;
  attempt: number;
}

/** Page size of `list` when no limit is given: memory stays bounded on long threads. */
const LIST_PAGE = 100;

/**
 * A LangGraph checkpointer that makes every thread durable in Postgres.
 *
 * @example
 * ```ts
 * import pg from "pg";
 * import { PostgresSaver } from "langgraph-checkpoint-pg";
 *
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const checkpointer = new PostgresSaver(pool, { schema: "agents" });
 * await checkpointer.setup(); // or run `migrate` in CI
 * const graph = builder.compile({ checkpointer });
 * await graph.invoke(input, { configurable: { thread_id: "chat-42" } });
 * ```
 */
export class PostgresSaver extends BaseCheckpointSaver {
  readonly schema: string;
  readonly lineage: LineageMode;
  readonly #db: Db;
  #close: (() => Promise<void>) | undefined;
  readonly #queries: Queries;
  readonly #onEvent: EventHandler | undefined;
  readonly #onHandlerError: HandlerErrorHandler | undefined;
  readonly #prepared: boolean;
  readonly #leaseSeconds: number;
  readonly #ttlSeconds: number | null;
  readonly #maxValueBytes: number;
  readonly #versioning: StateVersioning | undefined;
  /** Statement text -> prepared statement name. */
  readonly #names: Map<string, string>;
  readonly #inFlight = new InFlight();
  /** Queues a lineage's putWrites while one of its writes is in flight, and sends them together (see coalesce.ts). */
  readonly #coalescer = new Coalescer((calls) => this.#sendWrites(calls));
  /** Per thread: settles once the latest operation called on it, and all before it, have (see #inOrder). */
  readonly #tails = new Map<string, Promise<void>>();
  #ready: Promise<void> | undefined;
  /** Lease releases waiting to be retried (see #afterRunFailure); end() stops them. */
  readonly #releases = new Set<NodeJS.Timeout>();
  #closed = false;

  /**
   * @param pool A `pg.Pool`, or a PGlite instance, that the caller owns: {@link end} never closes it.
   * @param options Or, as the official saver takes them, `(pool, serde, options)`.
   *
   * @example
   * ```ts
   * const saver = new PostgresSaver(pool, { lineage: "linear", onEvent: console.log });
   * // The official saver's shape works too: new PostgresSaver(pool, serde, { schema: "agents" })
   * ```
   */
  constructor(pool: pg.Pool | PGliteLike, options?: PostgresSaverOptions);
  constructor(pool: pg.Pool | PGliteLike, serde: SerializerProtocol | undefined, options?: PostgresSaverOptions);
  constructor(pool: pg.Pool | PGliteLike, ...args: [PostgresSaverOptions?] | [SerializerProtocol | undefined, PostgresSaverOptions?]) {
    const options = saverOptions(args);
    super(options.serde ?? new MsgpackSerializer());
    const pglite = isPGlite(pool);
    if (!pglite && !(pool instanceof pg.Pool) && (typeof pool !== "object" || pool === null || typeof (pool as pg.Pool).connect !== "function")) {
      throw new InvalidOptionsError("pool", "expected a pg.Pool or a PGlite instance");
    }
    const lineage = options.lineage ?? "branch";
    if (lineage !== "branch" && lineage !== "linear") throw new InvalidOptionsError("lineage", 'expected "branch" or "linear"');
    if (options.onEvent !== undefined && typeof options.onEvent !== "function") throw new InvalidOptionsError("onEvent", "expected a function");
    if (options.onHandlerError !== undefined && typeof options.onHandlerError !== "function") throw new InvalidOptionsError("onHandlerError", "expected a function");
    this.schema = checkSchemaName(options.schema ?? "public");
    this.lineage = lineage;
    this.#db = pglite ? pgliteDb(pool) : poolDb(pool as pg.Pool);
    this.#queries = buildQueries(this.schema);
    // Guarded once here: a handler that throws or rejects never reaches an operation or the process.
    this.#onEvent = guard(options.onEvent, "onEvent", options.onHandlerError);
    this.#onHandlerError = options.onHandlerError;
    this.#prepared = options.preparedStatements ?? true;
    const lease = options.runLeaseMs ?? 300_000;
    if (typeof lease !== "number" || !Number.isFinite(lease) || lease < 0) throw new InvalidOptionsError("runLeaseMs", "expected a non-negative number of milliseconds");
    this.#leaseSeconds = lease / 1000;
    this.#versioning = checkVersioning(options.stateVersion, options.upcasters);
    this.#maxValueBytes = options.maxValueBytes ?? 64 * 1024 * 1024;
    if (!Number.isInteger(this.#maxValueBytes) || this.#maxValueBytes < 1 || this.#maxValueBytes > MAX_STATEMENT_BYTES) {
      throw new InvalidOptionsError("maxValueBytes", `expected a positive integer up to ${MAX_STATEMENT_BYTES} (Postgres stores no larger value)`);
    }
    this.#ttlSeconds = options.ttl === undefined ? null : Math.max(1, Math.ceil(parseDuration(options.ttl, "ttl") / 1000));
    this.#names = new Map();
    // An idle client dying (e.g. a Postgres restart) makes pg.Pool emit 'error';
    // with no listener that crashes the process. Listen if nobody else does.
    if (!pglite && (pool as pg.Pool).listenerCount("error") === 0) {
      (pool as pg.Pool).on("error", (err) => emit(this.#onEvent, { type: "connectionError", message: err.message }));
    }
  }

  /**
   * A saver on a new `pg.Pool` that it owns: {@link end} closes it.
   *
   * @example
   * ```ts
   * const saver = PostgresSaver.fromConnString(process.env.DATABASE_URL!);
   * await saver.setup();
   * // ...
   * await saver.end();
   * ```
   */
  static fromConnString(connectionString: string, options: PostgresSaverOptions & { pool?: pg.PoolConfig } = {}): PostgresSaver {
    if (typeof connectionString !== "string" || connectionString === "") {
      throw new InvalidOptionsError("connectionString", "expected a postgres:// URL");
    }
    const { pool: poolConfig, ...saverOptions } = options ?? {};
    const pool = new pg.Pool({ ...BOUNDED_POOL, ...poolConfig, connectionString });
    return PostgresSaver.#owning(pool, saverOptions, () => pool.end());
  }

  /** A saver that closes what it was given; closed at once if the options are bad. */
  static #owning(db: pg.Pool | PGliteLike, options: PostgresSaverOptions, close: () => Promise<void>): PostgresSaver {
    let saver: PostgresSaver;
    try {
      saver = new PostgresSaver(db, options);
    } catch (err) {
      void close().catch(() => undefined);
      throw err;
    }
    saver.#close = close;
    return saver;
  }

  /**
   * A saver on `databaseUrl` (default: the `DATABASE_URL` environment
   * variable) or, when there is none, on the embedded database (PGlite)
   * persisted in `dataDir` (default `./.langgraph-pg`), locked to this process.
   * Migrates the schema unless `migrate: false`. The saver owns what it
   * opened: {@link end} closes it.
   *
   * @example
   * ```ts
   * const checkpointer = await PostgresSaver.open(); // DATABASE_URL, or ./.langgraph-pg
   * const graph = builder.compile({ checkpointer });
   * // ...
   * await checkpointer.end();
   * ```
   */
  static async open(
    options: PostgresSaverOptions & SetupOptions & { databaseUrl?: string; dataDir?: string; migrate?: boolean; pool?: pg.PoolConfig } = {},
  ): Promise<PostgresSaver> {
    const { databaseUrl, dataDir, migrate, pool, adopt, retry, ...saverOptions } = options;
    const url = databaseUrl ?? process.env.DATABASE_URL;
    let saver: PostgresSaver;
    if (url) {
      saver = PostgresSaver.fromConnString(url, { ...saverOptions, pool });
    } else {
      const embedded = await openEmbedded(dataDir ?? DEFAULT_DATA_DIR);
      saver = PostgresSaver.#owning(embedded.db, saverOptions, embedded.close);
    }
    if (migrate !== false) {
      try {
        await saver.setup({ adopt, retry });
      } catch (err) {
        await saver.end();
        throw err;
      }
    }
    return saver;
  }

  /**
   * Apply pending migrations to this saver's schema (the same as {@link migrate}).
   * Waits for a database that is not reachable yet (see {@link SetupOptions.retry}).
   * On a database holding the official LangGraph saver's tables it changes
   * nothing and throws `AdoptionRequiredError` unless told what to do with
   * them ({@link SetupOptions.adopt}).
   *
   * @example
   * ```ts
   * await saver.setup();
   * await new PostgresSaver(pool, { schema: "langgraph" }).setup({ adopt: { from: "public" } }); // switching
   * ```
   */
  async setup(options: SetupOptions = {}): Promise<MigrateResult> {
    if (options === null || typeof options !== "object") throw new InvalidOptionsError("setup options", "expected { adopt?, retry? }");
    for (const key of Object.keys(options)) if (key !== "adopt" && key !== "retry") throw new InvalidOptionsError(key, "is not a setup() option (adopt, retry)");
    const result = await runMigrations(this.#db, this.schema, { onEvent: this.#onEvent, adopt: options.adopt, retry: options.retry, operation: "setup" });
    this.#ready = undefined;
    await this.#ensureReady();
    return result;
  }

  /**
   * Close what this saver opened (`fromConnString`'s pool, `open`'s pool or
   * embedded database and its folder lock); a pool you passed in stays open.
   *
   * @example
   * ```ts
   * await saver.end();
   * ```
   */
  async end(): Promise<void> {
    this.#closed = true;
    for (const timer of this.#releases) clearTimeout(timer);
    this.#releases.clear();
    const close = this.#close;
    this.#close = undefined;
    await close?.();
  }

  /** Checks once per saver that the schema is migrated to exactly what this code knows. */
  #ensureReady(): Promise<void> {
    if (!this.#ready) {
      this.#ready = assertSchemaCurrent(this.#db, this.schema, "saver", this.#onEvent);
      // Do not cache a failure: the schema may be migrated a moment later.
      this.#ready.catch(() => {
        this.#ready = undefined;
      });
    }
    return this.#ready;
  }

  /**
   * Deliver the successful results of one thread's operations in the order
   * they were called, as MemorySaver's are; the statements still run
   * concurrently. The parallel tasks of a step (e.g. subgraphs started by
   * `Send`, each with its own namespace) then reach their interrupts in task
   * order, and LangGraph reports the interrupts of a step in the order the
   * tasks got there (LangGraph's test "resume multiple interrupts"). Without
   * it, whichever statement Postgres happened to answer first would decide.
   *
   * A failure is delivered at once: LangGraph stops the run on it, and the
   * sooner it does, the fewer steps run on past a write that was lost (a
   * retry then waits for what is still in flight, see `InFlight`).
   */
  #inOrder<T>(config: RunnableConfig | undefined, op: Promise<T>): Promise<T> {
    const threadId: unknown = config?.configurable?.thread_id;
    if (typeof threadId !== "string") return op;
    const tails = this.#tails;
    const before = tails.get(threadId);
    // Settles (never rejects) once this operation and every earlier one on the thread have.
    const turn: Promise<void> = (before === undefined ? op : before.then(() => op)).then(noop, noop);
    tails.set(threadId, turn);
    void turn.then(() => {
      if (tails.get(threadId) === turn) tails.delete(threadId);
    });
    // Usually nothing is in flight on the thread: then the operation itself, no wait.
    if (before === undefined) return op;
    return op.then((value) => before.then(() => value));
  }

  #query<R extends pg.QueryResultRow>(op: StatementName, values: unknown[], what: string): Promise<{ rows: R[] }> {
    return this.#run<R>(this.#queries[op], values, what);
  }

  /** Run one statement; a prepared one, named after a hash of its text, unless turned off. */
  async #run<R extends pg.QueryResultRow>(text: string, values: unknown[], what: string): Promise<{ rows: R[] }> {
    await this.#ensureReady();
    let name: string | undefined;
    if (this.#prepared) {
      name = this.#names.get(text);
      if (name === undefined) {
        // Names are per connection: a hash of the text keeps savers on different schemas apart.
        name = `lgcp_${createHash("sha1").update(text).digest("hex").slice(0, 16)}`;
        this.#names.set(text, name);
      }
    }
    try {
      return await this.#db.run<R>(text, values, name);
    } catch (err) {
      throw await this.#failure(err, what);
    }
  }

  /** The typed error for a failed statement. */
  async #failure(err: unknown, what: string): Promise<CheckpointerError> {
    if (err instanceof CheckpointerError) return err;
    const state = sqlStateOf(err);
    if (state === ADOPTION_SQLSTATE.rolledBack) return new AdoptionRolledBackError(this.schema, { cause: err });
    if (state === "42P01" || state === "3F000" || state === "42703") {
      // A table or column gone: the schema changed under us (dropped, or a newer release's
      // migration ran since the check). Say which, and check again next time.
      this.#ready = undefined;
      const level = await schemaLevel(this.#db, this.schema).catch(() => undefined);
      const known = latestVersion();
      if (level && level.version > known && level.compatibleFrom > known) {
        return new SchemaTooNewError(this.schema, level.version, known, level.compatibleFrom, { cause: err });
      }
      if (state !== "42703") return new SchemaNotMigratedError(this.schema, level?.version ?? 0, known, { cause: err });
    }
    return new DatabaseOperationError(what, err);
  }

  /**
   * The checkpoint a config points at (its `checkpoint_id`, or the lineage head), with its pending writes.
   *
   * @example
   * ```ts
   * const tuple = await saver.getTuple({ configurable: { thread_id: "chat-42" } });
   * console.log(tuple?.checkpoint.channel_values);
   * ```
   */
  getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    return this.#inOrder(config, this.#getTuple(config));
  }

  async #getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const { threadId, checkpointNs, checkpointId } = readConfig(config, "getTuple", false);
    // LangGraph's contract (and its conformance suite): no thread, no tuple.
    if (threadId === undefined) return undefined;
    const ns = checkpointNs ?? "";
    // After a failed invocation, writes of that run may still be on their way: a retry must start
    // from the head they make (see InFlight).
    await this.#inFlight.settled(InFlight.keyOf(config));
    const res = checkpointId
      ? await this.#query<ReadRow>("getById", [threadId, ns, checkpointId], "getTuple")
      : await this.#query<ReadRow>("getHead", [threadId, ns], "getTuple");
    const [tuple] = await this.#toTuples(res.rows);
    return tuple;
  }

  /**
   * Checkpoints newest first, optionally across all threads (no `thread_id`).
   * Streams in pages, so listing a long thread keeps memory bounded.
   *
   * @example
   * ```ts
   * for await (const t of saver.list({ configurable: { thread_id: "chat-42" } }, { limit: 10, filter: { source: "loop" } })) {
   *   console.log(t.checkpoint.id, t.metadata?.step);
   * }
   * ```
   */
  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { threadId, checkpointNs, checkpointId } = readConfig(config ?? {}, "list", false);
    const { limit, before, filter } = options ?? {};
    if (limit !== undefined && limit !== null && (!Number.isInteger(limit) || limit < 0)) {
      throw new InvalidInputError("list options.limit", "expected a non-negative integer");
    }
    const beforeId = before ? readConfig(before, "list options.before", false).checkpointId : undefined;
    const metadataFilter = readFilter(filter, "list options.filter");
    const where: ListWhere = { threadId, checkpointNs, checkpointId, before: beforeId, limit: 0, filter: metadataFilter?.sql };
    let remaining = limit ?? Number.POSITIVE_INFINITY;
    while (remaining > 0) {
      where.limit = Math.min(remaining, LIST_PAGE);
      const { text, values } = this.#queries.listPage(where);
      const res = await this.#run<ReadRow>(text, values, "list");
      const tuples = await this.#toTuples(res.rows);
      for (const t of tuples) {
        // The SQL filter ran on the JSONB projection: only exact matches count.
        if (metadataFilter && !metadataFilter.matches(t.metadata)) continue;
        yield t;
        if (--remaining === 0) return;
      }
      if (tuples.length < where.limit) return;
      const last = tuples[tuples.length - 1]!.config.configurable!;
      where.cursor = [last.checkpoint_id, last.thread_id, last.checkpoint_ns];
    }
  }

  /**
   * Store a checkpoint: blobs for the channels in `newVersions`, the row, and
   * the head move, in one statement. A parent that is not stored is accepted
   * in branch mode when every value the checkpoint refers to is stored (else
   * {@link CheckpointParentMissingError}); deciding that takes a second statement.
   *
   * @example
   * ```ts
   * const next = await saver.put(config, checkpoint, { source: "loop", step: 1, parents: {} }, { messages: v });
   * ```
   */
  put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const key = InFlight.keyOf(config);
    return this.#inOrder(config, this.#inFlight.track(key, this.#coalescer.during(key, () => this.#putOrRelease(config, checkpoint, metadata, newVersions))));
  }

  async #putOrRelease(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    try {
      return await this.#put(config, checkpoint, metadata, newVersions);
    } catch (err) {
      // A put that starts a run does not own its parent's lease (another run may): only its own checkpoint's.
      const source = (metadata as { source?: unknown } | undefined)?.source;
      const startsRun = source === "input" || source === "update";
      await this.#afterRunFailure(err, config, startsRun ? [checkpoint?.id] : [config?.configurable?.checkpoint_id, checkpoint?.id]);
      throw err;
    }
  }

  /**
   * Store the writes a task produced from a checkpoint (one statement).
   *
   * @example
   * ```ts
   * await saver.putWrites(config, [["messages", [msg]]], taskId, taskPath);
   * ```
   */
  putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ""): Promise<void> {
    return this.#inOrder(config, this.#inFlight.track(InFlight.keyOf(config), this.#putWritesOrRelease(config, writes, taskId, taskPath)));
  }

  async #putWritesOrRelease(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath: string): Promise<void> {
    try {
      await this.#putWrites(config, writes, taskId, taskPath);
    } catch (err) {
      await this.#afterRunFailure(err, config, [config?.configurable?.checkpoint_id]);
      throw err;
    }
  }

  /**
   * Linear mode: a failed put or putWrites ends its run (LangGraph stops the
   * invocation), but the lineage's head still has tasks left, which would keep
   * new input out for `runLeaseMs`. Release the lease of the head this run
   * left, if it is still the head: now, or, when that fails (the database is
   * what failed), again in the background until it works or the lease ran out.
   * A conflict means another run holds the lineage: nothing to release.
   */
  async #afterRunFailure(err: unknown, config: RunnableConfig, ids: unknown[]): Promise<void> {
    if (this.lineage !== "linear" || err instanceof CheckpointConflictError || err instanceof SchemaNotMigratedError) return;
    let key: ReturnType<typeof readConfig>;
    try {
      key = readConfig(config, "put");
    } catch {
      return;
    }
    const heads = ids.filter((id): id is string => typeof id === "string" && id !== "");
    if (key.threadId === undefined || heads.length === 0) return;
    const lease = { threadId: key.threadId, checkpointNs: key.checkpointNs ?? "", heads, failedAt: Date.now(), attempt: 0 };
    if (!(await this.#releaseLease(lease))) this.#retryRelease(lease);
  }

  /** One attempt; true when done (released, or nothing left to release). */
  async #releaseLease(lease: PendingRelease): Promise<boolean> {
    lease.attempt++;
    try {
      const { rows } = await this.#run<{ checkpoint_id: string }>(this.#queries.releaseLease, [lease.threadId, lease.checkpointNs, lease.heads], "releasing a run lease");
      if (rows.length > 0) {
        emit(this.#onEvent, { type: "leaseReleased", threadId: lease.threadId, checkpointNs: lease.checkpointNs, checkpointId: rows[0]!.checkpoint_id, attempts: lease.attempt });
      }
      return true;
    } catch {
      return false;
    }
  }

  #retryRelease(lease: PendingRelease): void {
    // Until the lease would have run out anyway; backing off from 250 ms to 5 s.
    if (this.#closed || Date.now() - lease.failedAt > this.#leaseSeconds * 1000) return;
    const timer = setTimeout(() => {
      this.#releases.delete(timer);
      void this.#releaseLease(lease).then((done) => done || this.#retryRelease(lease));
    }, Math.min(5000, 250 * 2 ** Math.min(lease.attempt, 5)));
    timer.unref();
    this.#releases.add(timer);
  }

  async #put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const started = performance.now();
    const { threadId, checkpointNs, checkpointId: parentId } = readConfig(config, "put");
    const ns = checkpointNs ?? "";
    if (checkpoint === null || typeof checkpoint !== "object") throw new InvalidInputError("put checkpoint", "expected a checkpoint object");
    const id = checkKey("put checkpoint.id", checkpoint.id, LIMITS.checkpoint_id);
    const values = (checkpoint.channel_values ?? {}) as Record<string, unknown>;
    const channels: string[] = [];
    const versions: string[] = [];
    const types: string[] = [];
    const payloads: (Uint8Array | null)[] = [];
    await Promise.all(
      Object.entries(newVersions ?? {}).map(async ([channel, version]) => {
        checkKey("put newVersions key (channel)", channel, LIMITS.channel);
        const v = checkKey("put newVersions value (version)", String(version), LIMITS.version);
        let type = "empty";
        let bytes: Uint8Array | null = null;
        if (Object.prototype.hasOwnProperty.call(values, channel)) {
          const field = `put checkpoint.channel_values[${JSON.stringify(channel)}]`;
          try {
            [type, bytes] = await dumpsForRow(this.serde, values[channel], { table: "checkpoint_blobs", threadId: threadId!, checkpointNs: ns, channel, version: v });
          } catch (err) {
            throw named(err, field);
          }
          this.#checkSize(field, bytes);
        }
        channels.push(channel);
        versions.push(v);
        types.push(type);
        payloads.push(bytes);
      }),
    );
    // Channels an upcast created or changed carry a version with no blob yet: store it now.
    await Promise.all(
      Object.entries(checkpoint.channel_versions ?? {}).map(async ([channel, version]) => {
        if (!isSyntheticVersion(version) || Object.prototype.hasOwnProperty.call(newVersions ?? {}, channel)) return;
        if (!Object.prototype.hasOwnProperty.call(values, channel)) return;
        const v = String(version);
        const field = `put checkpoint.channel_values[${JSON.stringify(channel)}]`;
        let typed: [string, Uint8Array];
        try {
          typed = await dumpsForRow(this.serde, values[channel], { table: "checkpoint_blobs", threadId: threadId!, checkpointNs: ns, channel, version: v });
        } catch (err) {
          throw named(err, field);
        }
        const [type, bytes] = typed;
        this.#checkSize(field, bytes);
        channels.push(channel);
        versions.push(v);
        types.push(type);
        payloads.push(bytes);
      }),
    );
    const { channel_values: _omit, ...stored } = checkpoint;
    // MemorySaver's defaults for fields an older writer may leave out (its copyCheckpoint).
    stored.channel_versions ??= {};
    stored.versions_seen ??= {};
    const unversioned = await this.#encodeUnversioned(values, checkpoint.channel_versions, "put checkpoint.channel_values (channels without a version)", {
      table: "checkpoints",
      threadId: threadId!,
      checkpointNs: ns,
      checkpointId: id,
    });
    const meta = await encodeMetadata(metadata);
    const allowFork = config.configurable?.[ALLOW_FORK_KEY] === true;
    const linear = this.lineage === "linear" && !allowFork;
    // New input or a state update starts a run; loop steps continue one.
    const source = (metadata as { source?: unknown } | undefined)?.source;
    const startsRun = source === "input" || source === "update";
    // Tasks left to run: a trigger LangGraph has not consumed (it drops consumed,
    // empty channels from the values), or pending sends.
    const tasks = values[TASKS];
    const hasPendingTasks =
      Object.keys(values).some((ch) => ch === "__start__" || ch.startsWith("branch:to:")) || (Array.isArray(tasks) && tasks.length > 0);
    // Serialized here (pg would do the same), so the size check counts exactly what is sent.
    const storedJson = JSON.stringify(stored);
    const metaJson = JSON.stringify(meta.json);
    if (boundBytes([payloads, [unversioned.bytes, meta.raw]], [[storedJson, metaJson, threadId!, ns, id, parentId ?? ""], channels, versions, types]) > MAX_STATEMENT_BYTES) {
      checkStatementSize("put checkpoint", [
        ...channels.map((channel, i) => ({ name: `channel ${JSON.stringify(channel)}`, bytes: payloads[i]?.byteLength ?? 0 })),
        { name: "channels without a version", bytes: unversioned.bytes?.byteLength ?? 0 },
        { name: "metadata", bytes: Buffer.byteLength(metaJson) + (meta.raw?.byteLength ?? 0) },
        { name: "the checkpoint without its values", bytes: Buffer.byteLength(storedJson) },
        { name: "ids, channel names and versions", bytes: boundBytes([], [[threadId!, ns, id, parentId ?? ""], channels, versions, types]) },
      ]);
    }
    const packed = pack(payloads);
    const params = [
      threadId, ns, id, parentId ?? null, storedJson, metaJson, meta.raw, linear, channels, versions, types, packed.offsets,
      startsRun, this.#leaseSeconds, this.#ttlSeconds, this.#versioning?.stateVersion ?? null, hasPendingTasks, packed.lengths, packed.bytes,
      unversioned.type, unversioned.bytes,
    ];

    // The head row is locked FOR UPDATE; a concurrent put that moved it while we
    // waited is seen (the locked row is re-read). The one case the move fails
    // is two first puts of a lineage racing to create its head row: the loser
    // wrote nothing and runs again, now seeing the winner's head.
    // Puts whose parent is stored take one statement. One that names a parent
    // that is not stored, or a root put into a lineage that has a head, writes
    // nothing there and takes a second, checking statement (see putChecked).
    let checked = false;
    for (let attempt = 1; ; attempt++) {
      let row: PutRow | undefined;
      if (!checked) {
        const fast = (await this.#query<Omit<PutRow, "parent_known" | "late" | "missing"> & { fast: boolean }>("put", params, "put")).rows[0]!;
        if (fast.fast) {
          row = Object.assign(fast, { parent_known: true, late: false, missing: null });
        } else {
          checked = true;
          params.push(...referencedValues(checkpoint.channel_versions, channels, versions));
        }
      }
      row ??= (await this.#query<PutRow>("putChecked", params, "put")).rows[0]!;
      if (row.ok && row.moved === 0 && !row.late) {
        if (attempt < MAX_PUT_ATTEMPTS) continue;
        throw new DatabaseOperationError("put", new Error(`the head of lineage ${JSON.stringify(ns)} kept changing under ${MAX_PUT_ATTEMPTS} attempts`), { retryable: true });
      }
      let head = row.head_id ?? undefined;
      if (!row.ok && !row.parent_known) {
        const missing = (row.missing ?? []).map(([channel, version]) => ({ channel, version }));
        emit(this.#onEvent, {
          type: "parentMissing",
          threadId: threadId!,
          checkpointNs: ns,
          checkpointId: id,
          parentCheckpointId: parentId!,
          missing,
          durationMs: performance.now() - started,
        });
        throw new CheckpointParentMissingError({ threadId: threadId!, checkpointNs: ns, checkpointId: id, parentCheckpointId: parentId!, missing });
      }
      if (!row.ok) {
        if (head === undefined) head = (await this.#query<{ checkpoint_id: string }>("headId", [threadId, ns], "put")).rows[0]?.checkpoint_id;
        const reason = head === parentId ? "run-in-progress" : "head-moved";
        emit(this.#onEvent, {
          type: "conflict",
          threadId: threadId!,
          checkpointNs: ns,
          checkpointId: id,
          expectedParent: parentId,
          actualHead: head,
          reason,
          durationMs: performance.now() - started,
        });
        throw new CheckpointConflictError({ threadId: threadId!, checkpointNs: ns, expectedParent: parentId, actualHead: head, reason });
      }
      if (head !== undefined && head !== parentId && head !== id && !row.late) {
        emit(this.#onEvent, {
          type: "fork",
          threadId: threadId!,
          checkpointNs: ns,
          checkpointId: id,
          parentCheckpointId: parentId,
          displacedHead: head,
          deliberate: allowFork,
        });
      }
      emit(this.#onEvent, {
        type: "put",
        threadId: threadId!,
        checkpointNs: ns,
        checkpointId: id,
        parentCheckpointId: parentId,
        blobs: row.blobs,
        durationMs: performance.now() - started,
      });
      return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } };
    }
  }

  async #putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath: string): Promise<void> {
    const started = performance.now();
    const { threadId, checkpointNs, checkpointId } = readConfig(config, "putWrites");
    if (checkpointId === undefined) {
      throw new InvalidInputError("putWrites config.configurable.checkpoint_id", "is missing; writes belong to a checkpoint");
    }
    checkKey("putWrites taskId", taskId, LIMITS.task_id);
    if (typeof taskPath !== "string") throw new InvalidInputError("putWrites taskPath", "expected a string");
    if (!Array.isArray(writes)) throw new InvalidInputError("putWrites writes", "expected an array of [channel, value] pairs");
    if (writes.length === 0) return;
    let n = writes.length;
    let idx = new Array<number>(n);
    let channels = new Array<string>(n);
    let types = new Array<string>(n);
    let payloads = new Array<Uint8Array>(n);
    await Promise.all(
      writes.map(async (write, i) => {
        if (!Array.isArray(write) || write.length !== 2) throw new InvalidInputError(`putWrites writes[${i}]`, "expected a [channel, value] pair");
        const channel = checkKey(`putWrites writes[${i}][0] (channel)`, write[0], LIMITS.channel);
        idx[i] = WRITES_IDX_MAP[channel] ?? i;
        channels[i] = channel;
        const field = `putWrites writes[${i}] (channel ${JSON.stringify(channel)})`;
        try {
          [types[i], payloads[i]] = await dumpsForRow(this.serde, write[1], {
            table: "checkpoint_writes",
            threadId: threadId!,
            checkpointNs: checkpointNs ?? "",
            checkpointId,
            taskId,
            idx: idx[i]!,
          });
        } catch (err) {
          throw named(err, field);
        }
        this.#checkSize(field, payloads[i]!);
      }),
    );
    // A special channel written twice in one call (__resume__ by a node that
    // interrupts several times): the last one wins, as in MemorySaver and the
    // official saver. One INSERT ... ON CONFLICT cannot touch a row twice.
    let special = 0;
    for (const k of idx) if (k < 0) special++;
    if (special > 1 && new Set(idx.filter((k) => k < 0)).size < special) {
      const keep = idx.map((k, i) => k >= 0 || idx.lastIndexOf(k) === i);
      const pick = <T>(a: T[]) => a.filter((_, i) => keep[i]);
      [idx, channels, types, payloads] = [pick(idx), pick(channels), pick(types), pick(payloads)];
      n = idx.length;
    }
    const keys = [[threadId!, checkpointNs ?? "", checkpointId, taskId, taskPath], channels, types];
    if (boundBytes([payloads], keys) > MAX_STATEMENT_BYTES) {
      checkStatementSize("putWrites writes", [
        ...channels.map((channel, i) => ({ name: `writes[${i}] (channel ${JSON.stringify(channel)})`, bytes: payloads[i]!.byteLength })),
        { name: "ids and channel names", bytes: boundBytes([], keys) },
      ]);
    }
    const rows = { threadId: threadId!, checkpointNs: checkpointNs ?? "", checkpointId, taskId, taskPath, idx, channels, types, payloads, bytes: boundBytes([payloads], keys) };
    await this.#coalescer.write(InFlight.keyOf(config), rows);
    emit(this.#onEvent, {
      type: "putWrites",
      threadId: threadId!,
      checkpointNs: checkpointNs ?? "",
      checkpointId,
      taskId,
      writes: n,
      durationMs: performance.now() - started,
    });
  }

  /** One statement for the rows of one putWrites call, or of several of one lineage (coalesced). */
  async #sendWrites(calls: WriteRows[]): Promise<void> {
    const first = calls[0]!;
    if (calls.length === 1) {
      const packed = pack(first.payloads);
      await this.#query(
        "putWrites",
        [first.threadId, first.checkpointNs, first.checkpointId, first.taskId, first.taskPath, first.idx, first.channels, first.types, packed.offsets, packed.lengths, packed.bytes],
        "putWrites",
      );
      return;
    }
    const perRow = (f: (c: WriteRows) => string) => calls.flatMap((c) => c.idx.map(() => f(c)));
    const packed = pack(calls.flatMap((c) => c.payloads));
    await this.#query(
      "putWritesBatch",
      [
        first.threadId,
        first.checkpointNs,
        perRow((c) => c.checkpointId),
        perRow((c) => c.taskId),
        perRow((c) => c.taskPath),
        calls.flatMap((c) => c.idx),
        calls.flatMap((c) => c.channels),
        calls.flatMap((c) => c.types),
        packed.offsets,
        packed.lengths,
        packed.bytes,
      ],
      "putWrites",
    );
  }

  /**
   * Delete every checkpoint, write and blob of a thread (all namespaces).
   *
   * @example
   * ```ts
   * await saver.deleteThread("chat-42");
   * ```
   */
  async deleteThread(threadId: string): Promise<void> {
    checkKey("deleteThread threadId", threadId, LIMITS.thread_id);
    await this.#ensureReady();
    // Two statements in one transaction: the head rows first (waiting for a put
    // in flight on the thread to commit), then the rest in a snapshot that sees
    // that put's rows. One statement would leave such a put's checkpoint behind.
    try {
      await this.#db.transaction(async (tx) => {
        await tx.query(this.#queries.deleteHeads, [threadId]);
        await tx.query(this.#queries.deleteThread, [threadId]);
      });
    } catch (err) {
      throw await this.#failure(err, "deleteThread");
    }
  }

  /**
   * One recursive statement walks the parent chain for all requested delta
   * channels (the base class would issue one `getTuple` per ancestor).
   *
   * @example
   * ```ts
   * const h = await saver.getDeltaChannelHistory({ config, channels: ["messages"] });
   * ```
   */
  override getDeltaChannelHistory(options: { config: RunnableConfig; channels: string[] }): Promise<Record<string, DeltaChannelHistory>> {
    return this.#inOrder(options?.config, this.#getDeltaChannelHistory(options));
  }

  async #getDeltaChannelHistory(options: { config: RunnableConfig; channels: string[] }): Promise<Record<string, DeltaChannelHistory>> {
    const { config, channels } = options ?? ({} as typeof options);
    if (!Array.isArray(channels)) throw new InvalidInputError("getDeltaChannelHistory channels", "expected an array of channel names");
    if (channels.length === 0) return {};
    channels.forEach((c, i) => checkKey(`getDeltaChannelHistory channels[${i}]`, c, LIMITS.channel));
    const { threadId, checkpointNs, checkpointId } = readConfig(config, "getDeltaChannelHistory");
    const res = await this.#query<{
      kind: number;
      depth: number;
      checkpoint_id: string;
      channel: string;
      version: string | null;
      task_id: string | null;
      task_path: string | null;
      idx: number | null;
      type: string;
      value: Buffer | null;
    }>("deltaHistory", [threadId, checkpointNs ?? "", checkpointId ?? null, channels], "getDeltaChannelHistory");
    const stopped = res.rows.find((r) => r.kind === 0);
    if (stopped) {
      throw new HistoryCorruptError({
        threadId: threadId!,
        checkpointNs: checkpointNs ?? "",
        checkpointId: stopped.checkpoint_id,
        reason: stopped.type === "cycle" ? "cycle" : "missing-parent",
        operation: "getDeltaChannelHistory",
      });
    }
    const result: Record<string, DeltaChannelHistory> = {};
    for (const ch of channels) result[ch] = { writes: [] };
    const writeRows = res.rows.filter((r) => r.kind === 2);
    // Oldest ancestor first; within one checkpoint, the order live execution applies writes.
    writeRows.sort(
      (a, b) =>
        b.depth - a.depth ||
        compareWritesSortKeys(writesSortKey(a.task_path ?? "", a.task_id!, a.idx!), writesSortKey(b.task_path ?? "", b.task_id!, b.idx!)),
    );
    const ns = checkpointNs ?? "";
    const decoded = await Promise.all(
      writeRows.map((r) =>
        this.#decode(r.type, r.value, { table: "checkpoint_writes", threadId: threadId!, checkpointNs: ns, checkpointId: r.checkpoint_id, taskId: r.task_id!, idx: r.idx! }),
      ),
    );
    writeRows.forEach((r, i) => result[r.channel]!.writes.push([r.task_id!, r.channel, decoded[i]]));
    for (const r of res.rows) {
      if (r.kind === 1) {
        result[r.channel]!.seed = await this.#decode(r.type, r.value, { table: "checkpoint_blobs", threadId: threadId!, checkpointNs: ns, channel: r.channel, version: r.version! });
      }
    }
    return result;
  }

  /**
   * Rewrite every checkpoint older than `stateVersion` into the current state
   * schema, in batches (one transaction each): new blobs for upcast channels,
   * the checkpoint row compare-and-set on its row_version, renamed pending
   * writes. Nothing is deleted; parent links are unchanged, so history stays.
   * Afterwards reads need no upcasters.
   *
   * @example
   * ```ts
   * const saver = new PostgresSaver(pool, { stateVersion: 2, upcasters: { 1: v1ToV2 } });
   * const { rewritten } = await saver.upgradeState({ batchSize: 200, onProgress: console.log });
   * ```
   */
  async upgradeState(options: { batchSize?: number; onProgress?: (p: { rewritten: number }) => unknown } = {}): Promise<{ rewritten: number }> {
    const versioning = this.#versioning;
    if (!versioning) throw new InvalidOptionsError("stateVersion", "upgradeState needs the saver's stateVersion (and upcasters)");
    const batchSize = options.batchSize ?? 100;
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new InvalidOptionsError("batchSize", "expected a positive integer");
    if (options.onProgress !== undefined && typeof options.onProgress !== "function") throw new InvalidOptionsError("onProgress", "expected a function");
    const onProgress = guard(options.onProgress, "onProgress", this.#onHandlerError);
    await this.#ensureReady();
    const q = this.#queries;
    let cursor: [string, string, string] = ["", "", ""];
    let rewritten = 0;
    for (;;) {
      const done = await this.#db.transaction(async (tx) => {
        const batch = (
          await tx.query<{ thread_id: string; checkpoint_ns: string; checkpoint_id: string; row_version: string }>(q.staleBatch, [
            versioning.stateVersion,
            ...cursor,
            batchSize,
          ])
        ).rows;
        for (const row of batch) {
          const key = [row.thread_id, row.checkpoint_ns, row.checkpoint_id];
          const rows = (await tx.query<ReadRow>(q.getById, key)).rows;
          const [tuple] = await this.#toTuples(rows, false);
          const renames = upcastTuple(tuple!, rows.find((r) => r.kind === 0)!.n, versioning);
          const cp = tuple!.checkpoint;
          // Made-up versions become real ones: same counter, now backed by a stored blob.
          const real = realVersion;
          const blobs = await Promise.all(
            Object.entries(cp.channel_versions)
              .filter(([ch, v]) => isSyntheticVersion(v) && Object.prototype.hasOwnProperty.call(cp.channel_values, ch))
              .map(async ([ch, v]) => {
                const version = String(real(v));
                const row = { table: "checkpoint_blobs" as const, threadId: key[0]!, checkpointNs: key[1]!, channel: ch, version };
                return { ch, v: version, typed: await dumpsForRow(this.serde, cp.channel_values[ch], row) };
              }),
          );
          await tx.query(q.insertBlobs, [key[0], key[1], blobs.map((b) => b.ch), blobs.map((b) => b.v), blobs.map((b) => b.typed[0]), blobs.map((b) => b.typed[1])]);
          const { channel_values: _values, ...stored } = cp;
          stored.channel_versions = Object.fromEntries(Object.entries(cp.channel_versions).map(([ch, v]) => [ch, real(v)])) as typeof cp.channel_versions;
          // The upcast values of channels without a version are stored again too.
          const unversioned = await this.#encodeUnversioned(cp.channel_values, cp.channel_versions, "upgradeState channel_values (channels without a version)", {
            table: "checkpoints",
            threadId: row.thread_id,
            checkpointNs: row.checkpoint_ns,
            checkpointId: row.checkpoint_id,
          });
          const updated = await tx.query(q.rewriteCheckpoint, [...key, row.row_version, stored, versioning.stateVersion, unversioned.type, unversioned.bytes]);
          if (updated.rows.length === 0) throw new DatabaseOperationError("upgradeState", new Error("a checkpoint changed during its rewrite"), { retryable: true });
          for (const [from, to] of renames) await tx.query(q.renameWrites, [...key, from, to]);
          cursor = [row.thread_id, row.checkpoint_ns, row.checkpoint_id];
        }
        rewritten += batch.length;
        return batch.length < batchSize;
      });
      onProgress?.({ rewritten });
      if (done) return { rewritten };
    }
  }

  /**
   * Versions sort like a counter and differ between branches (see version.ts):
   * a new thread gets short ones (`-a1.3xf09qzl`, `-a2.…`, …, `-b10.…`); a thread
   * already in the long format (`00000000000000000000000000000002.0.27…`, this
   * package before 0.x and the Python savers) keeps it; numeric versions
   * (threads adopted from the official JS saver, which compares them with `>`
   * and never across types) stay numbers.
   *
   * The return type says `number` only so the saver stays assignable to
   * `BaseCheckpointSaver` (whose version type parameter defaults to number,
   * the type `compile({ checkpointer })` expects); at run time LangGraph
   * treats versions as opaque and compares strings with
   * `compareChannelVersions`, as it does for the Python savers.
   */
  override getNextVersion(current: string | number | undefined): number {
    return nextVersion(current) as number;
  }

  /**
   * The channel values a checkpoint holds without a version (no blob can name
   * them), serialized together as one map; none: nulls.
   */
  async #encodeUnversioned(
    values: Record<string, unknown>,
    versions: Checkpoint["channel_versions"] | undefined,
    field: string,
    row: ValueRow,
  ): Promise<{ type: string | null; bytes: Uint8Array | null }> {
    const entries = Object.entries(values).filter(([channel]) => !Object.prototype.hasOwnProperty.call(versions ?? {}, channel));
    if (entries.length === 0) return { type: null, bytes: null };
    const [type, bytes] = await dumpsForRow(this.serde, Object.fromEntries(entries), row);
    this.#checkSize(field, bytes);
    return { type, bytes };
  }

  #checkSize(field: string, bytes: Uint8Array): void {
    if (bytes.byteLength > this.#maxValueBytes) {
      throw new PayloadTooLargeError(field, `serializes to ${bytes.byteLength} bytes; the limit (maxValueBytes) is ${this.#maxValueBytes}`, {
        bytes: bytes.byteLength,
        limit: this.#maxValueBytes,
        largest: [{ name: field, bytes: bytes.byteLength }],
      });
    }
  }

  /** Decode a stored value; `row` is where it is stored (a serializer may check that the value belongs there). */
  async #decode(type: string, value: Buffer | null, row: ValueRow): Promise<unknown> {
    return loadsForRow(this.serde, type, value ?? new Uint8Array(), row);
  }

  /** Rebuild tuples from read rows, newest first; upcast to the saver's state version unless told not to. */
  async #toTuples(rows: ReadRow[], upcast = true): Promise<CheckpointTuple[]> {
    interface Entry {
      head: ReadRow;
      blobs: ReadRow[];
      writes: ReadRow[];
      sends: ReadRow[];
    }
    const byKey = new Map<string, Entry>();
    const keyOf = (r: ReadRow) => `${r.thread_id}\u0000${r.checkpoint_ns}\u0000${r.checkpoint_id}`;
    for (const r of rows) if (r.kind === 0) byKey.set(keyOf(r), { head: r, blobs: [], writes: [], sends: [] });
    for (const r of rows) {
      if (r.kind === 0) continue;
      const e = byKey.get(keyOf(r))!;
      (r.kind === 1 ? e.blobs : r.kind === 2 ? e.writes : e.sends).push(r);
    }
    const entries = [...byKey.values()].sort(
      (a, b) =>
        codePointCompare(b.head.checkpoint_id, a.head.checkpoint_id) ||
        codePointCompare(b.head.thread_id, a.head.thread_id) ||
        codePointCompare(b.head.checkpoint_ns, a.head.checkpoint_ns),
    );
    return Promise.all(entries.map((e) => this.#toTuple(e.head, e.blobs, e.writes, e.sends, upcast)));
  }

  async #toTuple(head: ReadRow, blobs: ReadRow[], writes: ReadRow[], sends: ReadRow[], upcast: boolean): Promise<CheckpointTuple> {
    const byOrder = (a: ReadRow, b: ReadRow) =>
      compareWritesSortKeys(writesSortKey(a.s4 ?? "", a.s1!, a.n!), writesSortKey(b.s4 ?? "", b.s1!, b.n!));
    writes.sort(byOrder);
    const threadId = head.thread_id;
    const checkpointNs = head.checkpoint_ns;
    const writeRow = (w: ReadRow, checkpointId: string): ValueRow => ({ table: "checkpoint_writes", threadId, checkpointNs, checkpointId, taskId: w.s1!, idx: w.n! });
    const [values, unversioned, pendingWrites, metadata] = await Promise.all([
      Promise.all(
        blobs.map(async (b) => [b.s1!, await this.#decode(b.s3!, b.v, { table: "checkpoint_blobs", threadId, checkpointNs, channel: b.s1!, version: b.s2! })] as const),
      ),
      head.uv === null
        ? undefined
        : (this.#decode(head.s3!, head.uv, { table: "checkpoints", threadId, checkpointNs, checkpointId: head.checkpoint_id }) as Promise<Record<string, unknown>>),
      Promise.all(writes.map(async (w): Promise<CheckpointPendingWrite> => [w.s1!, w.s2!, await this.#decode(w.s3!, w.v, writeRow(w, head.checkpoint_id))])),
      decodeMetadata(head.md, head.v),
    ]);
    const stored = head.cp as Partial<Omit<Checkpoint, "channel_values">>;
    const checkpoint = {
      ...stored,
      // MemorySaver's defaults, for rows an older writer stored without them.
      channel_versions: stored.channel_versions ?? {},
      versions_seen: stored.versions_seen ?? {},
      channel_values: { ...unversioned, ...Object.fromEntries(values) },
    } as Checkpoint;
    const parent = head.s1 ?? undefined;
    if (checkpoint.v < 4 && parent !== undefined) {
      // Checkpoints before format v4 kept pending sends as writes of the parent.
      sends.sort(byOrder);
      checkpoint.channel_values[TASKS] = await Promise.all(sends.map((w) => this.#decode(w.s3!, w.v, writeRow(w, parent))));
      const existing = Object.values(checkpoint.channel_versions ?? {});
      checkpoint.channel_versions = {
        ...checkpoint.channel_versions,
        [TASKS]: existing.length > 0 ? maxChannelVersion(...existing) : this.getNextVersion(undefined),
      };
    }
    const tuple: CheckpointTuple = {
      config: { configurable: { thread_id: head.thread_id, checkpoint_ns: head.checkpoint_ns, checkpoint_id: head.checkpoint_id } },
      checkpoint,
      metadata: metadata as CheckpointMetadata,
      pendingWrites,
    };
    if (parent !== undefined) {
      tuple.parentConfig = { configurable: { thread_id: head.thread_id, checkpoint_ns: head.checkpoint_ns, checkpoint_id: parent } };
    }
    if (upcast && this.#versioning) upcastTuple(tuple, head.n, this.#versioning);
    return tuple;
  }
}

/**
 * Refuse a statement whose parts add up to more than Postgres takes in one
 * message; the error names the largest parts.
 */
function checkStatementSize(field: string, parts: { name: string; bytes: number }[]): void {
  let total = 0;
  for (const p of parts) total += p.bytes;
  if (total <= MAX_STATEMENT_BYTES) return;
  const largest = parts
    .filter((p) => p.bytes > 0)
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, 5);
  throw new PayloadTooLargeError(
    field,
    `all values together serialize to ${total} bytes; one statement carries at most ${MAX_STATEMENT_BYTES} (Postgres refuses larger messages). ` +
      `Largest: ${largest.map((p) => `${p.name} (${p.bytes} bytes)`).join(", ")}. Store large data elsewhere and keep a reference in the state.`,
    { bytes: total, limit: MAX_STATEMENT_BYTES, largest },
  );
}

/**
 * An upper bound of what a statement sends, cheap enough for every put: the
 * bytes of the values, and of the strings as UTF-8 (at most 3 per UTF-16
 * unit) with array quoting. Only above the limit is it counted exactly.
 */
function boundBytes(values: readonly (readonly (Uint8Array | null)[])[], strings: readonly (readonly string[])[]): number {
  let n = 0;
  for (const list of values) for (const v of list) n += v?.byteLength ?? 0;
  for (const list of strings) for (const s of list) n += s.length * 3 + 4;
  return n;
}

/**
 * The options of `new PostgresSaver(pool, options)` or of the official
 * saver's `new PostgresSaver(pool, serde, options)`, checked: an option this
 * saver does not know is refused, never ignored.
 */
function saverOptions(args: [PostgresSaverOptions?] | [SerializerProtocol | undefined, PostgresSaverOptions?]): PostgresSaverOptions {
  const isSerde = (x: unknown) =>
    typeof x === "object" && x !== null && typeof (x as SerializerProtocol).dumpsTyped === "function" && typeof (x as SerializerProtocol).loadsTyped === "function";
  let options: PostgresSaverOptions;
  if (args.length >= 2 || isSerde(args[0])) {
    // The official shape: (pool, serde?, options?).
    const [serde, rest] = args as [SerializerProtocol | undefined, PostgresSaverOptions?];
    if (serde != null && !isSerde(serde)) {
      throw new InvalidOptionsError("serde", "the second of three arguments is the serializer (with dumpsTyped and loadsTyped), or undefined");
    }
    options = checkOptionKeys(rest ?? {});
    if (serde && options.serde && options.serde !== serde) throw new InvalidOptionsError("serde", "given twice (second argument and options.serde)");
    if (serde) options = { ...options, serde };
  } else {
    options = checkOptionKeys(args[0] ?? {});
  }
  if (options.serde !== undefined && !isSerde(options.serde)) throw new InvalidOptionsError("serde", "expected a serializer with dumpsTyped and loadsTyped");
  return options;
}

function checkOptionKeys(options: unknown): PostgresSaverOptions {
  if (options === null || typeof options !== "object" || Array.isArray(options)) throw new InvalidOptionsError("options", "expected an object");
  for (const key of Object.keys(options)) {
    if (!SAVER_OPTIONS.has(key)) throw new InvalidOptionsError(key, `is not an option of this saver (${[...SAVER_OPTIONS].join(", ")})`);
  }
  return options as PostgresSaverOptions;
}

/**
 * Values travel as one binary parameter: pg sends a Buffer as binary, but a
 * bytea[] as hex text. Offsets and lengths (-1: NULL) cut it apart in SQL.
 */
function pack(values: readonly (Uint8Array | null)[]): { offsets: number[]; lengths: number[]; bytes: Buffer } {
  const offsets = new Array<number>(values.length);
  const lengths = new Array<number>(values.length);
  let total = 0;
  values.forEach((v, i) => {
    offsets[i] = total;
    lengths[i] = v === null ? -1 : v.byteLength;
    total += v === null ? 0 : v.byteLength;
  });
  const bytes = Buffer.allocUnsafe(total);
  values.forEach((v, i) => {
    if (v !== null) bytes.set(v, offsets[i]);
  });
  return { offsets, lengths, bytes };
}

function noop(): void {}

/** A serializer's error, naming `field`: the saver input that held the value. */
function named(err: unknown, field: string): unknown {
  return err instanceof SerializationError && err.field === undefined ? new SerializationError(err.message, { cause: err.cause, field, path: err.path }) : err;
}

/** A row of the put statements (queries.ts `put`, `putChecked`). */
interface PutRow {
  head_id: string | null;
  ok: boolean;
  parent_known: boolean;
  late: boolean;
  moved: number;
  inserted: number;
  blobs: number;
  missing: [string, string][] | null;
}

/** The (channels, versions) a checkpoint refers to that this put does not write. */
function referencedValues(channelVersions: ChannelVersions | undefined, channels: string[], versions: string[]): [string[], string[]] {
  const refChannels: string[] = [];
  const refVersions: string[] = [];
  for (const [channel, version] of Object.entries(channelVersions ?? {})) {
    const v = String(version);
    const i = channels.indexOf(channel);
    if (i < 0 || versions[i] !== v) {
      refChannels.push(channel);
      refVersions.push(v);
    }
  }
  return [refChannels, refVersions];
}

/** Compare by Unicode code point (the order of `COLLATE "C"` on UTF-8), not UTF-16 units. */
function codePointCompare(a: string, b: string): number {
  if (a === b) return 0;
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done) return y.done ? 0 : -1;
    if (y.done) return 1;
    if (x.value !== y.value) return x.value.codePointAt(0)! - y.value.codePointAt(0)!;
  }
}
