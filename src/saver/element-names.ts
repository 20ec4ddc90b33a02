/**
 * The names element storage reserves in the tables (element-codec.ts,
 * stored.ts): its channel, the type tags of the forms a stored value takes,
 * the transaction setting migration 0008's guard reads, and the SQL that
 * reads a refs area. A module of their own, so that what only names them
 * (migrate, prune, the adoption checks) loads none of the codec: its
 * serializer brings @langchain/* (most of the CLI's start-up).
 */

/** Type tag of a refs value (a list channel's version, or a chunk). */
export const REFS_TYPE = "pg:refs";
/** The reserved channel of element rows. */
export const ELEMENTS_CHANNEL = "__elements__";
/**
 * The setting, and its value, by which a transaction says it knows what refers to element rows:
 * migration 0008's trigger refuses to delete one otherwise (issue 26, row 5).
 */
export const KNOWS_ELEMENTS = { setting: "langgraph_checkpoint_pg.elements", value: "known" } as const;
/**
 * SQL: say so for the rest of the transaction. A statement of its own (`SET LOCAL`), not a
 * `set_config()` call: on Citus, with `citus.propagate_set_commands = 'local'`, the coordinator
 * passes a `SET LOCAL` on to the workers the transaction writes on, where the guard runs.
 */
export const KNOWS_ELEMENTS_SQL = `SET LOCAL ${KNOWS_ELEMENTS.setting} = '${KNOWS_ELEMENTS.value}'`;
/** Bytes of one hash, and of a refs value's tag. */
export const HASH_BYTES = 16;

/** Type of a value stored by content (one element row). */
export const VALUE_TYPE = "pg:val";
/** Type prefix of an object whose list fields are stored by their elements. */
export const OBJECT_TYPE_PREFIX = "pg:obj:";
/**
 * Lists, objects with lists, and single values are stored by content only from
 * this size on (what their elements, or the value, serialize to): below it a
 * row of their own (about 200 bytes with its index entry) costs more than it
 * saves, and a put or a write sends and indexes rows for nothing (a 10-node
 * graph's list of ten short strings was 20 element rows an invoke, issue 40).
 */
export const BY_CONTENT_MIN_BYTES = 256;

/** Whether a row's value names element rows (a refs area). */
export function namesElements(type: string): boolean {
  return type === REFS_TYPE || type === VALUE_TYPE || type.startsWith(OBJECT_TYPE_PREFIX);
}

/**
 * SQL: the refs area of a value of type `t` and bytes `v` (SQL expressions), or NULL
 * when the value names no element row. Its length is a whole number of hashes.
 */
export function refsAreaSql(t: string, v: string): string {
  return `CASE WHEN ${t} = '${REFS_TYPE}' OR ${t} = '${VALUE_TYPE}' THEN ${v}
            WHEN ${t} LIKE '${OBJECT_TYPE_PREFIX}%' AND pg_catalog.length(${v}) >= 4
            THEN pg_catalog.substring(${v}, 5, (pg_catalog.get_byte(${v}, 0) << 24) + (pg_catalog.get_byte(${v}, 1) << 16)
                                             + (pg_catalog.get_byte(${v}, 2) << 8) + pg_catalog.get_byte(${v}, 3)) END`;
}

/**
 * SQL: `CROSS JOIN LATERAL` the hashes (lowercase hex) in refs area `area` (an SQL expression; NULL:
 * none), one row each, as `<alias>.h`. Split by `regexp_matches`, whose planner estimate is 10 rows a
 * call: `generate_series` over the bytes is estimated at 1,000, which made the plans of the reads look
 * thousands of times costlier than they are, and Postgres spent seconds compiling them (JIT).
 */
export function hashesSql(area: string, alias: string): string {
  // '.{32}', not '[0-9a-f]{32}': the hex text holds nothing else, and a character class is 7 times slower here.
  return `CROSS JOIN LATERAL (SELECT m.x[1] AS h FROM pg_catalog.regexp_matches(pg_catalog.encode(${area}, 'hex'), '.{${2 * HASH_BYTES}}', 'g') AS m(x)) AS ${alias}`;
}

/** The refs area of a stored value, as {@link refsAreaSql} reads it; undefined when it names no element row. */
export function refsAreaOf(type: string, value: Uint8Array | null): Uint8Array | undefined {
  if (value === null) return undefined;
  if (type === REFS_TYPE || type === VALUE_TYPE) return value;
  if (type.startsWith(OBJECT_TYPE_PREFIX) && value.byteLength >= 4) {
    const length = Buffer.from(value.buffer, value.byteOffset, value.byteLength).readUInt32BE(0);
    return value.subarray(4, 4 + length);
  }
  return undefined;
}
