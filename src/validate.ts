/**
 * Input validation, run before any SQL. Each check names the offending field
 * so a caller never has to decode a btree or encoding error from Postgres.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { InvalidInputError, InvalidOptionsError } from "./errors.js";

/**
 * Byte limits for key columns. A btree entry must fit in about a third of a
 * page (2704 bytes); the longest key (checkpoint_writes: thread, namespace,
 * checkpoint, task, idx) stays under it with these limits.
 */
export const LIMITS = {
  thread_id: 512,
  checkpoint_ns: 1024,
  checkpoint_id: 128,
  task_id: 256,
  channel: 512,
  version: 128,
  /** Not in any index (`checkpoint_writes` sorts by it in memory): bounded by the statement size only. */
  task_path: Number.POSITIVE_INFINITY,
} as const;

const encoder = new TextEncoder();

/** Half of a UTF-16 surrogate pair: not Unicode, and Postgres would silently store U+FFFD instead. */
export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A string usable as a key column: no NUL (Postgres text cannot hold it), within the byte limit. */
export function checkKey(field: string, value: unknown, limit: number, opts: { allowEmpty?: boolean } = {}): string {
  if (typeof value !== "string") {
    const got = value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
    throw new InvalidInputError(field, `expected a string, got ${got}${typeof value === "number" ? " (pass String(id) if you mean it)" : ""}`);
  }
  return checkKeyText(field, value, limit, opts);
}

/**
 * A thread id: a string, or a safe integer taken as its decimal string. The
 * official saver stores `thread_id: 42` as "42" (pg sends the number as text)
 * and apps rely on that, so `42` and `"42"` name the same thread here too.
 * Anything else that is not a string (a fraction, NaN, a bigint, an object) is
 * refused, naming the field.
 */
export function threadIdOf(field: string, value: unknown): string {
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) {
      throw new InvalidInputError(field, "expected a string or a safe integer, got a number that is not one (a fraction, NaN, or beyond ±(2^53 - 1))");
    }
    return String(value);
  }
  if (typeof value !== "string") {
    const got = value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
    throw new InvalidInputError(field, `expected a string or a safe integer, got ${got}`);
  }
  return checkKeyText(field, value, LIMITS.thread_id);
}

/**
 * The config with a numeric `thread_id` as its decimal string (see
 * {@link threadIdOf}), so everything downstream, the in-flight and
 * call-order keys included, sees one id; the config itself when nothing changes.
 */
export function withStringThreadId<C extends RunnableConfig | undefined>(config: C): C {
  const id: unknown = config?.configurable?.thread_id;
  if (typeof id !== "number" || !Number.isSafeInteger(id)) return config;
  return { ...config, configurable: { ...config!.configurable, thread_id: String(id) } };
}

/**
 * A string Postgres text holds as given: no NUL (it cannot hold one; the statement would fail) and no
 * lone surrogate (it would silently hold U+FFFD instead). The value is never echoed.
 *
 * @example
 * ```ts
 * checkText("search query", query);
 * ```
 */
export function checkText(field: string, value: string): string {
  if (value.includes("\u0000")) throw new InvalidInputError(field, "must not contain NUL (\\u0000) characters");
  if (LONE_SURROGATE.test(value)) throw new InvalidInputError(field, "is not valid Unicode (a lone surrogate: half of a character)");
  return value;
}

function checkKeyText(field: string, value: string, limit: number, opts: { allowEmpty?: boolean } = {}): string {
  if (value === "" && !opts.allowEmpty) throw new InvalidInputError(field, "must not be empty");
  checkText(field, value);
  // Most keys are short ASCII: skip the encode when even 4 bytes per char fit.
  if (value.length * 3 > limit) {
    const bytes = encoder.encode(value).length;
    if (bytes > limit) throw new InvalidInputError(field, `is ${bytes} bytes long; the limit is ${limit} bytes (UTF-8)`);
  }
  return value;
}

export interface ThreadKey {
  threadId: string;
  checkpointNs: string;
  checkpointId: string | undefined;
}

/** The (thread, namespace, checkpoint) a config points at. `thread_id` is required unless `requireThread` is false. */
export function readConfig(config: RunnableConfig | undefined, where: string, requireThread = true): Partial<ThreadKey> & { checkpointNs: string | undefined } {
  if (config === null || typeof config !== "object") throw new InvalidInputError(`${where} config`, "expected an object");
  const configurable = config.configurable;
  if (configurable === undefined || configurable === null) {
    if (requireThread) throw new InvalidInputError(`${where} config.configurable`, "is missing; pass { configurable: { thread_id } }");
    return { threadId: undefined, checkpointNs: undefined, checkpointId: undefined };
  }
  if (typeof configurable !== "object") throw new InvalidInputError(`${where} config.configurable`, "expected an object");
  const rawThread = configurable.thread_id;
  if (rawThread === undefined && requireThread) {
    throw new InvalidInputError(`${where} config.configurable.thread_id`, "is missing; every checkpoint belongs to a thread");
  }
  const threadId = rawThread === undefined ? undefined : threadIdOf(`${where} config.configurable.thread_id`, rawThread);
  const checkpointNs =
    configurable.checkpoint_ns === undefined
      ? undefined
      : checkKey(`${where} config.configurable.checkpoint_ns`, configurable.checkpoint_ns, LIMITS.checkpoint_ns, { allowEmpty: true });
  const rawId = configurable.checkpoint_id;
  const checkpointId =
    rawId === undefined || rawId === null || rawId === ""
      ? undefined
      : checkKey(`${where} config.configurable.checkpoint_id`, rawId, LIMITS.checkpoint_id);
  return { threadId, checkpointNs, checkpointId };
}

/** A Postgres schema name: any identifier Postgres accepts (quotes, dashes, unicode), at most 63 bytes. */
export function checkSchemaName(schema: unknown, option = "schema"): string {
  if (typeof schema !== "string") throw new InvalidOptionsError(option, "expected a string");
  if (schema === "") throw new InvalidOptionsError(option, "must not be empty");
  if (schema.includes("\u0000")) throw new InvalidOptionsError(option, "must not contain NUL characters");
  if (LONE_SURROGATE.test(schema)) throw new InvalidOptionsError(option, "is not valid Unicode (a lone surrogate)");
  const bytes = encoder.encode(schema).length;
  if (bytes > 63) throw new InvalidOptionsError(option, `is ${bytes} bytes; Postgres identifiers hold at most 63`);
  if (/^pg_/i.test(schema)) throw new InvalidOptionsError(option, "names starting with pg_ are reserved by Postgres");
  return schema;
}

/** Double-quote an identifier for SQL text (the only place names enter SQL text). */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * Refuses any key of `options` not in `valid`, listing them all, and pointing at the one a key
 * differs from only in case (`databaseURL`); `of` names what the options are for.
 */
export function checkOptionKeys<O = Record<string, unknown>>(options: unknown, valid: Iterable<string>, of: string): O {
  if (options === null || typeof options !== "object" || Array.isArray(options)) throw new InvalidOptionsError("options", "expected an object");
  const names = [...valid];
  for (const key of Object.keys(options)) {
    if (names.includes(key)) continue;
    const near = names.find((n) => n.toLowerCase() === key.toLowerCase());
    throw new InvalidOptionsError(key, `is not an option of ${of}${near ? ` (did you mean ${near}?)` : ""}; its options: ${names.join(", ")}`);
  }
  return options as O;
}
