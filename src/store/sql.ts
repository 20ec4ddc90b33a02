/**
 * Building one statement from parts: numbered parameters, so that the parts
 * of a batch (several searches in one statement) never share a number, and
 * the columns and namespace conditions every read shares.
 */
import { nsKey } from "./input.js";

/** Collects parameter values and hands out their `$n` placeholders. */
export class Params {
  readonly values: unknown[] = [];
  /** The placeholder of a new parameter holding `value`, cast to `type` when given. */
  add(value: unknown, type?: string): string {
    this.values.push(value);
    return type ? `$${this.values.length}::${type}` : `$${this.values.length}`;
  }
}

/**
 * Items whose namespace starts with the labels of `prefix` (whole labels:
 * `["a"]` never matches `["ab"]`): the keys from the prefix's key to it +
 * U+0002, one range of the primary key (see schema.ts).
 */
export function prefixCondition(keyColumn: string, prefix: readonly string[], params: Params): string | undefined {
  if (prefix.length === 0) return undefined;
  const key = nsKey(prefix);
  return `${keyColumn} >= ${params.add(key, "text")} AND ${keyColumn} < ${params.add(`${key}\u0002`, "text")}`;
}

/**
 * Namespaces matching a LangGraph match condition: labels at the start
 * (prefix) or the end (suffix), `"*"` matching any one label. `alias` is the
 * items' alias: a plain prefix is a key range, others read the labels.
 */
export function matchCondition(alias: string, condition: { matchType: "prefix" | "suffix"; path: readonly string[] }, params: Params): string | undefined {
  const { matchType, path } = condition;
  if (path.length === 0) return undefined;
  if (matchType === "prefix" && !path.includes("*")) return prefixCondition(`${alias}.ns_key`, path, params);
  const column = `(pg_catalog.string_to_array(${alias}.ns_key, pg_catalog.chr(1)))`;
  const parts = [`pg_catalog.cardinality(${column}) >= ${path.length}`];
  path.forEach((label, i) => {
    if (label === "*") return;
    const at = matchType === "prefix" ? `${i + 1}` : `pg_catalog.cardinality(${column}) - ${path.length - 1 - i}`;
    parts.push(`${column}[${at}] = ${params.add(label, "text")}`);
  });
  return parts.join(" AND ");
}

/** What every read returns of an item (queries.ts ItemRow), from the items' alias `a`. */
export const COLUMNS = (a: string) => `${a}.ns_key, ${a}.key, ${a}.value, ${a}.created_at, ${a}.updated_at, ${a}.ttl_minutes`;

/** Items that have not expired (an item with no `expires_at` never does). */
export const LIVE = (alias: string) => `(${alias}.expires_at IS NULL OR ${alias}.expires_at > pg_catalog.now())`;
