/**
 * What the statements built per call (searches and namespace listings, several of which share one
 * statement in a batch) are written with: numbered parameters, so that the parts of one statement
 * never share a number, and the two conditions only some inputs make: a namespace prefix, and
 * ` AND ` before a condition that may be absent.
 */
import { nsKey } from "../input.js";

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
 * `keyColumn` (a namespace key) within the namespaces under `prefix`, whole labels only (`["a"]`
 * never matches `["ab"]`): the keys from the prefix's key to it + U+0002, one range of the primary
 * key (see schema.ts). Two parameters; undefined (and none) for an empty prefix, which is every
 * namespace.
 */
export function prefixRange(keyColumn: string, prefix: readonly string[], params: Params): string | undefined {
  if (prefix.length === 0) return undefined;
  const key = nsKey(prefix);
  return `${keyColumn} >= ${params.add(key, "text")} AND ${keyColumn} < ${params.add(`${key}\u0002`, "text")}`;
}

/** ` AND condition`, or nothing when there is no condition. */
export const and = (condition: string | undefined): string => (condition ? ` AND ${condition}` : "");
