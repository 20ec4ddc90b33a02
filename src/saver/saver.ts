/**
 * The saver's core: LangGraph's `BaseCheckpointSaver` on this package's
 * tables, all that `graph.compile({ checkpointer })` needs. This file is the
 * class and its checkpointer methods: it validates input, has the values
 * serialized before any connection is taken, runs one statement per operation
 * (deleteThread: two, in one transaction) and delivers each thread's results
 * in call order. The work is in the files beside it (see index.ts); SQL lives
 * in sql/. The public `PostgresSaver` (src/ops/postgres-saver.ts) is this core
 * with the operations wing's features: opening a database, adoption, copying
 * threads, background retention.
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
import { runMigrations, type AdoptionStep, type MigrateResult } from "../db/migrate.js";
import { InvalidInputError, InvalidOptionsError, ThreadDeletedError } from "../errors.js";
import { emit, guard } from "../events.js";
import { MsgpackSerializer } from "../serde/serde.js";
import { LIMITS, checkKey, readConfig, threadIdOf, withStringThreadId } from "../validate.js";
import type { SaverContext } from "./context.js";
import { readFilter } from "./filter.js";
import { Threads, type Take, type WriteRows } from "./threads.js";
import { RunLeases } from "./leases.js";
import { encodePut, runPut } from "./put.js";
import { checkSetupOptions, checkedSettings, saverOptions, type LineageMode, type SaverOptions, type SetupOptions } from "./options.js";
import { saverStatements, type DeltaRow, type ListKey, type ListWhere, type ReadRow } from "./sql/index.js";
import { Runner } from "./runner.js";
import { newestFirst, toDeltaHistory, toTuples } from "./read.js";
import { upgradeState } from "./upgrade.js";
import { nextVersion } from "./version.js";
import { ElementMemory, lineageKey } from "./elements.js";
import { deleteThread, waitForRestart } from "./tombstones.js";
import { encodeWrites, sendWrites } from "./writes.js";

/** Page size of `list` when no limit is given: memory stays bounded on long threads. */
const LIST_PAGE = 100;


/**
 * The checkpointer: every thread durable in Postgres. Users construct the
 * public `PostgresSaver`, this class with the operations wing's features.
 *
 * @example
 * ```ts
 * import { PostgresSaver } from "langgraph-checkpoint-pg";
 * const checkpointer = new PostgresSaver(pool, { schema: "agents" }); // a SaverCore, and more
 * ```
 */
export class SaverCore extends BaseCheckpointSaver {
  readonly schema: string;
  readonly lineage: LineageMode;
  /** What the saver's parts (put.ts, writes.ts, read.ts, leases.ts, upgrade.ts) share, and the wing's features use. */
  protected readonly ctx: SaverContext;
  #close: (() => Promise<void>) | undefined;
  /** Runs the statements (and checks once that the schema is migrated). */
  protected readonly runner: Runner;
  /** What `setup({ adopt })` runs: the operations wing's adoption (src/ops/postgres-saver.ts); none in the core. */
  protected readonly adoption: AdoptionStep | undefined = undefined;
  /** The order of this process's work on each thread: when writes go out, when results are delivered (threads.ts). */
  readonly #threads = new Threads((calls) => sendWrites(this.ctx, calls));
  /** Run leases of failed runs (linear mode), retried in the background; end() stops them. */
  readonly #leases: RunLeases;
  /** The pool or PGlite instance given (or opened), for what the wing runs beside the saver (retention). */
  protected readonly pool: pg.Pool | PGliteLike;

  /**
   * @param pool A `pg.Pool`, or a PGlite instance, that the caller owns: {@link end} never closes it.
   * @param given The core's options (the public `PostgresSaver` takes the official saver's shapes too).
   */
  constructor(pool: pg.Pool | PGliteLike, given: SaverOptions = {}) {
    const options = saverOptions<SaverOptions>([given]);
    super(options.serde ?? new MsgpackSerializer());
    const pglite = isPGlite(pool);
    if (!pglite && !(pool instanceof pg.Pool) && (typeof pool !== "object" || pool === null || typeof (pool as pg.Pool).connect !== "function")) {
      throw new InvalidOptionsError("pool", "expected a pg.Pool or a PGlite instance");
    }
    const { schema, lineage, prepared, leaseSeconds, ttlSeconds, maxValueBytes, versioning, elementStorage } = checkedSettings(options);
    this.schema = schema;
    this.lineage = lineage;
    const db = pglite ? pgliteDb(pool) : poolDb(pool as pg.Pool);
    // Guarded once here: a handler that throws or rejects never reaches an operation or the process.
    const onEvent = guard(options.onEvent, "onEvent", options.onHandlerError);
    const runner = new Runner({ db, schema, prepared, onEvent });
    this.runner = runner;
    const queries = saverStatements(schema);
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const saver = this;
    this.ctx = {
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
    this.#leases = new RunLeases(this.ctx);
    this.pool = pool;
    // An idle client dying (e.g. a Postgres restart) makes pg.Pool emit 'error';
    // with no listener that crashes the process. Listen if nobody else does.
    if (!pglite && (pool as pg.Pool).listenerCount("error") === 0) {
      (pool as pg.Pool).on("error", (err) => emit(this.ctx.onEvent, { type: "connectionError", message: err.message }));
    }
  }

  /** Make {@link end} close what this saver was given (a pool or embedded database it opened). */
  protected owns(close: () => Promise<void>): void {
    this.#close = close;
  }

  /**
   * Apply pending migrations to this saver's schema, waiting for a database
   * that is not reachable yet (see {@link SetupOptions.retry}). A schema
   * holding the official saver's tables is refused unless told what to do
   * with them (`adopt`), which runs {@link adoption}: the public
   * `PostgresSaver`'s (src/ops/postgres-saver.ts documents `setup()` whole).
   *
   * @example
   * ```ts
   * await saver.setup({ partitions: 16 }); // a new schema hash partitioned by thread_id
   * ```
   */
  async setup(options: SetupOptions = {}): Promise<MigrateResult> {
    const { adopt, retry, partitions } = checkSetupOptions(options);
    const result = await runMigrations(this.ctx.db, this.schema, { onEvent: this.ctx.onEvent, adopt, retry, partitions, operation: "setup", adoption: this.adoption });
    await this.runner.recheck();
    return result;
  }

  /**
   * Close what this saver was given to own ({@link owns}: `fromConnString`'s pool, `open`'s pool or
   * embedded database and its folder lock); a pool you passed in stays open.
   *
   * @example
   * ```ts
   * await saver.end();
   * ```
   */
  async end(): Promise<void> {
    this.#leases.stop();
    const close = this.#close;
    this.#close = undefined;
    await close?.();
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
      ? await this.ctx.query<ReadRow>("getById", [threadId, ns, checkpointId], "getTuple")
      : await this.ctx.query<ReadRow>("getHead", [threadId, ns], "getTuple");
    const [tuple] = await toTuples(this.ctx, res.rows, true, true);
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
      const page = await this.#listPage(where);
      for (const t of await toTuples(this.ctx, page.rows)) {
        // The SQL filter ran on the JSONB projection: only exact matches count.
        if (metadataFilter && !metadataFilter.matches(t.metadata)) continue;
        yield t;
        if (--remaining === 0) return;
      }
      if (page.keys.length < where.limit) return;
      const last = page.keys[page.keys.length - 1]!;
      where.cursor = [last.checkpoint_id, last.thread_id, last.checkpoint_ns];
    }
  }

  /**
   * One `list` page: its keys, newest first, and its rows. With a thread, one statement; without,
   * the keys, then each thread's checkpoints (sql/read.ts): one that went in between is left out.
   */
  async #listPage(where: ListWhere): Promise<{ keys: ListKey[]; rows: ReadRow[] }> {
    const { text, values } = this.ctx.queries.listPage(where);
    if (where.threadId !== undefined) {
      const { rows } = await this.runner.run<ReadRow>(text, values, "list");
      return { keys: rows.filter((r) => r.kind === "checkpoint").sort(newestFirst), rows };
    }
    const keys = (await this.runner.run<ListKey>(text, values, "list")).rows;
    const byThread = new Map<string, ListKey[]>();
    for (const k of keys) byThread.set(k.thread_id, [...(byThread.get(k.thread_id) ?? []), k]);
    const rows: ReadRow[] = [];
    for (const [thread, ks] of byThread) {
      const res = await this.runner.run<ReadRow>(this.ctx.queries.listOfThread, [thread, ks.map((k) => k.checkpoint_ns), ks.map((k) => k.checkpoint_id)], "list");
      rows.push(...res.rows);
    }
    return { keys, rows };
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
    const since = this.#threads.putsDone(String(config.configurable?.thread_id));
    try {
      const call = { config, checkpoint, metadata, newVersions };
      const put = async () => runPut(this.ctx, await encodePut(this.ctx, call), started, () => encodePut(this.ctx, call, true), take);
      try {
        return await put();
      } catch (err) {
        // A subgraph's first checkpoint may reach the database before the root put that starts the conversation.
        if (!(await waitForRestart(this.#threads, err, config, false, since))) throw err;
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
    const since = this.#threads.putsDone(String(config.configurable?.thread_id));
    try {
      try {
        await this.#putWrites(config, writes, taskId, taskPath, started, queue);
      } catch (err) {
        // With async durability a run's writes may reach the database before the put that starts the conversation.
        if (!(await waitForRestart(this.#threads, err, config, true, since))) throw err;
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
    const rows = await encodeWrites(this.ctx, { config, writes, taskId, taskPath });
    if (rows === undefined) return;
    await queue(rows);
    // Stored: the put of the checkpoint's child need not send these element rows again (elements.ts).
    if (rows.hashes.length > 0) this.ctx.elements?.rememberWrites(lineageKey(rows.threadId, rows.checkpointNs), rows.checkpointId, rows.hashes);
    emit(this.ctx.onEvent, {
      type: "putWrites",
      threadId: rows.threadId,
      checkpointNs: rows.checkpointNs,
      checkpointId: rows.checkpointId,
      taskId,
      writes: rows.idx.length,
      bytes: rows.bytes,
      durationMs: performance.now() - started,
    });
  }

  #reportRefusal(err: unknown, started: number): void {
    if (!(err instanceof ThreadDeletedError)) return;
    const { threadId, checkpointNs, checkpointId, operation, reason } = err;
    emit(this.ctx.onEvent, { type: "deletedThreadWrite", threadId, checkpointNs, checkpointId, operation, reason, durationMs: performance.now() - started });
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
    await this.runner.ensureReady();
    // This process's writes already issued on the thread go first: one still on its way (say, the first
    // put of a conversation) would otherwise land after the deletion and start the thread again.
    await this.#threads.settledThread(threadId);
    try {
      await deleteThread(this.ctx, threadId);
    } catch (err) {
      throw await this.runner.failure(err, "deleteThread");
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
    const ns = checkpointNs ?? "";
    const read = async (kept: { channels: string[]; versions: string[] }) => {
      const res = await this.ctx.query<DeltaRow>("deltaHistory", [threadId, ns, checkpointId ?? null, channels, kept.channels, kept.versions], "getDeltaChannelHistory");
      return toDeltaHistory(this.ctx, res.rows, { threadId: threadId!, checkpointNs: ns, checkpointId, channels, kept });
    };
    // Seeds kept from the last read skip their element rows; one whose row changed since is read again whole.
    const kept = this.ctx.elements?.seedsOf(lineageKey(threadId!, ns), channels) ?? { channels: [], versions: [] };
    return (await read(kept)) ?? (await read({ channels: [], versions: [] }))!;
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
    const versioning = this.ctx.versioning;
    if (!versioning) throw new InvalidOptionsError("stateVersion", "upgradeState needs the saver's stateVersion (and upcasters)");
    const batchSize = options.batchSize ?? 100;
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new InvalidOptionsError("batchSize", "expected a positive integer");
    if (options.onProgress !== undefined && typeof options.onProgress !== "function") throw new InvalidOptionsError("onProgress", "expected a function");
    const onProgress = guard(options.onProgress, "onProgress", this.ctx.onHandlerError);
    return upgradeState(this.ctx, { versioning, batchSize, onProgress });
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
