/**
 * Building one statement from parts: numbered parameters, so that the parts
 * of a batch (several searches in one statement) never share a number, and
 * the namespace conditions every read shares.
 */

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
 * `["a"]` never matches `["ab"]`). The range lets the primary key's btree
 * find them; the slice comparison is the exact test. An element that
 * follows `last` byte-wise and starts with it is `last` + U+0001 (text
 * cannot hold U+0000), so every namespace with the prefix is below it.
 */
export function prefixCondition(column: string, prefix: readonly string[], params: Params): string | undefined {
  if (prefix.length === 0) return undefined;
  const upper = [...prefix.slice(0, -1), `${prefix[prefix.length - 1]}\u0001`];
  const p = params.add(prefix, "text[]");
  return `${column} >= ${p} AND ${column} < ${params.add(upper, "text[]")} AND ${column}[1:${prefix.length}] = ${p}`;
}

/**
 * Namespaces matching a LangGraph match condition: labels at the start
 * (prefix) or the end (suffix), `"*"` matching any one label.
 */
export function matchCondition(column: string, condition: { matchType: "prefix" | "suffix"; path: readonly string[] }, params: Params): string | undefined {
  const { matchType, path } = condition;
  if (path.length === 0) return undefined;
  const parts = [`pg_catalog.cardinality(${column}) >= ${path.length}`];
  if (matchType === "prefix" && !path.includes("*")) return prefixCondition(column, path, params);
  path.forEach((label, i) => {
    if (label === "*") return;
    const at = matchType === "prefix" ? `${i + 1}` : `pg_catalog.cardinality(${column}) - ${path.length - 1 - i}`;
    parts.push(`${column}[${at}] = ${params.add(label, "text")}`);
  });
  return parts.join(" AND ");
}

/** Items that have not expired (an item with no `expires_at` never does). */
export const LIVE = (alias: string) => `(${alias}.expires_at IS NULL OR ${alias}.expires_at > pg_catalog.now())`;
