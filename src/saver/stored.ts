/**
 * The forms a value takes in a row of `checkpoint_blobs` (a channel's value at
 * a version) or `checkpoint_writes` (a task's write), told apart by the row's
 * `type`, so that what a thread repeats is stored once (issue #27):
 *
 * - **whole**: the serializer's type and bytes (sealed for the row by an
 *   encrypting serializer). Small values (lists included), and values of no other form.
 * - **`pg:refs`**: a plain, non-empty array by its elements (elements.ts), when
 *   they serialize to {@link BY_CONTENT_MIN_BYTES} or more: the
 *   value is its *refs area*, the hashes of its chunks and elements, with an
 *   encrypting serializer followed by a tag binding them to the row.
 * - **`pg:obj:<type>`**: a plain object whose fields holding lists are stored
 *   by their elements (LangGraph's input `{ messages: [...] }`, a `Command`'s
 *   update): a 4-byte big-endian length, the refs area of all its lists (laid
 *   out list by list, one tag at the end), then the serializer's bytes (type
 *   `<type>`, sealed for the row) of `{ k: every key in order, l: [index of a
 *   list key, its number of hashes] per list, r: the other fields }`. A
 *   `DeltaSnapshot` (the full list a delta channel stores every so many
 *   updates) takes this form too, as `{ value }` with `c: "DeltaSnapshot"`
 *   in the outline: its messages are the element rows the writes stored.
 * - **`pg:val`**: a large value stored by content: its refs area names one
 *   element row holding it, so the same value written by a task and then held
 *   by its channel (a tool result, an image in a message) is stored once.
 *
 * Element rows are those of elements.ts (channel `__elements__`, version the
 * hash, once per thread and namespace); an element row always holds a value
 * whole (or, for a chunk, hashes), never another form. Reads fetch the element
 * rows a page's values name in the same statement ({@link refsAreaSql});
 * `prune` keeps those that remaining checkpoints' values and remaining writes
 * name.
 */
import { DeltaSnapshot, type SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { DeserializationError, SerializationError } from "../errors.js";
import { dumpsForRow, isSealing, loadsForRow, type ValueRow } from "../serde/rowserde.js";
import { HASH_BYTES, REFS_TYPE, authenticate, elementRow, type ElementCodec, type OpenedRefs } from "./element-codec.js";
import { formatKey } from "../serde/paths.js";
import { encodeList, isElementList, leavesOf, rebase, type ElementRow, type StoredElement } from "./elements.js";
import { BY_CONTENT_MIN_BYTES, OBJECT_TYPE_PREFIX, VALUE_TYPE, namesElements, refsAreaOf } from "./element-names.js";

// The forms' type tags and the SQL that reads a refs area live in element-names.ts (no codec); imported from here too.
export { BY_CONTENT_MIN_BYTES, OBJECT_TYPE_PREFIX, VALUE_TYPE, hashesSql, namesElements, refsAreaOf, refsAreaSql } from "./element-names.js";


/** A value encoded for its row. */
export interface StoredValue {
  type: string;
  bytes: Uint8Array | null;
  /** Element rows to store with it (those not in `known`, nor sent already by the same statement). */
  rows: ElementRow[];
  /** Every element and chunk hash the value names (sent or not). */
  hashes: string[];
  /** What counts against `maxValueBytes`: the value as it would be stored whole, give or take framing. */
  size: number;
}

/** What encoding needs: the serializer, and its element codec when values may be stored by content. */
export interface StoreContext {
  serde: SerializerProtocol;
  codec: ElementCodec | undefined;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype;

/**
 * Encode `value` for `row`: a list by its elements, an object with lists as
 * `pg:obj`, a large value by content, anything else whole. `known`: element
 * hashes that need not be sent (stored and relied on); `sending`: hashes the
 * same statement sends already (filled in).
 */
export async function encodeStored(ctx: StoreContext, value: unknown, row: ValueRow, known: Set<string> | undefined, sending: Set<string>): Promise<StoredValue> {
  try {
    return await encodeByContent(ctx, value, row, known, sending);
  } catch (err) {
    // A value the serializer refuses: refused as a whole value would be, naming the same place in it
    // (the parts of an object are tried in another order than the serializer walks it).
    if (!(err instanceof SerializationError)) throw err;
    return whole(ctx.serde, value, row);
  }
}

async function encodeByContent(ctx: StoreContext, value: unknown, row: ValueRow, known: Set<string> | undefined, sending: Set<string>): Promise<StoredValue> {
  const { serde, codec } = ctx;
  // Certainly under BY_CONTENT_MIN_BYTES whole, and so its elements together too (a short string, a list of
  // a few): stored whole, as below, without its elements serialized and hashed first (issue 40: no cost
  // for storage by content where no value qualifies).
  if (codec?.smallerThan?.(value, BY_CONTENT_MIN_BYTES)) return whole(serde, value, row);
  if (codec && isElementList(value)) {
    // Encoded against a copy of `sending`, as an object's lists are: a list too small to be worth its element
    // rows is stored whole (below), and sends none.
    const list = await encodeList(codec, value, row, known, new Set(sending));
    if (list && list.bytes >= BY_CONTENT_MIN_BYTES) {
      return { type: REFS_TYPE, bytes: list.refs, rows: claim(list.rows, sending), hashes: list.hashes, size: list.bytes };
    }
  }
  if (codec && isPlainObject(value)) {
    const encoded = await encodeObject({ serde, codec }, value, row, known, sending);
    if (encoded) return encoded;
  }
  if (codec && isSnapshot(value)) {
    // A delta channel's snapshot names the messages its thread's writes stored already, instead of
    // holding them again (issue 41).
    const encoded = await encodeObject({ serde, codec }, { value: value.value }, row, known, sending, SNAPSHOT);
    if (encoded) return encoded;
  }
  const element = codec && value !== undefined ? await codec.element(value, row.threadId, row.checkpointNs) : undefined;
  if (codec && element) {
    if (element.size < BY_CONTENT_MIN_BYTES) {
      // Whole, from the same serialization (sealed for this row by a sealing codec).
      const [type, bytes] = element.forRow(row);
      return { type, bytes, rows: [], hashes: [], size: bytes.byteLength };
    }
    const hash = element.hash.toString("hex");
    const rows: ElementRow[] = [];
    if (!known?.has(hash) && !sending.has(hash)) {
      sending.add(hash);
      const [type, bytes] = element.stored();
      rows.push({ hash, type, bytes });
    }
    return { type: VALUE_TYPE, bytes: codec.refs(element.hash, row), rows, hashes: [hash], size: element.size };
  }
  return whole(serde, value, row);
}

/** `value` stored whole: the serializer's type and bytes (sealed for the row by a sealing serializer). */
async function whole(serde: SerializerProtocol, value: unknown, row: ValueRow): Promise<StoredValue> {
  const [type, bytes] = await dumpsForRow(serde, value, row);
  return { type, bytes, rows: [], hashes: [], size: bytes.byteLength };
}

/**
 * The rows of a form chosen after it was encoded against a copy of `sending`: those no other value
 * claimed meanwhile (a put's channels are encoded concurrently), each now marked as sent.
 */
function claim(rows: ElementRow[], sending: Set<string>): ElementRow[] {
  const mine = rows.filter((r) => !sending.has(r.hash));
  for (const r of mine) sending.add(r.hash);
  return mine;
}

/** The outline's mark of a `DeltaSnapshot` stored as `pg:obj` (its one field `value`). */
const SNAPSHOT = "DeltaSnapshot";

/** A `DeltaSnapshot` whose list can be stored by its elements (as the serializer tells one: by its `lg_name`). */
function isSnapshot(value: unknown): value is DeltaSnapshot {
  return typeof value === "object" && value !== null && !isPlainObject(value) && (value as { lg_name?: unknown }).lg_name === SNAPSHOT &&
    isElementList((value as { value?: unknown }).value);
}

/** `pg:obj` for a plain object with at least one list field whose elements are large enough; undefined otherwise. */
async function encodeObject(
  ctx: { serde: SerializerProtocol; codec: ElementCodec },
  value: Record<string, unknown>,
  row: ValueRow,
  known: Set<string> | undefined,
  sending: Set<string>,
  kind?: typeof SNAPSHOT,
): Promise<StoredValue | undefined> {
  const keys = Object.keys(value);
  const candidates = keys.filter((k) => isElementList(value[k]));
  if (candidates.length === 0) return undefined;
  // Encoded against a copy of `sending`: nothing counts as sent unless this form is chosen.
  const mine = new Set(sending);
  const encoded = await Promise.all(
    candidates.map((k) =>
      encodeList(ctx.codec, value[k] as unknown[], row, known, mine).catch((err: unknown) => {
        throw rebase(err, formatKey(k));
      }),
    ),
  );
  const listKeys = candidates.filter((_, i) => encoded[i] !== undefined);
  const lists = encoded.filter((l) => l !== undefined);
  const elementBytes = lists.reduce((n, l) => n + l.bytes, 0);
  if (elementBytes < BY_CONTENT_MIN_BYTES) return undefined;
  const rest: Record<string, unknown> = {};
  for (const k of keys) if (!listKeys.includes(k)) Object.defineProperty(rest, k, { value: value[k], enumerable: true, writable: true, configurable: true });
  const skeleton = { k: keys, l: listKeys.map((k, i) => [keys.indexOf(k), lists[i]!.slots.byteLength / HASH_BYTES]), r: rest, ...(kind ? { c: kind } : {}) };
  // The other fields as they are: ones written in LangGraph's JSON form (a cycle through this object...)
  // would come out differently without it around them, so then the object is stored whole.
  const outline = await ctx.codec.element(skeleton, row.threadId, row.checkpointNs);
  if (!outline) return undefined;
  const [innerType, inner] = outline.forRow(row);
  const area = ctx.codec.refs(Buffer.concat(lists.map((l) => l.slots)), row);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(area.byteLength, 0);
  return {
    type: `${OBJECT_TYPE_PREFIX}${innerType}`,
    bytes: Buffer.concat([length, area, inner]),
    rows: claim(lists.flatMap((l) => l.rows), sending),
    hashes: lists.flatMap((l) => l.hashes),
    size: elementBytes + inner.byteLength,
  };
}

/**
 * What a value stored by content names, read without its element rows (export shows values so,
 * each element once): a list's hashes (its chunks' and elements', in order: a chunk's element row
 * lists its elements' hashes in turn), the one element row of a large value, or an object's keys
 * in order, the hashes of each list field (by the key's index) and its other fields, decoded.
 */
export type StoredOutline =
  | { form: "refs"; hashes: string[] }
  | { form: "val"; hash: string }
  | { form: "obj"; keys: string[]; lists: Map<number, string[]>; rest: Record<string, unknown>; snapshot?: true };

/** A value stored by content, authenticated and its outline read (element rows not needed yet). */
async function openStored(ctx: StoreContext, type: string, bytes: Uint8Array, row: ValueRow): Promise<{ opened: OpenedRefs; outline: StoredOutline }> {
  const where = () => `${describeRow(row)}`;
  const { codec } = ctx;
  if (!codec) {
    throw new DeserializationError(`${where()}: a value stored by content cannot be read with this serializer (it binds values to their rows but cannot check element rows)`);
  }
  if (type === REFS_TYPE) {
    const opened = codec.open(bytes, row, where);
    return { opened, outline: { form: "refs", hashes: opened.hashes } };
  }
  if (type === VALUE_TYPE) {
    const opened = codec.open(bytes, row, where);
    if (opened.hashes.length !== 1) throw new DeserializationError(`${where()}: a value stored by content names ${opened.hashes.length} element rows, not one`);
    return { opened, outline: { form: "val", hash: opened.hashes[0]! } };
  }
  const area = refsAreaOf(type, bytes);
  if (area === undefined || 4 + area.byteLength > bytes.byteLength) throw new DeserializationError(`${where()}: an object stored by content is cut short`);
  const opened = codec.open(area, row, where);
  const skeleton = (await loadsForRow(ctx.serde, type.slice(OBJECT_TYPE_PREFIX.length), bytes.subarray(4 + area.byteLength), row)) as {
    k?: unknown;
    l?: unknown;
    r?: unknown;
    c?: unknown;
  };
  const keys = skeleton?.k;
  const lists = skeleton?.l;
  const rest = skeleton?.r;
  if (!Array.isArray(keys) || !Array.isArray(lists) || !isPlainObject(rest)) throw new DeserializationError(`${where()}: an object stored by content has no valid outline`);
  const snapshot = skeleton.c === SNAPSHOT;
  if ((skeleton.c !== undefined && !snapshot) || (snapshot && (keys.length !== 1 || keys[0] !== "value" || lists.length !== 1))) {
    throw new DeserializationError(`${where()}: an object stored by content has no valid outline`);
  }
  const byIndex = new Map<number, string[]>();
  let at = 0;
  for (const entry of lists) {
    const [index, count] = Array.isArray(entry) ? entry : [];
    if (!Number.isSafeInteger(index) || !Number.isSafeInteger(count) || count < 1 || at + count > opened.hashes.length) {
      throw new DeserializationError(`${where()}: an object stored by content names more element rows than it holds`);
    }
    byIndex.set(index as number, opened.hashes.slice(at, at + (count as number)));
    at += count as number;
  }
  if (at !== opened.hashes.length) throw new DeserializationError(`${where()}: an object stored by content holds element rows it does not name`);
  return { opened, outline: { form: "obj", keys: keys.map(String), lists: byIndex, rest, ...(snapshot ? { snapshot } : {}) } };
}

/**
 * The outline of a value stored by content in `row` ({@link StoredOutline}): authenticated like a
 * read (an encrypting serializer's tag checked), its element rows neither needed nor read. Throws
 * a `DeserializationError` as {@link decodeStoredValue} would; `type` must name elements.
 */
export async function outlineStoredValue(ctx: StoreContext, type: string, value: Uint8Array | null, row: ValueRow): Promise<StoredOutline> {
  if (!namesElements(type)) throw new DeserializationError(`${describeRow(row)}: a value of type ${JSON.stringify(type)} is stored whole, not by content`);
  return (await openStored(ctx, type, value ?? new Uint8Array(), row)).outline;
}

/**
 * Decode a value stored in `row` in any form. `find` looks an element row up
 * by hash (a missing one is a `DeserializationError` naming it, never a
 * shorter list); `onHash` sees each element and chunk hash the value names.
 */
export async function decodeStoredValue(
  ctx: StoreContext,
  type: string,
  value: Uint8Array | null,
  row: ValueRow,
  find: (hash: string) => StoredElement | undefined,
  onHash?: (hash: string) => void,
): Promise<unknown> {
  const bytes = value ?? new Uint8Array();
  if (!namesElements(type)) return loadsForRow(ctx.serde, type, bytes, row);
  const where = () => `${describeRow(row)}`;
  const { opened, outline } = await openStored(ctx, type, bytes, row);
  const elements = (hashes: string[]) =>
    opened.elements(
      leavesOf({ ...opened, hashes }, find, where, onHash).map(([hash, leaf]) => ({
        hash,
        type: leaf.type,
        bytes: leaf.value ?? new Uint8Array(),
        row: elementRow(row.threadId, row.checkpointNs, hash),
      })),
    );
  if (outline.form === "refs") return elements(outline.hashes);
  if (outline.form === "val") {
    const [one] = await elements([outline.hash]);
    return one;
  }
  const byIndex = new Map<number, unknown[]>();
  for (const [index, hashes] of outline.lists) byIndex.set(index, await elements(hashes));
  if (outline.snapshot) return new DeltaSnapshot(byIndex.get(0));
  // Own properties in their order (`__proto__` among them, as JSON.parse would make it).
  return Object.fromEntries(outline.keys.map((k, i) => [k, byIndex.has(i) ? byIndex.get(i) : outline.rest[k]]));
}

/** A row in words, for errors (ids only, never values). */
export function describeRow(row: ValueRow): string {
  const where = `thread ${JSON.stringify(row.threadId)} namespace ${JSON.stringify(row.checkpointNs)}`;
  switch (row.table) {
    case "checkpoint_blobs":
      return `channel ${JSON.stringify(row.channel)} version ${JSON.stringify(row.version)} of ${where}`;
    case "checkpoint_writes":
      return `write ${row.idx} of task ${JSON.stringify(row.taskId)} on checkpoint ${JSON.stringify(row.checkpointId)} of ${where}`;
    default:
      return `checkpoint ${JSON.stringify(row.checkpointId)} of ${where}`;
  }
}

/**
 * A value bound to its row (an `EncryptedSerializer`'s) as it must be stored in another row (a copied
 * thread's): whole values opened for `from` and sealed for `to` (the inner bytes kept); refs areas
 * re-tagged for `to` under the key that keyed their hashes (the element rows they name stay as they
 * are: an element is sealed for its own row, which a copy keeps). A serializer that binds values
 * without sealing decodes and encodes them again.
 */
export async function rebindStored(serde: SerializerProtocol, type: string, value: Uint8Array, from: ValueRow, to: ValueRow): Promise<[string, Uint8Array]> {
  const whole = async (t: string, v: Uint8Array): Promise<[string, Uint8Array]> =>
    isSealing(serde) ? serde.sealForRow(...serde.openForRow(t, v, from), to) : dumpsForRow(serde, await loadsForRow(serde, t, v, from), to);
  const retag = (area: Uint8Array): Uint8Array => {
    const found = isSealing(serde) ? authenticate(serde, area, from) : undefined;
    return found ? Buffer.concat([found.hashes, found.hasher.tag(to, found.hashes)!]) : area;
  };
  if (type === REFS_TYPE || type === VALUE_TYPE) return [type, retag(value)];
  if (type.startsWith(OBJECT_TYPE_PREFIX)) {
    const area = refsAreaOf(type, value)!;
    const [innerType, inner] = await whole(type.slice(OBJECT_TYPE_PREFIX.length), value.subarray(4 + area.byteLength));
    const tagged = retag(area);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(tagged.byteLength, 0);
    return [`${OBJECT_TYPE_PREFIX}${innerType}`, Buffer.concat([length, tagged, inner])];
  }
  return whole(type, value);
}
