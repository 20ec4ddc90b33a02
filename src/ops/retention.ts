/**
 * Retention that runs by itself: the saver option `retention` runs `prune`
 * in the background, once per interval across every process that has it on.
 *
 * - **One process at a time.** A run starts only with the schema's retention
 *   lock (a session advisory lock, tried, never waited on), on a connection of
 *   the retention's own, held until the run ends; a process that dies lets it
 *   go with its connection.
 * - **Once per interval.** Under that lock, a run claims its start in
 *   `checkpointer_retention` only when the last one started at least `every`
 *   ago, by the database's clock (no two app servers' clocks compared). Each
 *   process checks four times per interval, so runs come `every` to 1.25
 *   `every` apart, whichever process gets there; a restart never makes an
 *   extra one. A run longer than `every` is followed by the next at once.
 * - **Never in the way of writes.** `prune` itself never waits on a write (it
 *   skips busy threads and retries them next time), and retention uses its
 *   own pool (two connections, made from the saver's pool's settings): it never
 *   takes connections the application's puts wait for. On the embedded
 *   database (PGlite: one process) there is no lock to take and no pool.
 * - **Observable.** Each run is reported by a `retention` event (what it
 *   deleted, when it started and finished by the database's clock); a failed
 *   run by `retentionFailed`, and the next check tries again.
 * - **After the schema is migrated.** Retention starts with the saver, often
 *   before its `setup()` (or `open()`'s) has created the tables: a check that
 *   finds the schema not migrated yet has nothing to prune and is no failure.
 *   It says so once (`retentionWaiting`), and the check after `setup()`
 *   comes at once (a deploy step's `migrate`: at the next check).
 * - **Stops with the saver.** `stopRetention()` and `end()` stop the timer,
 *   stop a run in progress after its current batch, and close its pool.
 *   Timers are unref'd: retention alone never keeps a process alive.
 */
import pg from "pg";
import { dbOf, isPGlite, type PGliteLike, type Queryable } from "../db/db.js";
import { CHECKPOINTER_RETENTION as R } from "../db/names.js";
import { parseDuration } from "../duration.js";
import { InvalidOptionsError, sqlStateOf } from "../errors.js";
import { emit, type EventHandler } from "../events.js";
import { prune, type PruneOptions } from "./prune.js";
import { readOptions } from "./prune-options.js";
import { quoteIdent } from "../validate.js";

/**
 * The saver's `retention` option: how often, and `prune`'s rules (the same
 * names and defaults as {@link prune}'s options).
 *
 * @example
 * ```ts
 * const saver = new PostgresSaver(pool, { retention: { every: "10m", keepLast: 50, idleFor: "90d" } });
 * ```
 */
export interface RetentionOptions
  extends Pick<PruneOptions, "keepLast" | "olderThan" | "idleFor" | "threadTtl" | "grace" | "keepTombstones" | "batchSize" | "chunkSize" | "lockTimeout"> {
  /** How often: a duration (`"10m"`, `"1h"`) or milliseconds. Required. */
  every: string | number;
  /** Start when the saver is created (default true); false: at `startRetention()`. */
  start?: boolean;
}

const RULES = ["keepLast", "olderThan", "idleFor", "threadTtl", "grace", "keepTombstones", "batchSize", "chunkSize", "lockTimeout"] as const;
const KEYS: ReadonlySet<string> = new Set<string>(["every", "start", ...RULES]);

/** A run's job name in `checkpointer_retention`. */
const JOB = "prune";
/** Checks per interval: runs come `every` to `every * (1 + 1/CHECKS)` apart. */
const CHECKS = 4;

/** The checked `retention` option: the interval and prune's rules. */
export interface RetentionSettings {
  everyMs: number;
  start: boolean;
  rules: Pick<PruneOptions, (typeof RULES)[number]>;
}

/** Check the `retention` option (every error names `retention.<field>`), before any SQL. */
export function checkRetention(value: unknown, schema: string): RetentionSettings | undefined {
  if (value === undefined) return undefined;
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new InvalidOptionsError("retention", 'expected { every: "10m", keepLast?, olderThan?, idleFor?, ... }');
  const o = value as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!KEYS.has(key)) throw new InvalidOptionsError(`retention.${key}`, `is not a retention option (${[...KEYS].join(", ")})`);
  }
  if (o.every === undefined) throw new InvalidOptionsError("retention.every", 'is missing: how often to run, e.g. "10m"');
  const everyMs = parseDuration(o.every, "retention.every");
  if (o.start !== undefined && typeof o.start !== "boolean") throw new InvalidOptionsError("retention.start", "expected true or false");
  const rules = Object.fromEntries(RULES.filter((k) => o[k] !== undefined).map((k) => [k, o[k]])) as RetentionSettings["rules"];
  try {
    // prune's own checks, with a stand-in connection (the saver's is used).
    readOptions({ ...rules, schema, connectionString: "postgres://" });
  } catch (err) {
    if (err instanceof InvalidOptionsError) throw new InvalidOptionsError(`retention.${err.option}`, err.message.replace(/^Invalid option [^:]+: /, ""));
    throw err;
  }
  return { everyMs, start: o.start !== false, rules };
}

/** The background runs of one saver. */
export class Retention {
  readonly #settings: RetentionSettings;
  readonly #schema: string;
  readonly #source: pg.Pool | PGliteLike;
  readonly #onEvent: EventHandler | undefined;
  /** Retention's own pool (pg only), made at the first run. */
  #pool: pg.Pool | undefined;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #abort: AbortController | undefined;
  #started = false;
  /** The last check found the schema not migrated (said once, until a check finds it migrated). */
  #waiting = false;
  /** setup() finished while a check ran: the next check comes at once. */
  #soon = false;

  constructor(options: { settings: RetentionSettings; schema: string; pool: pg.Pool | PGliteLike; onEvent: EventHandler | undefined }) {
    this.#settings = options.settings;
    this.#schema = options.schema;
    this.#source = options.pool;
    this.#onEvent = options.onEvent;
  }

  get running(): boolean {
    return this.#started;
  }

  /** Start checking (idempotent): the first check soon, at a random point of the first quarter interval. */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.#schedule(Math.random() * (this.#settings.everyMs / CHECKS));
  }

  /** Stop checking; a run in progress stops after its current batch and is waited for; the pool is closed. */
  async stop(): Promise<void> {
    this.#started = false;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#abort?.abort();
    await this.#running;
    const pool = this.#pool;
    this.#pool = undefined;
    await pool?.end().catch(() => undefined);
  }

  /**
   * The saver's setup() migrated the schema: a check that waited for it (or is
   * finding out right now) is followed by one at once, not a quarter interval later.
   */
  schemaReady(): void {
    if (!this.#started || !(this.#waiting || this.#running)) return;
    if (this.#running) {
      this.#soon = true;
      return;
    }
    if (this.#timer) clearTimeout(this.#timer);
    this.#schedule(0);
  }

  #schedule(ms: number): void {
    if (!this.#started) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#running = this.#check().finally(() => {
        this.#running = undefined;
        const soon = this.#soon;
        this.#soon = false;
        this.#schedule(soon ? 0 : this.#settings.everyMs / CHECKS);
      });
    }, ms);
    this.#timer.unref();
  }

  /** One check: run, if this process gets the lock and the last run is an interval old. */
  async #check(): Promise<void> {
    const started = performance.now();
    let release: (() => Promise<void>) | undefined;
    let tx: Queryable;
    try {
      if (isPGlite(this.#source)) {
        // One process holds the embedded folder: nothing to lock against.
        tx = dbOf(this.#source);
      } else {
        this.#pool ??= this.#newPool(this.#source);
        const client = await this.#pool.connect();
        const lock = [`langgraph-checkpoint-pg:retention:${this.#schema}`];
        const { rows } = await client.query<{ got: boolean }>("SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtext($1)) AS got", lock);
        if (!rows[0]!.got) {
          client.release();
          return;
        }
        tx = client;
        release = async () => {
          await client.query("SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtext($1))", lock).catch(() => undefined);
          client.release();
        };
      }
      const table = `${quoteIdent(this.#schema)}.${R.table}`;
      // Not migrated yet (setup() still on its way): nothing to prune, and nothing failed.
      const migrated = (await tx.query<{ ok: boolean }>("SELECT pg_catalog.to_regclass($1) IS NOT NULL AS ok", [table])).rows[0]!.ok;
      if (!migrated) {
        if (!this.#waiting) {
          this.#waiting = true;
          emit(this.#onEvent, { type: "retentionWaiting", schema: this.#schema, message: `schema "${this.#schema}" is not migrated yet: retention starts once setup() or migrate has run` });
        }
        return;
      }
      this.#waiting = false;
      const claimed = (
        await tx.query<{ started_at: Date }>(
          // The time comes in the inserted row (EXCLUDED), the interval in UTC's timestamp: Citus takes only IMMUTABLE
          // functions in ON CONFLICT's SET and WHERE (the table is a reference table there).
          `INSERT INTO ${table} AS r (${R.job}, ${R.startedAt}, ${R.runs}) VALUES ($1, pg_catalog.now(), 1)
           ON CONFLICT (${R.job}) DO UPDATE SET ${R.startedAt} = EXCLUDED.${R.startedAt}, ${R.runs} = r.${R.runs} + 1
            WHERE r.${R.startedAt} IS NULL
               OR (r.${R.startedAt} AT TIME ZONE 'UTC') <= (EXCLUDED.${R.startedAt} AT TIME ZONE 'UTC') - pg_catalog.make_interval(secs => $2::float8)
           RETURNING ${R.startedAt} AS started_at`,
          [JOB, this.#settings.everyMs / 1000],
        )
      ).rows[0];
      if (!claimed) return;
      this.#abort = new AbortController();
      const result = await prune({
        ...this.#settings.rules,
        pool: this.#pool ?? (this.#source as PGliteLike),
        schema: this.#schema,
        signal: this.#abort.signal,
      });
      const finished = (await tx.query<{ finished_at: Date }>(`UPDATE ${table} SET ${R.finishedAt} = pg_catalog.now() WHERE ${R.job} = $1 RETURNING ${R.finishedAt} AS finished_at`, [JOB]))
        .rows[0]!;
      emit(this.#onEvent, {
        type: "retention",
        schema: this.#schema,
        checkpoints: result.checkpoints,
        writes: result.writes,
        blobs: result.blobs,
        bytes: result.bytes,
        threadsExpired: result.threadsExpired,
        threadsSkipped: result.threadsSkipped,
        tombstones: result.tombstones,
        threadsScanned: result.threadsScanned,
        aborted: result.aborted,
        startedAt: new Date(claimed.started_at).toISOString(),
        finishedAt: new Date(finished.finished_at).toISOString(),
        durationMs: performance.now() - started,
      });
    } catch (err) {
      emit(this.#onEvent, {
        type: "retentionFailed",
        schema: this.#schema,
        message: err instanceof Error ? err.message.split("\n")[0]! : String(err),
        code: sqlStateOf(err) ?? (err as { code?: string } | undefined)?.code,
      });
    } finally {
      this.#abort = undefined;
      await release?.();
    }
  }

  /** Two connections with the settings of the saver's pool; idle ones never keep the process alive. */
  #newPool(from: pg.Pool): pg.Pool {
    const settings = (from as pg.Pool & { options?: pg.PoolConfig }).options ?? {};
    const pool = new pg.Pool({ ...settings, max: 2, allowExitOnIdle: true, application_name: "langgraph-checkpoint-pg:retention" });
    // A connection dying while idle is reported by the next check, not by a crash.
    pool.on("error", () => undefined);
    return pool;
  }
}
