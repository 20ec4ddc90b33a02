/**
 * PostgresStore: LangGraph's `BaseStore` (long-term memory shared across
 * threads) on one table of this package's schema, a drop-in for the official
 * `PostgresStore` of `@langchain/langgraph-checkpoint-postgres/store`. This
 * file is the class: it checks input before any SQL, embeds what is to be
 * embedded before a connection is taken, and runs one statement per
 * operation (for a batch, one per kind of operation: reads see the store as
 * it was before the batch, and of several puts of one item the last wins, as
 * in LangGraph's InMemoryStore; batch.ts). Its statements are in sql/.
 */
import { createHash } from "node:crypto";
import { BaseStore, type Item, type ListNamespacesOperation, type MatchCondition, type Operation, type OperationResults, type SearchItem } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { isPGlite, pgliteDb, poolDb, type Db, type PGliteLike } from "../db/db.js";
import { openOn } from "../db/open.js";
import { assertSchemaCurrent, schemaLevel, latestVersion } from "../db/migrate.js";
import { CheckpointerError, DatabaseOperationError, InvalidInputError, InvalidOptionsError, SchemaNotMigratedError, sqlStateOf, StoreIndexMismatchError } from "../errors.js";
import { emit, guard, type EventHandler } from "../events.js";
import { checkItemKey, checkNamespace, checkTtl, encodeValue, nsKey } from "./input.js";
import { currentShape, runStoreMigrations, type MigrateStoreResult } from "./migrate.js";
import { STORE_TRACK } from "./migrations.js";
import {
  checkStoreOptions,
  type CheckedStoreOptions,
  type PostgresStoreConfig,
  type PostgresStoreOptions,
  type StoreOpenOptions,
  type StoreSearchOptions,
  type StoreSetupOptions,
  storeOpenOptions,
} from "./options.js";
import { BOUNDED_POOL } from "../db/db.js";
import { prepareWrite, runBatch, searchRead, searchRows, toItem, toSearchItem, type StoreContext } from "./batch.js";
import { SWEEP_LOCK_TIMEOUT, reindexPage, reindexWrite, storeStatements, sweepLock, sweepLockWaiting, vectorExtension, vectorPlaceOf, type ItemRow, type StoreStatements, type VectorPlace } from "./sql/index.js";
import { SWEEP_BATCH, Sweeper } from "./ttl.js";
import { embedDocuments, vectorText } from "./vector.js";

/** What {@link PostgresStore.getStats} reports. */
export interface StoreStats {
  totalItems: number;
  expiredItems: number;
  namespaceCount: number;
  oldestItem: Date | null;
  newestItem: Date | null;
}

const POOL_DEFAULTS: pg.PoolConfig = { application_name: "langgraph-checkpoint-pg:store" };

/**
 * LangGraph long-term memory in Postgres.
 *
 * @example
 * ```ts
 * import { PostgresStore } from "langgraph-checkpoint-pg/store";
 * const store = PostgresStore.fromConnString(process.env.DATABASE_URL!);
 * await store.setup();
 * await store.put(["users", "u1", "memories"], "m1", { text: "likes pasta" });
 * const hits = await store.search(["users", "u1"], { query: "food", mode: "text" });
 * await store.stop();
 * ```
 */
export class PostgresStore extends BaseStore {
  readonly schema: string;
  readonly #db: Db;
  readonly #opts: CheckedStoreOptions;
  readonly #q: StoreStatements;
  readonly #onEvent: EventHandler | undefined;
  readonly #sweeper = new Sweeper();
  readonly #names = new Map<string, string>();
  #close: (() => Promise<void>) | undefined;
  #ready: Promise<void> | undefined;
  /** The store's schema and the one pgvector's type and operators live in (read once). */
  #vectorPlace: VectorPlace | undefined;
  /** pgvector 0.8 or later: iterative index scans (read with the schema). */
  #iterativeScan = false;
  #stopped = false;
  /** What batch.ts works with. */
  readonly #ctx: StoreContext;

  /**
   * @param target The official store's config (`{ connectionOptions, schema, ensureTables, ttl, index, textSearchLanguage }`:
   *   the store opens a pool and `stop()` ends it), or a `pg.Pool` / PGlite instance you own (never ended by the store).
   *
   * @example
   * ```ts
   * const store = new PostgresStore(pool, { schema: "memory" }); // your pool
   * const official = new PostgresStore({ connectionOptions: url, ttl: { defaultTtl: 60 } }); // the official shape
   * ```
   */
  constructor(config: PostgresStoreConfig);
  constructor(pool: pg.Pool | PGliteLike, options?: PostgresStoreOptions);
  constructor(target: PostgresStoreConfig | pg.Pool | PGliteLike, options: PostgresStoreOptions = {}) {
    super();
    let db: Db;
    let opts: CheckedStoreOptions;
    let onEvent: EventHandler | undefined;
    if (isPGlite(target) || target instanceof pg.Pool || (typeof target === "object" && target !== null && typeof (target as { connect?: unknown }).connect === "function")) {
      opts = checkStoreOptions(options ?? {}, false);
      onEvent = guard(options?.onEvent, "onEvent", options?.onHandlerError);
      if (isPGlite(target)) db = pgliteDb(target);
      else {
        const pool = target as pg.Pool;
        db = poolDb(pool);
        // An idle client dying makes pg.Pool emit 'error'; with no listener that crashes the process.
        if (pool.listenerCount("error") === 0) pool.on("error", (err) => emit(onEvent, { type: "connectionError", message: err.message }));
      }
    } else {
      if (target === null || typeof target !== "object" || !("connectionOptions" in target)) {
        throw new InvalidOptionsError("connectionOptions", "expected { connectionOptions, ... }, a pg.Pool or a PGlite instance");
      }
      const { connectionOptions, ...rest } = target;
      opts = checkStoreOptions(rest, true);
      onEvent = guard(rest.onEvent, "onEvent", rest.onHandlerError);
      if (typeof connectionOptions !== "string" && (connectionOptions === null || typeof connectionOptions !== "object")) {
        throw new InvalidOptionsError("connectionOptions", "expected a postgres:// URL or a pg.PoolConfig");
      }
      const pool = new pg.Pool(typeof connectionOptions === "string" ? { ...POOL_DEFAULTS, connectionString: connectionOptions } : { ...POOL_DEFAULTS, ...connectionOptions });
      pool.on("error", (err) => emit(onEvent, { type: "connectionError", message: err.message }));
      db = poolDb(pool);
      this.#close = () => pool.end();
    }
    this.#db = db;
    this.#opts = opts;
    this.#onEvent = onEvent;
    this.schema = opts.schema;
    this.#q = storeStatements(opts.schema);
    this.#ctx = {
      opts,
      q: this.#q,
      run: <R extends object>(text: string, values: unknown[], what: string, options?: { plan?: "each" }) => this.#run<R>(text, values, what, options),
      ensureReady: () => this.#ensureReady(),
      vectorPlace: () => this.#vectorPlace!,
      iterativeScan: () => this.#iterativeScan,
    };
  }

  /**
   * A store on a new pool that it owns (`stop()` ends it), as the official store's.
   *
   * @example
   * ```ts
   * const store = PostgresStore.fromConnString(process.env.DATABASE_URL!, { schema: "memory" });
   * ```
   */
  static fromConnString(connectionString: string, options: PostgresStoreOptions = {}): PostgresStore {
    if (typeof connectionString !== "string" || connectionString === "") throw new InvalidOptionsError("connectionString", "expected a postgres:// URL");
    return new PostgresStore({ ...options, connectionOptions: connectionString });
  }

  /**
   * A store on a Postgres server, or on the embedded database, chosen as
   * `PostgresSaver.open()` chooses (the same options, checked before anything
   * is opened; the same refusal of an implicit embedded database with
   * `NODE_ENV=production`; the same lines on stderr): `databaseUrl`; else the
   * embedded one when asked for (`embedded: true`, or a `dataDir`); else
   * `DATABASE_URL`; else `./.langgraph-pg`. The embedded database is the one
   * a `PostgresSaver.open()` of this process uses (one PGlite instance, with
   * pgvector when `@electric-sql/pglite-pgvector` is installed). Set up unless
   * `migrate: false`; `stop()` closes what it opened.
   *
   * @example
   * ```ts
   * const checkpointer = await PostgresSaver.open();
   * const store = await PostgresStore.open(); // the same embedded database
   * const graph = builder.compile({ checkpointer, store });
   * ```
   */
  static open(options: StoreOpenOptions = {}): Promise<PostgresStore> {
    const o = storeOpenOptions(options);
    return openOn(o.location, o.store.onEvent, {
      name: "PostgresStore",
      onServer: (url, pool, onEvent) =>
        new PostgresStore({ ensureTables: false, ...o.store, onEvent, connectionOptions: { ...BOUNDED_POOL, ...POOL_DEFAULTS, ...pool, connectionString: url } }),
      onEmbedded: (db, onEvent, close) => {
        const store = new PostgresStore(db, { ...o.store, onEvent });
        store.#close = close;
        return store;
      },
      setup: (store) => store.setup(o.setup),
      end: (store) => store.stop(),
    });
  }

  /**
   * Create or upgrade the store's tables (and the vector table, with
   * `index`), under the migration lock; starts the TTL sweeper when
   * configured. Never touches the checkpointer's tables.
   *
   * @example
   * ```ts
   * await store.setup();
   * await store.setup({ adopt: { from: "public" } }); // copy the official store's items
   * ```
   */
  async setup(options: StoreSetupOptions = {}): Promise<MigrateStoreResult> {
    if (options === null || typeof options !== "object") throw new InvalidOptionsError("setup options", "expected { adopt?, retry?, partitions? }");
    for (const key of Object.keys(options)) {
      if (key !== "adopt" && key !== "retry" && key !== "partitions") throw new InvalidOptionsError(key, "is not a setup() option (adopt, retry, partitions)");
    }
    const { adopt, retry, partitions } = options;
    const result = await runStoreMigrations(this.#db, this.schema, { index: this.#opts.index, adopt, retry, partitions, onEvent: this.#onEvent });
    this.#ready = this.#check();
    await this.#ready;
    this.#startSweeper();
    return result;
  }

  /** LangGraph calls this before use: `setup()` when `ensureTables`, and the sweeper. */
  override async start(): Promise<void> {
    await this.#ensureReady();
    this.#startSweeper();
  }

  /** Stop the sweeper and end what the store opened (a pool you passed in stays open). */
  override async stop(): Promise<void> {
    await this.#sweeper.stop();
    if (this.#stopped) return;
    this.#stopped = true;
    const close = this.#close;
    this.#close = undefined;
    await close?.();
  }

  #startSweeper(): void {
    const minutes = this.#opts.sweepMinutes;
    if (minutes === undefined || this.#sweeper.started || this.#stopped) return;
    this.#sweeper.start(minutes, () => this.#sweep(false), (err) => emit(this.#onEvent, { type: "connectionError", message: `TTL sweep failed: ${err instanceof Error ? err.message : String(err)}` }));
  }

  /** Once per store: set up (ensureTables) or check that the schema is migrated; find pgvector; the vector table's shape is the configured one. */
  #ensureReady(): Promise<void> {
    if (!this.#ready) {
      this.#ready = this.#opts.ensureTables ? this.setup().then(() => undefined) : this.#check();
      this.#ready.catch(() => (this.#ready = undefined));
    }
    return this.#ready;
  }

  async #check(): Promise<void> {
    await assertSchemaCurrent(this.#db, this.schema, "store", this.#onEvent, STORE_TRACK);
    if (this.#opts.index && this.#vectorPlace === undefined) {
      const { rows } = await this.#db.query<{ schema: string; iterative: boolean }>(vectorExtension);
      if (!rows[0]) throw new SchemaNotMigratedError(this.schema, 0, latestVersion(STORE_TRACK), { track: "store" });
      // A store that is not set up (the migration ran elsewhere, e.g. `migrate --store-only --dims` in CI) is refused as setup()
      // refuses it when the vector table has another shape: never a pgvector error at each put, nor a search by another metric.
      const { dims, distanceMetric, indexType } = this.#opts.index;
      const current = await currentShape(this.#db, this.schema);
      if (current && (current.dims !== dims || current.distanceMetric !== distanceMetric || current.indexType !== indexType)) {
        throw new StoreIndexMismatchError(this.schema, current, { dims, distanceMetric, indexType });
      }
      this.#vectorPlace = vectorPlaceOf(this.schema, rows[0].schema);
      this.#iterativeScan = rows[0].iterative;
    }
  }

  /**
   * One statement, prepared under a name (parsed and planned once per connection), or with `plan:
   * "each"` planned for its values each time: a prepared statement switches to one generic plan after
   * five runs, which for a range of keys guesses a handful of rows.
   */
  async #run<R extends object>(text: string, values: unknown[], what: string, options: { plan?: "each" } = {}): Promise<{ rows: R[]; rowCount?: number }> {
    await this.#ensureReady();
    let name: string | undefined;
    if (options.plan !== "each") {
      name = this.#names.get(text);
      if (name === undefined) {
        name = `lgst_${createHash("sha1").update(text).digest("hex").slice(0, 16)}`;
        this.#names.set(text, name);
      }
    }
    try {
      return (await this.#db.run(text, values, name)) as { rows: R[]; rowCount?: number };
    } catch (err) {
      throw await this.#failure(err, what);
    }
  }

  async #failure(err: unknown, what: string): Promise<CheckpointerError> {
    if (err instanceof CheckpointerError) return err;
    const state = sqlStateOf(err);
    if (state === "42P01" || state === "3F000") {
      this.#ready = undefined;
      const level = await schemaLevel(this.#db, this.schema, STORE_TRACK).catch(() => undefined);
      return new SchemaNotMigratedError(this.schema, level?.version ?? 0, latestVersion(STORE_TRACK), { cause: err, track: "store" });
    }
    return new DatabaseOperationError(what, err);
  }

  /**
   * Run operations: gets, searches and namespace listings read the store as
   * it was before the batch (one statement per kind); then all puts and
   * deletes in one statement, the last one of each item winning.
   *
   * @example
   * ```ts
   * const [item, , hits] = await store.batch([{ namespace: ["a"], key: "k" }, { namespace: ["a"], key: "j", value: { x: 1 } }, { namespacePrefix: ["a"], limit: 10, offset: 0 }]);
   * ```
   */
  batch<Op extends readonly Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    return runBatch(this.#ctx, operations);
  }

  /**
   * One item, or null (also when it expired). With `ttl.refreshOnRead` its expiry moves, in the same statement
   * (null if the sweeper deleted it meanwhile: an item returned stays stored until its new expiry).
   *
   * @example
   * ```ts
   * const item = await store.get(["users", "u1"], "prefs");
   * ```
   */
  override async get(namespace: string[], key: string): Promise<Item | null> {
    const ns = checkNamespace("get namespace", namespace, { allowReservedRoot: true });
    const k = checkItemKey("get key", key);
    const res = await this.#run<ItemRow>(this.#opts.refreshOnRead ? this.#q.getRefreshing : this.#q.get, [nsKey(ns), k], "get");
    return res.rows[0] ? toItem(res.rows[0]) : null;
  }

  /**
   * Store an item (replacing its value), one statement. `index`: `false` stores no
   * embedding, a list of paths embeds those fields instead of the store's. `options.ttl`: minutes.
   *
   * @example
   * ```ts
   * await store.put(["docs"], "d1", { title: "Guide", body: "..." }, ["title"], { ttl: 60 });
   * ```
   */
  override async put(namespace: string[], key: string, value: Record<string, unknown>, index?: false | string[], options?: { ttl?: number }): Promise<void> {
    const ns = checkNamespace("put namespace", namespace);
    const k = checkItemKey("put key", key);
    if (value === null) return this.delete(ns, k);
    if (this.#opts.index) {
      const write = await prepareWrite(this.#ctx, [{ op: { namespace: ns, key: k, value, index, options }, field: "put" }]);
      await this.#run(write.text, write.values, "put");
      return;
    }
    const json = encodeValue("put value", value);
    if (index !== undefined && index !== false && !Array.isArray(index)) throw new InvalidInputError("put index", "expected false or an array of field paths");
    const ttl = checkTtl("put options.ttl", options?.ttl) ?? this.#opts.defaultTtl ?? null;
    await this.#run(this.#q.put, [nsKey(ns), k, json, ttl], "put");
  }

  /**
   * Delete an item (its embeddings go with it), one statement.
   *
   * @example
   * ```ts
   * await store.delete(["docs"], "d1");
   * ```
   */
  override async delete(namespace: string[], key: string): Promise<void> {
    const ns = checkNamespace("delete namespace", namespace, { allowReservedRoot: true });
    const k = checkItemKey("delete key", key);
    await this.#run(this.#q.delete, [nsKey(ns), k], "delete");
  }

  /**
   * Items under a namespace prefix (`[]`: all), filtered, newest update first; with `query`,
   * ranked by text (`mode: "text"`), vectors (`"vector"`) or both (`"hybrid"`; `"auto"`:
   * vectors when the store has an index). One statement.
   *
   * @example
   * ```ts
   * await store.search(["docs"], { filter: { status: "active", score: { $gte: 4 } }, limit: 20 });
   * ```
   */
  override async search(namespacePrefix: string[], options: StoreSearchOptions = {}): Promise<SearchItem[]> {
    if (options === null || typeof options !== "object") throw new InvalidInputError("search options", "expected an object");
    const read = searchRead(this.#ctx, 0, { namespacePrefix, filter: options.filter, query: options.query, limit: options.limit ?? 10, offset: options.offset ?? 0 }, options, "search");
    const rows = await searchRows(this.#ctx, [read]);
    return rows.map((row) => toSearchItem(row, read.scored));
  }

  /**
   * Namespaces, optionally matching a prefix and/or suffix (`"*"` matches any label), truncated
   * to `maxDepth` labels, distinct, sorted, then paged. One statement.
   *
   * @example
   * ```ts
   * await store.listNamespaces({ prefix: ["users"], maxDepth: 2, limit: 50 });
   * ```
   */
  override async listNamespaces(options: { prefix?: string[]; suffix?: string[]; maxDepth?: number; limit?: number; offset?: number } = {}): Promise<string[][]> {
    if (options === null || typeof options !== "object") throw new InvalidInputError("listNamespaces options", "expected an object");
    const matchConditions: MatchCondition[] = [];
    if (options.prefix !== undefined) matchConditions.push({ matchType: "prefix", path: options.prefix });
    if (options.suffix !== undefined) matchConditions.push({ matchType: "suffix", path: options.suffix });
    const [result] = await this.batch([{ matchConditions, maxDepth: options.maxDepth, limit: options.limit ?? 100, offset: options.offset ?? 0 }] as [ListNamespacesOperation]);
    return result;
  }

  /**
   * Delete expired items now (in batches); returns how many. Waits for a sweep another process is running.
   *
   * @example
   * ```ts
   * const deleted = await store.sweepExpiredItems();
   * ```
   */
  async sweepExpiredItems(): Promise<number> {
    return this.#sweep(true);
  }

  async #sweep(wait: boolean): Promise<number> {
    await this.#ensureReady();
    let total = 0;
    for (;;) {
      const n = await this.#sweepBatch(wait);
      // The sweeper skips a round another sweep holds, or one a held row made give way; a sweep by hand tries again.
      if (n === undefined && !wait) return total;
      total += n ?? 0;
      if (n !== undefined && n < SWEEP_BATCH) return total;
    }
  }

  /**
   * One batch (sql/maintenance.ts): the items it deleted, or undefined when another sweep held the
   * lock (the sweeper does not wait for it) or the delete gave way to a row another transaction holds.
   */
  async #sweepBatch(wait: boolean): Promise<number | undefined> {
    try {
      return await this.#db.transaction(async (tx) => {
        if (wait) await tx.query(sweepLockWaiting, [this.schema]);
        else if (!(await tx.query<{ got: boolean }>(sweepLock, [this.schema])).rows[0]!.got) return undefined;
        await tx.query(`SET LOCAL lock_timeout = '${SWEEP_LOCK_TIMEOUT}'`);
        return (await tx.query<{ n: number }>(this.#q.sweep, [SWEEP_BATCH])).rows[0]!.n;
      });
    } catch (err) {
      if (sqlStateOf(err) === "55P03") return undefined;
      throw await this.#failure(err, "sweepExpiredItems");
    }
  }

  /**
   * Counts and times over the whole store (expired items included until swept).
   *
   * @example
   * ```ts
   * const { totalItems, namespaceCount } = await store.getStats();
   * ```
   */
  async getStats(): Promise<StoreStats> {
    type Row = { total_items: string; expired_items: string; namespace_count: string; oldest_item: Date | null; newest_item: Date | null };
    const res = await this.#run<Row>(this.#q.stats, [], "getStats");
    const r = res.rows[0]!;
    return {
      totalItems: Number(r.total_items),
      expiredItems: Number(r.expired_items),
      namespaceCount: Number(r.namespace_count),
      oldestItem: r.oldest_item,
      newestItem: r.newest_item,
    };
  }

  /**
   * Make the embeddings that are missing (after a change of `dims`, or an adoption whose
   * embeddings had other dimensions) with the store's embedder, `batchSize` texts per call.
   *
   * @example
   * ```ts
   * const { embedded } = await store.reindex({ batchSize: 100 });
   * ```
   */
  async reindex(options: { batchSize?: number } = {}): Promise<{ embedded: number }> {
    const index = this.#opts.index;
    if (!index) throw new InvalidOptionsError("index", "reindex needs the store's index option (dims, embed)");
    const batchSize = options.batchSize ?? 100;
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new InvalidOptionsError("batchSize", "expected a positive integer");
    await this.#ensureReady();
    let embedded = 0;
    for (;;) {
      const res = await this.#run<{ ns_key: string; key: string; field_path: string; text_content: string }>(reindexPage(this.#q.p), [batchSize], "reindex");
      if (res.rows.length === 0) return { embedded };
      const vectors = await embedDocuments(index, res.rows.map((r) => r.text_content));
      const rows = res.rows.map((r, i) => ({ ns: r.ns_key, key: r.key, field: r.field_path, embedding: vectorText(vectors[i]!) }));
      await this.#run(reindexWrite(this.#vectorPlace!), [JSON.stringify(rows)], "reindex");
      embedded += rows.length;
    }
  }
}
