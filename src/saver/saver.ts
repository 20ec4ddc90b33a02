/**
 * PostgresSaver: LangGraph's `BaseCheckpointSaver` on three Postgres tables
 * (and the lineage heads). This file is the class and its public methods:
 * it validates input, has the values serialized before any connection is
 * taken, runs one statement per operation (deleteThread: two, in one
 * transaction) and delivers each thread's results in call order. The work is
 * in the files beside it (see index.ts); SQL lives in sql/.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type DeltaChannelHistory,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { isPGlite, pgliteDb, poolDb, type PGliteLike } from "../db/db.js";
import { runMigrations, type MigrateResult } from "../db/migrate.js";
import { openOn } from "../db/open.js";
import { InvalidInputError, InvalidOptionsError, ThreadDeletedError } from "../errors.js";
import { emit, guard } from "../events.js";
import { compactAdopted } from "../ops/compact.js";
import { MsgpackSerializer } from "../serde/serde.js";
import { LIMITS, checkKey, readConfig, threadIdOf, withStringThreadId } from "../validate.js";
import type { SaverContext } from "./context.js";
import { readFilter } from "./filter.js";
import { Threads, type Take, type WriteRows } from "./threads.js";
import { RunLeases } from "./leases.js";
import { encodePut, runPut } from "./put.js";
import {
  BOUNDED_POOL,
  CONN_STRING_OPTIONS,
  checkOptionKeys,
  checkedSettings,
  openOptions,
  saverOptions,
  type LineageMode,
  type OpenOptions,
  type PostgresSaverOptions,
  type SetupOptions,
} from "./options.js";
import { saverStatements, type DeltaRow, type ListWhere, type ReadRow } from "./sql/index.js";
import { Runner } from "./runner.js";
import { toDeltaHistory, toTuples } from "./read.js";
import { upgradeState } from "./upgrade.js";
import { nextVersion } from "./version.js";
import { ElementMemory, lineageKey } from "./elements.js";
import { checkCopyArguments, copyStatements, copyThread, type CopyThreadOptions, type CopyThreadResult } from "./copy.js";
import { checkRetention, Retention, type RetentionOptions } from "./retention.js";
import { deleteThread, waitForRestart } from "./tombstones.js";
import { encodeWrites, sendWrites } from "./writes.js";

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
  /** What the saver's parts (put.ts, writes.ts, read.ts, leases.ts, upgrade.ts) share. */
  readonly #ctx: SaverContext;
  #close: (() => Promise<void>) | undefined;
  /** Runs the statements (and checks once that the schema is migrated). */
  readonly #runner: Runner;
  /** The order of this process's work on each thread: when writes go out, when results are delivered (threads.ts). */
  readonly #threads = new Threads((calls) => sendWrites(this.#ctx, calls));
  /** Run leases of failed runs (linear mode), retried in the background; end() stops them. */
  readonly #leases: RunLeases;
  /** copyThread's statements, built at its first call. */
  #copySql: ReturnType<typeof copyStatements> | undefined;
  /** The pool or PGlite instance given (or opened), for background retention. */
  readonly #pool: pg.Pool | PGliteLike;
  /** Background retention (option `retention`, or startRetention()). */
  #retention: Retention | undefined;

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
    const { schema, lineage, prepared, leaseSeconds, ttlSeconds, maxValueBytes, versioning, elementStorage, retention } = checkedSettings(options);
    this.schema = schema;
    this.lineage = lineage;
    const db = pglite ? pgliteDb(pool) : poolDb(pool as pg.Pool);
    // Guarded once here: a handler that throws or rejects never reaches an operation or the process.
    const onEvent = guard(options.onEvent, "onEvent", options.onHandlerError);
    const runner = new Runner({ db, schema, prepared, onEvent });
    this.#runner = runner;
    const queries = saverStatements(schema);
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const saver = this;
    this.#ctx = {
      schema: this.schema,
      lineage,
      get serde() {
        return saver.serde;
      },
      db,
      queries,
      onEvent,
      onHandlerError: options.onHandlerError,
      leaseSeconds,
      ttlSeconds,
      maxValueBytes,
      versioning,
      elements: elementStorage ? new ElementMemory() : undefined,
      ensureReady: () => runner.ensureReady(),
      query: (op, values, what) => runner.run(queries[op], values, what),
      run: (text, values, what) => runner.run(text, values, what),
      nextVersion: (current) => this.getNextVersion(current),
    };
    this.#leases = new RunLeases(this.#ctx);
    this.#pool = pool;
    if (retention) {
      this.#retention = new Retention({ settings: retention, schema, pool, onEvent });
      if (retention.start) this.#retention.start();
    }
    // An idle client dying (e.g. a Postgres restart) makes pg.Pool emit 'error';
    // with no listener that crashes the process. Listen if nobody else does.
    if (!pglite && (pool as pg.Pool).listenerCount("error") === 0) {
      (pool as pg.Pool).on("error", (err) => emit(this.#ctx.onEvent, { type: "connectionError", message: err.message }));
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
    const { pool: poolConfig, ...saverOptions } = checkOptionKeys(options ?? {}, CONN_STRING_OPTIONS, "fromConnString()") as PostgresSaverOptions & { pool?: pg.PoolConfig };
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
   * A saver on a Postgres server, or on the embedded database (PGlite in a
   * local folder, locked to this process), migrated unless `migrate: false`.
   * The saver owns what it opened: {@link end} closes it.
   *
   * Which database: `databaseUrl`; else the embedded one when asked for
   * (`embedded: true`, or a `dataDir`); else the `DATABASE_URL` environment
   * variable; else the embedded database in `./.langgraph-pg`, a fallback
   * refused with `NODE_ENV=production` ({@link DatabaseUrlMissingError}) and
   * announced with one line on stderr elsewhere (see `log`). Every option is
   * checked before anything is opened or created. A server that is not
   * reachable yet is waited for (`retry`); after two seconds each failed
   * attempt is said on stderr too.
   *
   * @example
   * ```ts
   * const checkpointer = await PostgresSaver.open(); // DATABASE_URL, or ./.langgraph-pg (not in production)
   * const graph = builder.compile({ checkpointer });
   * // ...
   * await checkpointer.end();
   * ```
   */
  static open(options: OpenOptions = {}): Promise<PostgresSaver> {
    const o = openOptions(options);
    return openOn(o.location, o.saver.onEvent, {
      name: "PostgresSaver",
      onServer: (url, pool, onEvent) => PostgresSaver.fromConnString(url, { ...o.saver, onEvent, pool }),
      onEmbedded: (db, onEvent, close) => PostgresSaver.#owning(db, { ...o.saver, onEvent }, close),
      setup: (saver) => saver.setup(o.setup),
      end: (saver) => saver.end(),
    });
  }

  /**
   * Apply pending migrations to this saver's schema (the same as {@link migrate}).
   * Waits for a database that is not reachable yet (see {@link SetupOptions.retry}).
   * On a schema holding the official LangGraph saver's tables it changes
   * nothing and throws `AdoptionRequiredError` unless told what to do with
   * them ({@link SetupOptions.adopt}; in other schemas they are said once and
   * left alone); an adoption's copy is then stored by
   * content with this saver's serializer (`adoption.compacted` in the result).
   *
   * @example
   * ```ts
   * await saver.setup();
   * await new PostgresSaver(pool, { schema: "langgraph" }).setup({ adopt: { from: "public" } }); // switching
   * await new PostgresSaver(pool, { schema: "sharded" }).setup({ partitions: 16 }); // hash partitioned by thread_id
   * ```
   */
  async setup(options: SetupOptions = {}): Promise<MigrateResult> {
    if (options === null || typeof options !== "object") throw new InvalidOptionsError("setup options", "expected { adopt?, retry?, partitions? }");
    for (const key of Object.keys(options)) {
      if (key !== "adopt" && key !== "retry" && key !== "partitions") throw new InvalidOptionsError(key, "is not a setup() option (adopt, retry, partitions)");
    }
    const { adopt, retry, partitions } = options;
    const result = await runMigrations(this.#ctx.db, this.schema, { onEvent: this.#ctx.onEvent, adopt, retry, partitions, operation: "setup" });
    // Retention started with the saver may have found no tables yet: its first run comes now.
    this.#retention?.schemaReady();
    await this.#runner.recheck();
    // The adoption copied the official saver's values whole: store them as this saver stores values (issue 27).
    if (result.adoption?.adopted && this.#ctx.elements) {
      const compacted = await compactAdopted(this.#ctx.db, this.schema, this.#ctx.serde);
      if (compacted) result.adoption.compacted = compacted;
    }
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
    this.#leases.stop();
    await this.#retention?.stop();
    const close = this.#close;
    this.#close = undefined;
    await close?.();
  }

  /**
   * Start background retention (src/saver/retention.ts): with the saver's
   * `retention` option, or with the options given here, which replace it. Idempotent.
   *
   * @example
   * ```ts
   * const saver = new PostgresSaver(pool);
   * await saver.setup();
   * await saver.startRetention({ every: "10m", keepLast: 50, idleFor: "90d" });
   * // ...
   * await saver.end(); // stops it (or: await saver.stopRetention())
   * ```
   */
  async startRetention(options?: RetentionOptions): Promise<void> {
    if (options !== undefined) {
      const settings = checkRetention(options, this.schema)!;
      await this.#retention?.stop();
      this.#retention = new Retention({ settings, schema: this.schema, pool: this.#pool, onEvent: this.#ctx.onEvent });
    }
    if (!this.#retention) throw new InvalidOptionsError("retention", 'the saver has no retention option: pass it, or startRetention({ every: "10m", ... })');
    this.#retention.start();
  }

  /** Stop background retention; a run in progress stops after its current batch, and is waited for.
   *
   * @example
   * ```ts
   * await saver.stopRetention();
   * ```
   */
  async stopRetention(): Promise<void> {
    await this.#retention?.stop();
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
    return this.#getTuple(withStringThreadId(config));
  }

  async #getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const { threadId, checkpointNs, checkpointId } = readConfig(config, "getTuple", false);
    // LangGraph's contract (and its conformance suite): no thread, no tuple.
    if (threadId === undefined) return undefined;
    // After a failed invocation, writes of that run may still be on their way: a retry must start
    // from the head they make (threads.ts).
    return this.#threads.read(config, () => this.#readTuple(threadId, checkpointNs ?? "", checkpointId));
  }

  async #readTuple(threadId: string, ns: string, checkpointId: string | undefined): Promise<CheckpointTuple | undefined> {
    const res = checkpointId
      ? await this.#ctx.query<ReadRow>("getById", [threadId, ns, checkpointId], "getTuple")
      : await this.#ctx.query<ReadRow>("getHead", [threadId, ns], "getTuple");
    const [tuple] = await toTuples(this.#ctx, res.rows, true, true);
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
    const { threadId, checkpointNs, checkpointId } = readConfig(withStringThreadId(config) ?? {}, "list", false);
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
      const { text, values } = this.#ctx.queries.listPage(where);
      const res = await this.#runner.run<ReadRow>(text, values, "list");
      const tuples = await toTuples(this.#ctx, res.rows);
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
    config = withStringThreadId(config);
    return this.#threads.put(config, (take) => this.#putOrRelease(config, checkpoint, metadata, newVersions, take));
  }

  async #putOrRelease(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
    take: Take,
  ): Promise<RunnableConfig> {
    const started = performance.now();
    try {
      const call = { config, checkpoint, metadata, newVersions };
      const put = async () => runPut(this.#ctx, await encodePut(this.#ctx, call), started, () => encodePut(this.#ctx, call, true), take);
      try {
        return await put();
      } catch (err) {
        // A subgraph's first checkpoint may reach the database before the root put that starts the conversation.
        if (!(await waitForRestart(this.#threads, err, config, false))) throw err;
        return await put();
      }
    } catch (err) {
      this.#reportRefusal(err, started);
      // A put that starts a run does not own its parent's lease (another run may): only its own checkpoint's.
      const source = (metadata as { source?: unknown } | undefined)?.source;
      const startsRun = source === "input" || source === "update";
      await this.#leases.afterRunFailure(err, config, startsRun ? [checkpoint?.id] : [config?.configurable?.checkpoint_id, checkpoint?.id]);
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
    config = withStringThreadId(config);
    return this.#threads.write(config, (queue) => this.#putWritesOrRelease(config, writes, taskId, taskPath, queue));
  }

  async #putWritesOrRelease(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath: string, queue: (rows: WriteRows) => Promise<void>): Promise<void> {
    const started = performance.now();
    try {
      try {
        await this.#putWrites(config, writes, taskId, taskPath, started, queue);
      } catch (err) {
        // With async durability a run's writes may reach the database before the put that starts the conversation.
        if (!(await waitForRestart(this.#threads, err, config, true))) throw err;
        await this.#putWrites(config, writes, taskId, taskPath, started, queue);
      }
    } catch (err) {
      this.#reportRefusal(err, started);
      await this.#leases.afterRunFailure(err, config, [config?.configurable?.checkpoint_id]);
      throw err;
    }
  }

  async #putWrites(
    config: RunnableConfig,
    writes: PendingWrite[],
    taskId: string,
    taskPath: string,
    started: number,
    queue: (rows: WriteRows) => Promise<void>,
  ): Promise<void> {
    const rows = await encodeWrites(this.#ctx, { config, writes, taskId, taskPath });
    if (rows === undefined) return;
    await queue(rows);
    // Stored: the put of the checkpoint's child need not send these element rows again (elements.ts).
    if (rows.hashes.length > 0) this.#ctx.elements?.rememberWrites(lineageKey(rows.threadId, rows.checkpointNs), rows.checkpointId, rows.hashes);
    emit(this.#ctx.onEvent, {
      type: "putWrites",
      threadId: rows.threadId,
      checkpointNs: rows.checkpointNs,
      checkpointId: rows.checkpointId,
      taskId,
      writes: rows.idx.length,
      durationMs: performance.now() - started,
    });
  }

  #reportRefusal(err: unknown, started: number): void {
    if (!(err instanceof ThreadDeletedError)) return;
    const { threadId, checkpointNs, checkpointId, operation, reason } = err;
    emit(this.#ctx.onEvent, { type: "deletedThreadWrite", threadId, checkpointNs, checkpointId, operation, reason, durationMs: performance.now() - started });
  }

  /**
   * Delete every checkpoint, write and blob of a thread (all namespaces), and
   * leave its tombstone: a run still in flight on it cannot write it back
   * afterwards (its puts and writes fail with {@link ThreadDeletedError}),
   * while a new conversation on the same id starts cleanly (docs/threads.md, "Deleted
   * threads stay deleted"). Waits for the thread's writes in flight to commit: those this
   * process issued before the call, and those other processes have started.
   *
   * @example
   * ```ts
   * await saver.deleteThread("chat-42");
   * ```
   */
  async deleteThread(id: string | number): Promise<void> {
    const threadId = threadIdOf("deleteThread threadId", id);
    await this.#runner.ensureReady();
    // This process's writes already issued on the thread go first: one still on its way (say, the first
    // put of a conversation) would otherwise land after the deletion and start the thread again.
    await this.#threads.settledThread(threadId);
    try {
      await deleteThread(this.#ctx, threadId);
    } catch (err) {
      throw await this.#runner.failure(err, "deleteThread");
    }
  }

  /**
   * Copy a thread's history (with `upTo`, the part up to that root checkpoint,
   * which becomes the copy's head) to another thread id, in one transaction:
   * the copy reads exactly as the source at every checkpoint, so time travel
   * and forks work on it. An existing target is refused ({@link ThreadCopyError})
   * unless `overwrite: true`; `dryRun: true` only counts. See src/saver/copy.ts.
   *
   * @example
   * ```ts
   * // Let a user branch a chat at an earlier answer:
   * await saver.copyThread("chat-42", "chat-42-branch", { upTo: checkpointId });
   * await graph.invoke({ messages: [question] }, { configurable: { thread_id: "chat-42-branch" } });
   * ```
   */
  async copyThread(fromThreadId: string, toThreadId: string, options: CopyThreadOptions = {}): Promise<CopyThreadResult> {
    const { from, to } = checkCopyArguments(fromThreadId, toThreadId, options);
    await this.#runner.ensureReady();
    const started = performance.now();
    this.#copySql ??= copyStatements(this.schema);
    try {
      return await copyThread(this.#ctx, this.#copySql, from, to, options, started);
    } catch (err) {
      throw await this.#runner.failure(err, "copyThread");
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
    if (options?.config) options = { ...options, config: withStringThreadId(options.config) };
    return this.#threads.deliver(options?.config, this.#getDeltaChannelHistory(options));
  }

  async #getDeltaChannelHistory(options: { config: RunnableConfig; channels: string[] }): Promise<Record<string, DeltaChannelHistory>> {
    const { config, channels } = options ?? ({} as typeof options);
    if (!Array.isArray(channels)) throw new InvalidInputError("getDeltaChannelHistory channels", "expected an array of channel names");
    if (channels.length === 0) return {};
    channels.forEach((c, i) => checkKey(`getDeltaChannelHistory channels[${i}]`, c, LIMITS.channel));
    const { threadId, checkpointNs, checkpointId } = readConfig(config, "getDeltaChannelHistory");
    const res = await this.#ctx.query<DeltaRow>("deltaHistory", [threadId, checkpointNs ?? "", checkpointId ?? null, channels], "getDeltaChannelHistory");
    return toDeltaHistory(this.#ctx, res.rows, { threadId: threadId!, checkpointNs: checkpointNs ?? "", channels });
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
    const versioning = this.#ctx.versioning;
    if (!versioning) throw new InvalidOptionsError("stateVersion", "upgradeState needs the saver's stateVersion (and upcasters)");
    const batchSize = options.batchSize ?? 100;
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new InvalidOptionsError("batchSize", "expected a positive integer");
    if (options.onProgress !== undefined && typeof options.onProgress !== "function") throw new InvalidOptionsError("onProgress", "expected a function");
    const onProgress = guard(options.onProgress, "onProgress", this.#ctx.onHandlerError);
    return upgradeState(this.#ctx, { versioning, batchSize, onProgress });
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
}
