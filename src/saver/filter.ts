/**
 * `list({ filter })`: metadata key/value pairs that must all match exactly.
 *
 * The SQL condition runs on the JSONB projection of the metadata, which is
 * not exact where JSONB cannot hold a value (NUL and lone surrogates are
 * stored as U+FFFD there; see metadata.ts), so it only narrows the rows. Each
 * row it returns is then compared with the filter on its exact, decoded
 * metadata, and rows that only looked alike are skipped (`list` keeps paging
 * past them). Filter values are JSON values; anything else is refused before
 * any SQL, naming the key.
 */
import { InvalidInputError } from "../errors.js";
import { projectJson } from "../serde/metadata.js";
import { LONE_SURROGATE } from "../validate.js";

/** How deep a filter value may nest (arrays and objects). */
export const MAX_FILTER_DEPTH = 64;

const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, "g");

export interface MetadataFilter {
  /** For the SQL condition: the projected filter, its keys, and each value as JSON text. */
  sql: { json: unknown; keys: string[]; values: string[] };
  /** Whether a row's exact metadata matches every pair. */
  matches(metadata: unknown): boolean;
}

/**
 * Check and prepare a `list` filter. Pairs whose value is `undefined` are
 * ignored (no constraint); no pairs at all gives `undefined`.
 *
 * @example
 * ```ts
 * const f = readFilter({ source: "loop", step: 2 }, "list options.filter");
 * f?.matches({ source: "loop", step: 2, parents: {} }); // true
 * ```
 */
export function readFilter(filter: unknown, field: string): MetadataFilter | undefined {
  if (filter === undefined || filter === null) return undefined;
  if (typeof filter !== "object" || Array.isArray(filter)) throw new InvalidInputError(field, "expected an object of metadata key/value pairs");
  const entries = Object.entries(filter).filter(([, v]) => v !== undefined);
  if (entries.length === 0) return undefined;
  for (const [key, value] of entries) checkValue(`${field}[${JSON.stringify(key)}]`, value);
  return {
    sql: {
      json: projectJson(Object.fromEntries(entries)),
      // As the projection stores them: a key holding NUL would make Postgres refuse the whole statement.
      keys: entries.map(([key]) => key.replace(/\u0000/g, "\uFFFD").replace(LONE_SURROGATES, "\uFFFD")),
      values: entries.map(([, value]) => JSON.stringify(projectJson(value))),
    },
    matches(metadata: unknown): boolean {
      if (metadata === null || typeof metadata !== "object") return false;
      const record = metadata as Record<string, unknown>;
      return entries.every(([key, value]) => Object.prototype.hasOwnProperty.call(record, key) && same(record[key], value));
    },
  };
}

function checkValue(field: string, value: unknown, depth = 0): void {
  if (depth > MAX_FILTER_DEPTH) throw new InvalidInputError(field, `nests deeper than ${MAX_FILTER_DEPTH} levels`);
  switch (typeof value) {
    case "string":
    case "boolean":
      return;
    case "number":
      if (Number.isFinite(value)) return;
      break;
    case "object": {
      if (value === null) return;
      if (Array.isArray(value)) {
        for (const item of value) checkValue(field, item, depth + 1);
        return;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) break;
      for (const item of Object.values(value)) checkValue(field, item, depth + 1);
      return;
    }
  }
  throw new InvalidInputError(
    field,
    `holds ${describe(value)}; filter values are JSON values (null, booleans, finite numbers, strings, arrays, plain objects)`,
  );
}

function describe(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (value !== null && typeof value === "object") {
    const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
    return `an instance of ${typeof name === "string" && name ? name : "a class"}`;
  }
  return `a ${typeof value}`;
}

/** Exact equality of a stored value and a (checked) filter value: strict for primitives, structural for arrays and objects. */
function same(stored: unknown, wanted: unknown): boolean {
  if (wanted === null || typeof wanted !== "object") return stored === wanted;
  if (stored === null || typeof stored !== "object") return false;
  if (Array.isArray(wanted)) {
    return Array.isArray(stored) && stored.length === wanted.length && wanted.every((item, i) => same(stored[i], item));
  }
  if (Array.isArray(stored)) return false;
  const proto = Object.getPrototypeOf(stored) as unknown;
  if (proto !== Object.prototype && proto !== null) return false;
  const keys = Object.keys(wanted);
  const record = stored as Record<string, unknown>;
  return (
    Object.keys(record).length === keys.length &&
    keys.every((key) => Object.prototype.hasOwnProperty.call(record, key) && same(record[key], (wanted as Record<string, unknown>)[key]))
  );
}
