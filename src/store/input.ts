/**
 * The store's input checks, run before any SQL: namespaces, keys, values,
 * pages and TTLs. Each failure is an `InvalidInputError` naming the field.
 * Namespace labels may hold any character (dots, colons, `%`, `_`,
 * backslashes) except U+0000, which Postgres text cannot hold, and U+0001,
 * the separator of the stored key (see schema.ts); nothing is matched with LIKE.
 */
import { readDuration } from "../duration.js";
import { InvalidInputError } from "../errors.js";
import { checkKey, checkText } from "../validate.js";

/**
 * Byte limits that keep the primary key (namespace, key) and the vector
 * table's (namespace, key, field path) inside one btree entry (about 2700
 * bytes), with room for the array's per-label overhead.
 */
export const STORE_LIMITS = { namespaceBytes: 1024, labels: 64, key: 512, fieldPath: 256 } as const;

const encoder = new TextEncoder();

/** Joins the labels of a stored namespace key (see schema.ts): below every character a label may hold. */
export const SEPARATOR = "\u0001";

/** The stored key of a namespace (its labels joined by U+0001). */
export const nsKey = (labels: readonly string[]): string => labels.join(SEPARATOR);

/**
 * A namespace: an array of non-empty strings, or for a prefix (`allowEmpty`)
 * possibly no label. Its first label is not "langgraph", reserved by
 * LangGraph, unless `allowReservedRoot`: as in LangGraph's BaseStore and
 * InMemoryStore, only a write of a value is refused there; a get (null), a
 * delete (nothing to delete), a search or a listing may name it, and a
 * graph's store (AsyncBatchedStore) sends such gets and deletes to batch().
 * The messages of LangGraph's own `validateNamespace` are kept, since
 * callers match on them.
 */
export function checkNamespace(field: string, namespace: unknown, opts: { allowEmpty?: boolean; allowReservedRoot?: boolean } = {}): string[] {
  if (!Array.isArray(namespace)) throw new InvalidInputError(field, "expected an array of strings (the namespace's labels)");
  if (namespace.length === 0 && !opts.allowEmpty) throw new InvalidInputError(field, "Namespace cannot be empty.");
  if (namespace.length > STORE_LIMITS.labels) throw new InvalidInputError(field, `has ${namespace.length} labels; the limit is ${STORE_LIMITS.labels}`);
  let bytes = 0;
  namespace.forEach((label: unknown, i) => {
    if (typeof label !== "string") {
      throw new InvalidInputError(`${field}[${i}]`, `Namespace labels must be strings, but got ${label === null ? "null" : typeof label}.`);
    }
    if (label === "") throw new InvalidInputError(`${field}[${i}]`, "Namespace labels cannot be empty strings.");
    checkText(`${field}[${i}]`, label);
    if (label.includes(SEPARATOR)) throw new InvalidInputError(`${field}[${i}]`, "must not contain U+0001, which separates the labels of a stored namespace");
    bytes += label.length * 3 > 255 ? encoder.encode(label).length : label.length * 3;
  });
  if (bytes > STORE_LIMITS.namespaceBytes) {
    const exact = namespace.reduce((n: number, l: string) => n + encoder.encode(l).length, 0);
    if (exact > STORE_LIMITS.namespaceBytes) throw new InvalidInputError(field, `is ${exact} bytes long; the limit is ${STORE_LIMITS.namespaceBytes} bytes (UTF-8)`);
  }
  if (!opts.allowReservedRoot && namespace[0] === "langgraph") throw new InvalidInputError(field, 'Root label for namespace cannot be "langgraph".');
  return namespace as string[];
}

/** An item key: any string without NUL, at most 512 bytes (the empty string too, as LangGraph allows it). */
export function checkItemKey(field: string, key: unknown): string {
  return checkKey(field, key, STORE_LIMITS.key, { allowEmpty: true });
}

/**
 * In JSON text of `JSON.stringify`, what Postgres JSONB cannot hold: the escape of NUL, or of a
 * surrogate (it escapes only lone ones; a pair is written as is). An escape, not text that looks like
 * one: its backslash comes after an even number of backslashes (`\\u0000` is an escaped backslash, then "u0000").
 */
const UNSTORABLE = /(?<!\\)(?:\\\\)*\\u(?:0000|d[89a-f][0-9a-f]{2})/i;

/**
 * JSON text (of `JSON.stringify`) that Postgres JSONB can hold: no string or key holding NUL, which it
 * refuses, or a lone surrogate, which it refuses too. Checked on the text: one pass, whatever the nesting.
 */
export function checkJsonText(field: string, json: string): string {
  if (UNSTORABLE.test(json)) {
    throw new InvalidInputError(field, "holds a string with a NUL (\\u0000) character or a lone surrogate, which Postgres JSONB cannot store");
  }
  return json;
}

/** A value to put: a JSON object (not an array or a primitive), returned as its JSON text. */
export function encodeValue(field: string, value: unknown): string {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidInputError(field, `expected an object (or null to delete the item), got ${Array.isArray(value) ? "an array" : value === null ? "null" : typeof value}`);
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    throw new InvalidInputError(field, `is not JSON-serializable (${err instanceof Error ? err.message.split("\n")[0] : "unknown reason"})`);
  }
  if (json === undefined) throw new InvalidInputError(field, "is not JSON-serializable");
  return checkJsonText(field, json);
}

/** `limit` / `offset`: a non-negative integer, or the default. */
export function checkCount(field: string, value: unknown, fallback: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) throw new InvalidInputError(field, "expected a non-negative integer");
  return value;
}

/** A TTL in minutes (a positive number, or a duration string, read by the one duration parser), or undefined/null for the store's default. */
export function checkTtl(field: string, ttl: unknown): number | undefined {
  if (ttl === undefined || ttl === null) return undefined;
  const read = readDuration(ttl, { numberUnit: "minutes" });
  if ("problem" in read) throw new InvalidInputError(field, read.problem);
  return read.ms / 60_000;
}
