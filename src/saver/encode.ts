/**
 * Encoding values for the write statements, before any connection is taken:
 * each value serialized for the row it goes to, its size checked against
 * `maxValueBytes`, a statement's total against what Postgres takes in one
 * message, and all values packed into one binary parameter.
 */
import type { Checkpoint } from "@langchain/langgraph-checkpoint";
import { PayloadTooLargeError, SerializationError } from "../errors.js";
import { dumpsForRow, type ValueRow } from "../serde/rowserde.js";
import type { SaverContext } from "./context.js";
import { MAX_STATEMENT_BYTES } from "./options.js";
import { isElementList } from "./elements.js";
import type { StoreContext } from "./stored.js";


/**
 * Refuse a statement whose parts add up to more than Postgres takes in one
 * message; the error names the largest parts.
 */
export function checkStatementSize(field: string, parts: { name: string; bytes: number }[]): void {
  let total = 0;
  for (const p of parts) total += p.bytes;
  if (total <= MAX_STATEMENT_BYTES) return;
  const largest = parts
    .filter((p) => p.bytes > 0)
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, 5);
  throw new PayloadTooLargeError(
    field,
    `all values together serialize to ${total} bytes; one statement carries at most ${MAX_STATEMENT_BYTES} (Postgres refuses larger messages). ` +
      `Largest: ${largest.map((p) => `${p.name} (${p.bytes} bytes)`).join(", ")}. Store large data elsewhere and keep a reference in the state.`,
    { bytes: total, limit: MAX_STATEMENT_BYTES, largest },
  );
}

/**
 * An upper bound of what a statement sends, cheap enough for every put: the
 * bytes of the values, and of the strings as UTF-8 (at most 3 per UTF-16
 * unit) with array quoting. Only above the limit is it counted exactly.
 */
export function boundBytes(values: readonly (readonly (Uint8Array | null)[])[], strings: readonly (readonly string[])[]): number {
  let n = 0;
  for (const list of values) for (const v of list) n += v?.byteLength ?? 0;
  for (const list of strings) for (const s of list) n += s.length * 3 + 4;
  return n;
}

/**
 * Values travel as one binary parameter: pg sends a Buffer as binary, but a
 * bytea[] as hex text. Offsets and lengths (-1: NULL) cut it apart in SQL.
 */
export function pack(values: readonly (Uint8Array | null)[]): { offsets: number[]; lengths: number[]; bytes: Buffer } {
  const offsets = new Array<number>(values.length);
  const lengths = new Array<number>(values.length);
  let total = 0;
  values.forEach((v, i) => {
    offsets[i] = total;
    lengths[i] = v === null ? -1 : v.byteLength;
    total += v === null ? 0 : v.byteLength;
  });
  const bytes = Buffer.allocUnsafe(total);
  values.forEach((v, i) => {
    if (v !== null) bytes.set(v, offsets[i]);
  });
  return { offsets, lengths, bytes };
}

/** A serializer's error, naming `field`: the saver input that held the value. */
export function named(err: unknown, field: string): unknown {
  return err instanceof SerializationError && err.field === undefined ? new SerializationError(err.message, { cause: err.cause, field, path: err.path }) : err;
}

/**
 * Refuse a value that serializes to more than `maxValueBytes`, naming the
 * saver input that held it: its bytes, or their count (a list stored by its
 * elements counts them together, what its whole value would take, give or
 * take framing).
 */
export function checkSize(ctx: SaverContext, field: string, value: Uint8Array | number): void {
  const bytes = typeof value === "number" ? value : value.byteLength;
  if (bytes > ctx.maxValueBytes) {
    throw new PayloadTooLargeError(field, `serializes to ${bytes} bytes; the limit (maxValueBytes) is ${ctx.maxValueBytes}`, {
      bytes,
      limit: ctx.maxValueBytes,
      largest: [{ name: field, bytes }],
    });
  }
}

/**
 * The channel values no blob gives back, serialized together as one map;
 * none: nulls. Those of channels without a version (no blob can name them),
 * and those that are `undefined`: a blob holding `undefined` reads as no value
 * (LangGraph restores a channel from `undefined` as empty, so a later
 * checkpoint names that blob without holding the channel, as MemorySaver's
 * do), so a checkpoint that does hold one says so here.
 */
export async function encodeUnversioned(
  ctx: SaverContext,
  what: { values: Record<string, unknown>; versions: Checkpoint["channel_versions"] | undefined; field: string; row: ValueRow },
): Promise<{ type: string | null; bytes: Uint8Array | null }> {
  const { values, versions, field, row } = what;
  const entries = Object.entries(values).filter(([channel, value]) => value === undefined || !Object.prototype.hasOwnProperty.call(versions ?? {}, channel));
  if (entries.length === 0) return { type: null, bytes: null };
  const [type, bytes] = await dumpsForRow(ctx.serde, Object.fromEntries(entries), row);
  checkSize(ctx, field, bytes);
  return { type, bytes };
}

/**
 * How values are stored with this saver: by content (stored.ts) when element storage is on and the
 * serializer allows it (found out once, with the first value), else whole.
 */
export async function storeContext(ctx: SaverContext, sample: unknown): Promise<StoreContext> {
  const codec = ctx.elements ? await ctx.elements.codec(ctx.serde, isElementList(sample) ? sample[0] : sample) : undefined;
  return { serde: ctx.serde, codec };
}
