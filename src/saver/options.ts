/**
 * What `new PostgresSaver(...)` and `setup()` may be told, checked: an option
 * the saver does not know is refused, never ignored; and the pool defaults
 * for pools the saver creates.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import type pg from "pg";
import { checkAdopt, checkRetry, type AdoptOption, type RetryOptions } from "../db/migrate.js";
import { checkPartitions } from "../db/partitions.js";
import { LOCATION_OPTIONS, checkLocation, type Location, type OpenLocationOptions } from "../db/open.js";
import { InvalidOptionsError } from "../errors.js";
import type { EventHandler, HandlerErrorHandler } from "../events.js";
import { parseDuration } from "../duration.js";
import { checkVersioning, type StateVersioning, type Upcaster } from "./upcast.js";
import { checkSchemaName } from "../validate.js";
import { checkRetention, type RetentionOptions, type RetentionSettings } from "./retention.js";
import { MAX_STATEMENT_BYTES } from "./encode.js";

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
   * the channel (a list stored by its elements counts all its elements
   * together, as its whole value would). Default 64 MiB (67108864); at most 1 GiB - 1 MiB. Whatever
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
  /**
   * Store what a thread repeats once (docs/element-storage.md):
   * list-valued channels (a chat's `messages`) element by element, each
   * element once per thread and namespace, so a conversation's storage grows
   * with its length, not with its square; a task's writes of lists, objects
   * holding lists (LangGraph's input `{ messages }`) and large values by the
   * same element rows. Values read back exactly as written, and every element
   * read is checked against its hash. With an `EncryptedSerializer` each
   * element is sealed for its own row, hashes are keyed and each list is
   * authenticated; a serializer that cannot do that, or gives one value
   * different bytes each time, stores whole values (and says so once, in a
   * process warning). Default true; `false` stores every value whole.
   */
  elementStorage?: boolean;
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
  "elementStorage",
  "retention",
] satisfies (keyof PostgresSaverOptions)[]);

/** The options of `PostgresSaver.fromConnString()`: the saver's and `pool`. */
export const CONN_STRING_OPTIONS: readonly string[] = ["pool", ...SAVER_OPTIONS];

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
   * of a schema holding them stops with `AdoptionRequiredError` and changes
   * nothing; official tables in other schemas are said once (an
   * `officialTablesFound` event) and left alone. See docs/adoption.md (switching from
   * @langchain/langgraph-checkpoint-postgres).
   * Once the adoption commits, what it copied whole is stored by content with
   * this saver's serializer, as `compact` does (with `elementStorage` on, the
   * default): reported in the result's `adoption.compacted`.
   */
  adopt?: AdoptOption;
  /**
   * Retrying while the database is not reachable yet (or restarting, or a
   * lock wait timed out): each attempt is reported as a `retry` event.
   * Default: 10 attempts, 250 ms doubling to 5 s (about 30 s in all); `false`: one attempt.
   */
  retry?: RetryOptions | false;
  /**
   * Hash partition the tables by `thread_id`, this many partitions each (2 to
   * 1024), when this call creates the schema; a schema migrated before keeps
   * its layout (another one is refused with `PartitionsMismatchError`). See
   * docs/scaling-out.md.
   */
  partitions?: number;
}

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

/** Every option of {@link OpenOptions}, the saver's included: anything else is refused, listing these. */
const OPEN_OPTIONS: readonly string[] = [...LOCATION_OPTIONS, ...(["adopt", "retry", "partitions"] satisfies (keyof OpenOptions)[]), ...SAVER_OPTIONS];

/**
 * `open()`'s options, every one checked before anything is opened or created
 * (a typo is refused naming every option of the call), split into where the
 * database is (src/db/open.ts), `setup()`'s, and the saver's.
 */
export function openOptions(options: unknown): { location: Location; setup: SetupOptions; saver: PostgresSaverOptions } {
  const o = checkOptionKeys(options ?? {}, OPEN_OPTIONS, "open()") as OpenOptions;
  const { databaseUrl, dataDir, embedded, migrate, pool, adopt, retry, partitions, log, ...saver } = o;
  const location = checkLocation({ databaseUrl, dataDir, embedded, migrate, pool, log });
  checkAdopt(adopt);
  checkRetry(retry);
  checkPartitions(partitions);
  checkedSettings(saverOptions([saver]));
  return { location, setup: { adopt, retry, partitions }, saver };
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
 * The options of `new PostgresSaver(pool, options)` or of the official
 * saver's `new PostgresSaver(pool, serde, options)`, checked: an option this
 * saver does not know is refused, never ignored.
 */
export function saverOptions(args: [PostgresSaverOptions?] | [SerializerProtocol | undefined, PostgresSaverOptions?]): PostgresSaverOptions {
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

/**
 * Refuses any key not in `valid` (default: the saver's options), listing them
 * all, and pointing at the one a key differs from only in case (`databaseURL`).
 */
export function checkOptionKeys(options: unknown, valid: Iterable<string> = SAVER_OPTIONS, of = "this saver"): PostgresSaverOptions {
  if (options === null || typeof options !== "object" || Array.isArray(options)) throw new InvalidOptionsError("options", "expected an object");
  const names = [...valid];
  for (const key of Object.keys(options)) {
    if (names.includes(key)) continue;
    const near = names.find((n) => n.toLowerCase() === key.toLowerCase());
    throw new InvalidOptionsError(key, `is not an option of ${of}${near ? ` (did you mean ${near}?)` : ""}; its options: ${names.join(", ")}`);
  }
  return options as PostgresSaverOptions;
}

/** The saver's settings from its options, each checked (in this order: the first bad one is reported). */
export function checkedSettings(options: PostgresSaverOptions): {
  schema: string;
  lineage: LineageMode;
  prepared: boolean;
  leaseSeconds: number;
  ttlSeconds: number | null;
  maxValueBytes: number;
  versioning: StateVersioning | undefined;
  elementStorage: boolean;
  retention: RetentionSettings | undefined;
} {
  const lineage = options.lineage ?? "branch";
  if (lineage !== "branch" && lineage !== "linear") throw new InvalidOptionsError("lineage", 'expected "branch" or "linear"');
  if (options.onEvent !== undefined && typeof options.onEvent !== "function") throw new InvalidOptionsError("onEvent", "expected a function");
  if (options.onHandlerError !== undefined && typeof options.onHandlerError !== "function") throw new InvalidOptionsError("onHandlerError", "expected a function");
  const schema = checkSchemaName(options.schema ?? "public");
  const lease = parseDuration(options.runLeaseMs ?? 300_000, "runLeaseMs", { zero: true });
  const versioning = checkVersioning(options.stateVersion, options.upcasters);
  const maxValueBytes = options.maxValueBytes ?? 64 * 1024 * 1024;
  if (!Number.isInteger(maxValueBytes) || maxValueBytes < 1 || maxValueBytes > MAX_STATEMENT_BYTES) {
    throw new InvalidOptionsError("maxValueBytes", `expected a positive integer up to ${MAX_STATEMENT_BYTES} (Postgres stores no larger value)`);
  }
  const ttlSeconds = options.ttl === undefined ? null : Math.max(1, Math.ceil(parseDuration(options.ttl, "ttl") / 1000));
  const elementStorage = options.elementStorage ?? true;
  if (typeof elementStorage !== "boolean") throw new InvalidOptionsError("elementStorage", "expected true or false");
  const retention = checkRetention(options.retention, schema);
  return { schema, lineage, prepared: options.preparedStatements ?? true, leaseSeconds: lease / 1000, ttlSeconds, maxValueBytes, versioning, elementStorage, retention };
}
