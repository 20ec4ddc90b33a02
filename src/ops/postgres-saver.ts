/**
 * The public `PostgresSaver`: the saver's core (src/saver/saver.ts: what
 * `graph.compile({ checkpointer })` needs) with what the operations wing adds
 * around it: opening a database (`fromConnString`, `open`), adopting the
 * official saver's tables in `setup()` (and storing what the adoption copied
 * by content), copying threads, and background retention. The core imports
 * none of this; this class wraps it (docs/architecture.md).
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import pg from "pg";
import { BOUNDED_POOL, type PGliteLike } from "../db/db.js";
import { checkAdopt, checkRetry, type MigrateResult } from "../db/migrate.js";
import type { AdoptionSummary } from "../db/official.js";
import { LOCATION_OPTIONS, checkLocation, openOn, type Location, type OpenLocationOptions } from "../db/open.js";
import { checkPartitions } from "../db/partitions.js";
import { InvalidOptionsError } from "../errors.js";
import { SAVER_OPTIONS, checkedSettings, saverOptions, type SaverOptions, type SetupOptions } from "../saver/options.js";
import { SaverCore } from "../saver/saver.js";
import { checkOptionKeys } from "../validate.js";
import { ADOPTION } from "./adopt-plan.js";
import { compactAdopted, type CompactResult } from "./compact.js";
import { checkCopyArguments, copyStatements, copyThread, type CopyThreadOptions, type CopyThreadResult } from "./copy.js";
import { checkRetention, Retention, type RetentionOptions } from "./retention.js";

/** The saver's options: the core's, and `retention`. */
export interface PostgresSaverOptions extends SaverOptions {
  /**
   * Run `prune` in the background, once per interval across all processes
   * that have this on (a database lock and the database's clock decide, not
   * timers): `{ every: "10m", keepLast?, olderThan?, idleFor?, threadTtl?, grace?,
   * keepTombstones?, ... }`, prune's options by their names. Starts with the
   * saver unless `start: false` (then `startRetention()`); stops on
   * `stopRetention()` and `end()`. Each run is reported by a `retention` event.
   * Default: off (run `prune` or the CLI yourself). See docs/retention.md.
   */
  retention?: RetentionOptions;
}

/** Every option of {@link PostgresSaverOptions}. */
const OPTIONS: readonly string[] = [...SAVER_OPTIONS, "retention"];

/**
 * What `PostgresSaver.open()` may be told: the saver's options, `setup()`'s,
 * and where the database is.
 *
 * @example
 * ```ts
 * await PostgresSaver.open({ databaseUrl: process.env.DATABASE_URL, schema: "agents", retry: { attempts: 20 } });
 * await PostgresSaver.open({ embedded: true }); // the embedded database in ./.langgraph-pg, chosen (no notice on stderr)
 * ```
 */
export interface OpenOptions extends PostgresSaverOptions, SetupOptions, OpenLocationOptions {}

/** An adoption `setup()` ran, and what of its copy it stored by content. */
export interface AdoptionReport extends AdoptionSummary {
  /**
   * What `setup({ adopt })` and `migrate --adopt` converted right after the adoption committed: the
   * values it copied whole, stored by content as element storage stores them (see `compact`).
   * Absent for a dry run, an adoption done before, `migrate()` (run `compact` after it), a saver
   * with `elementStorage: false`, or a serializer that cannot store values by content.
   */
  compacted?: CompactResult;
}

/** What `setup()` did: the migrations applied, and the adoption, if told to adopt. */
export interface SetupResult extends Omit<MigrateResult, "adoption"> {
  adoption?: AdoptionReport;
}

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
export class PostgresSaver extends SaverCore {
  /** Background retention (option `retention`, or startRetention()). */
  #retention: Retention | undefined;
  /** copyThread's statements, built at its first call. */
  #copySql: ReturnType<typeof copyStatements> | undefined;
  protected override readonly adoption = ADOPTION;

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
    const { retention, ...core } = saverOptions<PostgresSaverOptions>(args, OPTIONS);
    super(pool, core);
    const settings = checkRetention(retention, this.schema);
    if (settings) {
      this.#retention = new Retention({ settings, schema: this.schema, pool: this.pool, onEvent: this.ctx.onEvent });
      if (settings.start) this.#retention.start();
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
    const { pool: poolConfig, ...saverOptions } = checkOptionKeys<PostgresSaverOptions & { pool?: pg.PoolConfig }>(options ?? {}, ["pool", ...OPTIONS], "fromConnString()");
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
    saver.owns(close);
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
   * Apply pending migrations to this saver's schema (the same as `migrate()`).
   * Waits for a database that is not reachable yet (see {@link SetupOptions.retry}).
   * On a schema holding the official LangGraph saver's tables it changes
   * nothing and throws `AdoptionRequiredError` unless told what to do with
   * them ({@link SetupOptions.adopt}; in other schemas they are said once and
   * left alone); an adoption's copy is then stored by content with this
   * saver's serializer (`adoption.compacted` in the result).
   *
   * @example
   * ```ts
   * await saver.setup();
   * await new PostgresSaver(pool, { schema: "langgraph" }).setup({ adopt: { from: "public" } }); // switching
   * await new PostgresSaver(pool, { schema: "sharded" }).setup({ partitions: 16 }); // hash partitioned by thread_id
   * ```
   */
  override async setup(options: SetupOptions = {}): Promise<SetupResult> {
    const result: SetupResult = await super.setup(options);
    // Retention started with the saver may have found no tables yet: its first run comes now.
    this.#retention?.schemaReady();
    // The adoption copied the official saver's values whole: store them as this saver stores values (issue 27).
    if (result.adoption?.adopted && this.ctx.elements) {
      const compacted = await compactAdopted(this.ctx.db, this.schema, this.ctx.serde);
      if (compacted) result.adoption.compacted = compacted;
    }
    return result;
  }

  /**
   * Close what this saver opened (`fromConnString`'s pool, `open`'s pool or
   * embedded database and its folder lock), after stopping its retention; a
   * pool you passed in stays open.
   *
   * @example
   * ```ts
   * await saver.end();
   * ```
   */
  override async end(): Promise<void> {
    await this.#retention?.stop();
    await super.end();
  }

  /**
   * Start background retention (src/ops/retention.ts): with the saver's
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
      this.#retention = new Retention({ settings, schema: this.schema, pool: this.pool, onEvent: this.ctx.onEvent });
    }
    if (!this.#retention) throw new InvalidOptionsError("retention", 'the saver has no retention option: pass it, or startRetention({ every: "10m", ... })');
    this.#retention.start();
  }

  /**
   * Stop background retention; a run in progress stops after its current batch, and is waited for.
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
   * Copy a thread's history (with `upTo`, the part up to that root checkpoint,
   * which becomes the copy's head) to another thread id, in one transaction:
   * the copy reads exactly as the source at every checkpoint, so time travel
   * and forks work on it. An existing target is refused ({@link ThreadCopyError})
   * unless `overwrite: true`; `dryRun: true` only counts. See src/ops/copy.ts.
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
    await this.runner.ensureReady();
    const started = performance.now();
    this.#copySql ??= copyStatements(this.schema);
    try {
      return await copyThread(this.ctx, this.#copySql, from, to, options, started);
    } catch (err) {
      throw await this.runner.failure(err, "copyThread");
    }
  }
}

/** Every option of {@link OpenOptions}, the saver's included: anything else is refused, listing these. */
const OPEN_OPTIONS: readonly string[] = [...LOCATION_OPTIONS, ...(["adopt", "retry", "partitions"] satisfies (keyof OpenOptions)[]), ...OPTIONS];

/**
 * `open()`'s options, every one checked before anything is opened or created
 * (a typo is refused naming every option of the call), split into where the
 * database is (src/db/open.ts), `setup()`'s, and the saver's.
 */
function openOptions(options: unknown): { location: Location; setup: SetupOptions; saver: PostgresSaverOptions } {
  const o = checkOptionKeys<OpenOptions>(options ?? {}, OPEN_OPTIONS, "open()");
  const { databaseUrl, dataDir, embedded, migrate, pool, adopt, retry, partitions, log, ...saver } = o;
  const location = checkLocation({ databaseUrl, dataDir, embedded, migrate, pool, log });
  checkAdopt(adopt);
  checkRetry(retry);
  checkPartitions(partitions);
  const { retention, ...core } = saver;
  const { schema } = checkedSettings(saverOptions([core]));
  checkRetention(retention, schema);
  return { location, setup: { adopt, retry, partitions }, saver };
}
