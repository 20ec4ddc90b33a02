/**
 * What the saver's core and `setup()` may be told, checked: an option the
 * saver does not know is refused, never ignored. The public options add the
 * wing's (`retention`: src/ops/postgres-saver.ts).
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import type { AdoptOption, RetryOptions } from "../db/migrate.js";
import { InvalidOptionsError } from "../errors.js";
import type { EventHandler, HandlerErrorHandler } from "../events.js";
import { parseDuration } from "../duration.js";
import { checkVersioning, type StateVersioning, type Upcaster } from "./upcast.js";
import { checkOptionKeys, checkSchemaName } from "../validate.js";

/**
 * How a put whose parent is not the lineage's current head is handled.
 * - `"branch"` (default): LangGraph's semantics. It commits as a new branch,
 *   becomes the head, and a `fork` event reports the displaced head.
 * - `"linear"`: it is rejected with {@link CheckpointConflictError} and writes
 *   nothing, unless the invocation sets `configurable.allow_fork: true`.
 */
export type LineageMode = "branch" | "linear";

/**
 * What one statement may carry in all: Postgres refuses a protocol message over
 * 1 GiB; 1 MiB is kept for ids, names and framing (which are also counted).
 */
export const MAX_STATEMENT_BYTES = 1024 ** 3 - 1024 ** 2;

/** The core saver's options (the public `PostgresSaverOptions` add `retention`). */
export interface SaverOptions {
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
   * on read through {@link SaverOptions.upcasters}. Default: off.
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
}

/** Every option of {@link SaverOptions}: anything else is refused, never ignored. */
export const SAVER_OPTIONS: readonly string[] = [
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
] satisfies (keyof SaverOptions)[];

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

/** `setup()`'s options, checked: an unknown key is refused (adopt, retry, partitions are checked where they are used). */
export function checkSetupOptions(options: unknown): SetupOptions {
  if (options === null || typeof options !== "object") throw new InvalidOptionsError("setup options", "expected { adopt?, retry?, partitions? }");
  for (const key of Object.keys(options)) {
    if (key !== "adopt" && key !== "retry" && key !== "partitions") throw new InvalidOptionsError(key, "is not a setup() option (adopt, retry, partitions)");
  }
  return options as SetupOptions;
}

/** The `configurable` flag that lets one invocation fork deliberately in linear mode. */
export const ALLOW_FORK_KEY = "allow_fork";

/**
 * The options of `new PostgresSaver(pool, options)` or of the official
 * saver's `new PostgresSaver(pool, serde, options)`, checked: an option this
 * saver does not know is refused, never ignored.
 */
export function saverOptions<O extends SaverOptions>(args: [O?] | [SerializerProtocol | undefined, O?], valid: readonly string[] = SAVER_OPTIONS): O {
  const isSerde = (x: unknown) =>
    typeof x === "object" && x !== null && typeof (x as SerializerProtocol).dumpsTyped === "function" && typeof (x as SerializerProtocol).loadsTyped === "function";
  let options: O;
  if (args.length >= 2 || isSerde(args[0])) {
    // The official shape: (pool, serde?, options?).
    const [serde, rest] = args as [SerializerProtocol | undefined, O?];
    if (serde != null && !isSerde(serde)) {
      throw new InvalidOptionsError("serde", "the second of three arguments is the serializer (with dumpsTyped and loadsTyped), or undefined");
    }
    options = checkOptionKeys<O>(rest ?? {}, valid, "this saver");
    if (serde && options.serde && options.serde !== serde) throw new InvalidOptionsError("serde", "given twice (second argument and options.serde)");
    if (serde) options = { ...options, serde };
  } else {
    options = checkOptionKeys<O>(args[0] ?? {}, valid, "this saver");
  }
  if (options.serde !== undefined && !isSerde(options.serde)) throw new InvalidOptionsError("serde", "expected a serializer with dumpsTyped and loadsTyped");
  return options;
}

/** The saver's settings from its options, each checked (in this order: the first bad one is reported). */
export function checkedSettings(options: SaverOptions): {
  schema: string;
  lineage: LineageMode;
  prepared: boolean;
  leaseSeconds: number;
  ttlSeconds: number | null;
  maxValueBytes: number;
  versioning: StateVersioning | undefined;
  elementStorage: boolean;
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
  return { schema, lineage, prepared: options.preparedStatements ?? true, leaseSeconds: lease / 1000, ttlSeconds, maxValueBytes, versioning, elementStorage };
}
