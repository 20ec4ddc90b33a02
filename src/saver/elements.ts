/**
 * List-valued channels stored by their elements (content-addressed), so a
 * chat's `messages` costs each message once per lineage, not once per step.
 *
 * ## Format (in `checkpoint_blobs`, no table of its own)
 *
 * - An **element row**: channel {@link ELEMENTS_CHANNEL}, version = the
 *   element's hash (32 lowercase hex digits), type and value as the
 *   serializer made them for the element alone (an encrypting one seals
 *   them for this row). Stored once per (thread, namespace); a put sending
 *   one already stored touches it (`ON CONFLICT` bumps its row_version), so
 *   a prune that found it unreferenced on an older snapshot leaves it.
 * - A **refs value** (type {@link REFS_TYPE}): 16-byte hashes one after
 *   another (with an encrypting serializer a list's own refs value ends in a
 *   16-byte tag). A list channel's version is a refs value; so is a **chunk**, an
 *   element row holding the hashes of {@link CHUNK} consecutive elements. A
 *   list of n elements is stored as the hashes of its full chunks (elements
 *   0-31, 32-63, ...: an appended element leaves them unchanged) followed by
 *   the hashes of the rest: about n/32 + 16 hashes per version instead of n.
 *   A chunk holds element hashes only, never chunk hashes (one level).
 * - The hash: the first 16 bytes of SHA-256 over the element's type, a NUL,
 *   and its serialized bytes; keyed, and the refs value authenticated, with
 *   an encrypting serializer (element-codec.ts, which also checks every row
 *   read against its hash).
 *
 * A read expands refs values in SQL (sql/read.ts), in the same
 * statement; {@link resolveList} puts the list back together.
 *
 * ## What a put sends
 *
 * Elements the parent checkpoint already refers to are not sent again: the
 * saver remembers, per lineage, the hashes of the last checkpoint it wrote or
 * read ({@link ElementMemory}). Every element is serialized and hashed at
 * each put all the same (an object may have changed in place; only its bytes
 * tell), so a put's CPU cost still grows with the list; what it sends and
 * stores does not.
 * A put whose parent is stored (what the put statement checks, under the
 * lineage's head lock, which prune also takes) can rely on the parent's
 * element rows: prune deletes an element row only when no remaining
 * checkpoint refers to it. Any other put sends every element.
 *
 * Used, when turned on (`elementStorage: true`), for plain arrays whose
 * elements serialize to `BY_CONTENT_MIN_BYTES` or more (smaller ones are
 * stored whole: stored.ts), with serializers whose element hashes are stable (the
 * same value, the same hash): plain ones, and encrypting ones (which seal
 * each element for its row, element-codec.ts). Others store whole values,
 * and say so once.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { DeserializationError, SerializationError } from "../errors.js";
import type { ValueRow } from "../serde/rowserde.js";
import { ELEMENTS_CHANNEL, HASH_BYTES, REFS_TYPE, elementCodec, elementRow, splitHashes, type ElementCodec, type OpenedRefs } from "./element-codec.js";

/**
 * The reserved channel of element rows (no LangGraph channel is called so; the saver refuses it as a
 * channel name), the type tag of a refs value (a list channel's version, or a chunk), the bytes of one hash.
 */
export { ELEMENTS_CHANNEL, HASH_BYTES, REFS_TYPE };
/** Elements per chunk. */
export const CHUNK = 32;

/** An element row to insert. */
export interface ElementRow {
  hash: string;
  type: string;
  bytes: Uint8Array;
}

/**
 * Whether `value` is stored element by element: a plain, non-empty array without holes, none of whose
 * elements is a function or a symbol. Those serialize differently alone than inside an array (JSON,
 * which the default serializer follows for them, writes them as null in an array): such a list is
 * stored whole, so it reads back as it would have.
 */
export function isElementList(value: unknown): value is unknown[] {
  if (!Array.isArray(value) || value.length === 0 || Object.getPrototypeOf(value) !== Array.prototype) return false;
  for (let i = 0; i < value.length; i++) {
    if (!(i in value)) return false;
    const kind = typeof value[i];
    if (kind === "function" || kind === "symbol") return false;
  }
  return true;
}

/**
 * A serializer's error about an element as the whole value's error would be: its path inside the
 * element (`$.link`) put under the element's place (`$[2].link`; `at`: `[2]`, or `.items[2]`).
 */
export function rebase(err: unknown, at: string): unknown {
  if (!(err instanceof SerializationError) || err.path === undefined || !err.path.startsWith("$")) return err;
  const path = `$${at}${err.path.slice(1)}`;
  const message = err.message.endsWith(` at ${err.path}`) ? `${err.message.slice(0, -err.path.length)}${path}` : err.message;
  return new SerializationError(message, { cause: err.cause, field: err.field, path });
}

/** Whether `serde` can store and read lists by their elements (element-codec.ts). */
export function storesElements(serde: SerializerProtocol): boolean {
  return elementCodec(serde) !== undefined;
}

/** What a checkpoint's own values are, as a put or a read learned it (for {@link ElementMemory}). */
export interface CheckpointValues {
  /** Channels it stores by content, with the hashes each names. */
  lists: Map<string, string[]>;
  /** Channels whose value it stores (a blob that is not `empty`) or not, where known. */
  stores: Map<string, boolean>;
  /** Its delta channels with a version ({@link deltaChannels}). */
  delta: string[];
}

/** What the saver remembers of the last checkpoint of a lineage it wrote or read. */
interface Remembered {
  checkpointId: string;
  /** Per channel stored by content: the hashes its value names. */
  byChannel: Map<string, string[]>;
  /** Per channel: whether the checkpoint stores its value, where known. */
  stores: Map<string, boolean>;
  /** Per channel: the hashes the checkpoint's committed writes name. */
  written: Map<string, Set<string>>;
  /**
   * Per delta channel the checkpoint does not store (LangGraph rebuilds it from the ancestors: prune
   * keeps that walk with the checkpoint, prune-sql.ts `needs`): the hashes the walk's seed and writes
   * name, where known.
   */
  walks: Map<string, Set<string>>;
  /** Those delta channels. */
  needs: Set<string>;
}

/**
 * A delta channel's snapshot read by its elements (a seed of `getDeltaChannelHistory`): its row's
 * type and bytes, and the element rows it names, each checked against its hash when it was read.
 */
export interface CachedSeed {
  type: string;
  value: Uint8Array;
  /** By {@link elementKey}. */
  elements: Map<string, StoredElement>;
}

/** The bytes the seeds kept by {@link ElementMemory} may take in all (the oldest is forgotten first). */
const SEED_CACHE_BYTES = 64 * 1024 * 1024;

/**
 * The delta channels of a checkpoint that have a version: the keys of its metadata's
 * `counters_since_delta_snapshot` (LangGraph's `DeltaChannel`s) among its `channel_versions`.
 */
export function deltaChannels(channelVersions: object | undefined, metadata: unknown): string[] {
  const counters = (metadata as { counters_since_delta_snapshot?: unknown } | undefined)?.counters_since_delta_snapshot;
  if (typeof counters !== "object" || counters === null || Array.isArray(counters)) return [];
  return Object.keys(counters).filter((ch) => channelVersions !== undefined && Object.prototype.hasOwnProperty.call(channelVersions, ch));
}

/**
 * What the saver remembers to avoid sending elements again: per lineage, the
 * hashes the last checkpoint it wrote or read relies on: its values', its
 * committed writes', and those of the walks its delta channels are rebuilt
 * from (a delta channel's snapshot then names the messages its writes
 * stored, sending none again). Bounded: at most `maxLineages` lineages (the
 * oldest is forgotten first).
 */
export class ElementMemory {
  readonly #lineages = new Map<string, Remembered>();
  readonly #maxLineages: number;
  /**
   * Snapshots read by their elements, by lineage, then channel and version: the next history read
   * of the lineage need not fetch their element rows again (a snapshot's row names its elements by
   * their hashes, so the same row bytes are the same content). With their size, oldest first.
   */
  readonly #seeds = new Map<string, Map<string, { seed: CachedSeed; bytes: number }>>();
  #seedBytes = 0;
  /** How lists are stored with each serializer, if they can be (found out once per serializer, at its first list). */
  readonly #codecs = new WeakMap<SerializerProtocol, Promise<ElementCodec | undefined>>();

  constructor(maxLineages = 10_000) {
    this.#maxLineages = maxLineages;
  }

  /**
   * How lists are stored by their elements with `serde`; undefined if they
   * cannot be: a serializer that binds values to their rows without sealing
   * inner bytes, or one that serializes one value to different bytes twice
   * (an unchanged element would get a new hash at every put and be stored
   * again each time, more than a whole value costs). Such a saver stores
   * whole values, and says so once.
   */
  codec(serde: SerializerProtocol, sample: unknown): Promise<ElementCodec | undefined> {
    let found = this.#codecs.get(serde);
    if (!found) {
      found = (async () => {
        const codec = elementCodec(serde);
        const reason = !codec
          ? "the serializer binds values to their rows but cannot seal an element's bytes or key its hash"
          : !(await codec.deterministic(sample))
            ? "the serializer gives the same value different bytes each time"
            : undefined;
        if (reason) process.emitWarning(`elementStorage: ${reason}, so lists are stored whole`, { code: "LANGGRAPH_CHECKPOINT_PG_ELEMENTS" });
        return reason ? undefined : codec;
      })();
      this.#codecs.set(serde, found);
      // A value that fails to serialize decides nothing: the next list asks again.
      found.catch(() => this.#codecs.delete(serde));
    }
    return found;
  }

  /**
   * The hashes checkpoint `checkpointId` of the lineage relies on, if remembered: its values', its
   * committed pending writes', and its delta channels' walks' (all stay as long as it does).
   */
  known(lineage: string, checkpointId: string | null): Set<string> | undefined {
    if (checkpointId === null) return undefined;
    const entry = this.#lineages.get(lineage);
    if (entry?.checkpointId !== checkpointId) return undefined;
    const all = new Set<string>();
    for (const hashes of entry.byChannel.values()) for (const h of hashes) all.add(h);
    for (const hashes of entry.written.values()) for (const h of hashes) all.add(h);
    for (const hashes of entry.walks.values()) for (const h of hashes) all.add(h);
    return all;
  }

  /**
   * Remember the hashes a committed `putWrites` on checkpoint `checkpointId` named, per channel: the
   * put of its child need not send them again. They stay as long as that checkpoint's writes do:
   * prune deletes the writes of a checkpoint only with it, and keeps the element rows remaining
   * writes name.
   */
  rememberWrites(lineage: string, checkpointId: string, byChannel: Iterable<[string, Iterable<string>]>): void {
    const entry = this.#lineages.get(lineage);
    if (entry?.checkpointId !== checkpointId) return;
    for (const [channel, hashes] of byChannel) {
      const set = entry.written.get(channel) ?? new Set<string>();
      for (const h of hashes) set.add(h);
      entry.written.set(channel, set);
    }
  }

  /**
   * Remember the walks a delta-channel history read of checkpoint `checkpointId` made: per channel,
   * the hashes its seed and writes name (only for the delta channels the checkpoint does not store,
   * whose walk prune keeps with it).
   */
  rememberWalks(lineage: string, checkpointId: string, byChannel: Map<string, Set<string>>): void {
    const entry = this.#lineages.get(lineage);
    if (entry?.checkpointId !== checkpointId) return;
    for (const [channel, hashes] of byChannel) if (entry.needs.has(channel)) entry.walks.set(channel, hashes);
  }

  /**
   * Remember what checkpoint `checkpointId` relies on. `values`: what it stores (a put: the channels
   * it writes; a read: all). When its parent is the remembered checkpoint, what it does not write
   * is the parent's, and a delta channel's walk is one step longer than the parent's: the parent's
   * writes of the channel, then the parent's value (a seed) or the parent's own walk.
   */
  rememberCheckpoint(lineage: string, checkpointId: string, parentId: string | null, values: CheckpointValues): void {
    const previous = this.#lineages.get(lineage);
    const parent = previous && parentId !== null && previous.checkpointId === parentId ? previous : undefined;
    const byChannel = new Map(parent?.byChannel);
    const stores = new Map(parent?.stores);
    for (const [channel, stored] of values.stores) {
      stores.set(channel, stored);
      byChannel.delete(channel);
    }
    for (const [channel, hashes] of values.lists) byChannel.set(channel, hashes);
    const needs = new Set(values.delta.filter((ch) => stores.get(ch) === false));
    const walks = new Map<string, Set<string>>();
    if (parent) {
      for (const channel of needs) {
        const before = parent.stores.get(channel) === true ? (parent.byChannel.get(channel) ?? []) : parent.walks.get(channel);
        if (before === undefined) continue;
        walks.set(channel, new Set([...before, ...(parent.written.get(channel) ?? [])]));
      }
    }
    this.#lineages.delete(lineage);
    this.#lineages.set(lineage, { checkpointId, byChannel, stores, written: new Map(), walks, needs });
    if (this.#lineages.size > this.#maxLineages) this.#lineages.delete(this.#lineages.keys().next().value!);
  }

  /** The snapshots of `channels` kept for a lineage: the (channel, version) pairs a history read may skip the elements of. */
  seedsOf(lineage: string, channels: string[]): { channels: string[]; versions: string[] } {
    const out = { channels: [] as string[], versions: [] as string[] };
    for (const key of this.#seeds.get(lineage)?.keys() ?? []) {
      const [channel, version] = key.split("\u0000") as [string, string];
      if (channels.includes(channel)) {
        out.channels.push(channel);
        out.versions.push(version);
      }
    }
    return out;
  }

  /** A kept snapshot, if any (and now the newest). */
  seed(lineage: string, channel: string, version: string): CachedSeed | undefined {
    const seeds = this.#seeds.get(lineage);
    const entry = seeds?.get(`${channel}\u0000${version}`);
    if (!entry) return undefined;
    this.#seeds.delete(lineage);
    this.#seeds.set(lineage, seeds!);
    return entry.seed;
  }

  /** Keep a snapshot read by its elements (one per lineage and channel: the newest replaces it). */
  rememberSeed(lineage: string, channel: string, version: string, seed: CachedSeed): void {
    let bytes = seed.value.byteLength;
    for (const e of seed.elements.values()) bytes += e.value?.byteLength ?? 0;
    if (bytes > SEED_CACHE_BYTES / 4) return;
    const seeds = this.#seeds.get(lineage) ?? new Map<string, { seed: CachedSeed; bytes: number }>();
    for (const [key, old] of seeds) {
      if (key.startsWith(`${channel}\u0000`)) {
        seeds.delete(key);
        this.#seedBytes -= old.bytes;
      }
    }
    seeds.set(`${channel}\u0000${version}`, { seed, bytes });
    this.#seedBytes += bytes;
    this.#seeds.delete(lineage);
    this.#seeds.set(lineage, seeds);
    for (const [key, oldest] of this.#seeds) {
      if (this.#seedBytes <= SEED_CACHE_BYTES) break;
      for (const e of oldest.values()) this.#seedBytes -= e.bytes;
      this.#seeds.delete(key);
    }
  }

  /** Forget a thread (deleted). */
  forgetThread(threadId: string): void {
    for (const key of this.#lineages.keys()) if (key.startsWith(`${threadId}\u0000`)) this.#lineages.delete(key);
    for (const [key, seeds] of this.#seeds) {
      if (!key.startsWith(`${threadId}\u0000`)) continue;
      for (const e of seeds.values()) this.#seedBytes -= e.bytes;
      this.#seeds.delete(key);
    }
  }
}

/** The key of an element row among those a read returned: thread, namespace, hash. */
export const elementKey = (threadId: string, checkpointNs: string, hash: string): string => `${threadId}\u0000${checkpointNs}\u0000${hash}`;

/** The memory key of a lineage. */
export function lineageKey(threadId: string, checkpointNs: string): string {
  return `${threadId}\u0000${checkpointNs}`;
}

/**
 * A list encoded: its refs value (its slots, tagged for its row by a sealing codec), its slots (the
 * hashes of its full chunks, then of the elements after them), the rows to send, every hash it refers
 * to (elements and chunks), its elements' stored size in all.
 */
export interface EncodedList {
  refs: Buffer;
  slots: Buffer;
  rows: ElementRow[];
  hashes: string[];
  bytes: number;
}

/**
 * Encode a list stored in `row` as refs; rows for elements and chunks not in
 * `known` (nor already in `sending`, the rows this put sends for other
 * channels). `bytes` is what its elements take stored, all of them, sent or
 * not: a list counts against `maxValueBytes` as its whole value would.
 * Undefined (nothing added to `sending`) when the list must be stored whole.
 */
export async function encodeList(codec: ElementCodec, list: unknown[], row: ValueRow, known: Set<string> | undefined, sending: Set<string>): Promise<EncodedList | undefined> {
  const sent = (hex: string) => known?.has(hex) || sending.has(hex);
  // Every element is serialized: its object may have changed in place since it was last stored
  // (LangGraph's own tests edit a message and hand the same object to updateState). In one pass
  // where the codec allows (its bytes copied only for rows not sent yet), else one by one.
  const dumped = new Array<{ hash: Buffer; hex: string; size: number; stored: () => [string, Uint8Array] }>(list.length);
  const each = codec.each?.(list, (i, hash, size, stored) => {
    const hex = hash.toString("hex");
    const row = sent(hex) ? undefined : stored();
    dumped[i] = { hash, hex, size, stored: () => row! };
  });
  // An element the serializer writes differently alone (a cycle through the list...): the list stays whole.
  if (each === false) return undefined;
  if (each === undefined) {
    const all = await Promise.all(
      list.map((element, i) =>
        codec.element(element, row.threadId, row.checkpointNs).catch((err: unknown) => {
          throw rebase(err, `[${i}]`);
        }),
      ),
    );
    if (all.some((d) => d === undefined)) return undefined;
    all.forEach((d, i) => (dumped[i] = { ...d!, hex: d!.hash.toString("hex") }));
  }
  const rows: ElementRow[] = [];
  const hashes: string[] = [];
  let bytes = 0;
  for (const d of dumped) {
    bytes += d.size;
    if (!sent(d.hex)) {
      sending.add(d.hex);
      const [type, stored] = d.stored();
      rows.push({ hash: d.hex, type, bytes: stored });
    }
  }
  const laid = layout(codec, dumped.map((d) => d.hash), row);
  for (const chunk of laid.chunks) {
    hashes.push(chunk.hash);
    if (!known?.has(chunk.hash) && !sending.has(chunk.hash)) {
      sending.add(chunk.hash);
      rows.push(chunk);
    }
  }
  for (const d of dumped) hashes.push(d.hex);
  return { refs: laid.refs, slots: laid.slots, rows, hashes, bytes };
}

/**
 * The refs value of a list stored in `row` whose elements have the hashes
 * `elements`, and its chunk rows: the hashes of its full chunks, then those
 * of the elements after them.
 */
export function layout(codec: ElementCodec, elements: Buffer[], row: ValueRow): { refs: Buffer; slots: Buffer; chunks: ElementRow[] } {
  const full = Math.floor(elements.length / CHUNK);
  const parts: Buffer[] = [];
  const chunks: ElementRow[] = [];
  for (let c = 0; c < full; c++) {
    const chunk = Buffer.concat(elements.slice(c * CHUNK, (c + 1) * CHUNK));
    const chunkHash = codec.chunkHash(chunk);
    parts.push(chunkHash);
    chunks.push({ hash: chunkHash.toString("hex"), type: REFS_TYPE, bytes: chunk });
  }
  for (let i = full * CHUNK; i < elements.length; i++) parts.push(elements[i]!);
  const slots = Buffer.concat(parts);
  return { refs: codec.refs(slots, row), slots, chunks };
}

/** The hashes in a refs value as the SQL that expands it sees them, in order (with a sealing serializer, the last is the tag). */
export function refsOf(value: Uint8Array, where: () => string): string[] {
  return splitHashes(value, where);
}

/** A stored element row, as a read returns it. */
export interface StoredElement {
  type: string;
  value: Uint8Array | null;
}

/**
 * The elements of a refs value, in order: the refs value authenticated,
 * chunks expanded, each element checked against its hash and decoded (a new
 * object per call: lists of two checkpoints share no objects). `find` looks
 * an element row up by hash; a missing one is an error naming the lineage
 * and the hash, never a shorter list; one that does not match its hash is an
 * error too (element-codec.ts).
 */
export async function resolveList(
  serde: SerializerProtocol,
  refs: Uint8Array,
  lineage: { threadId: string; checkpointNs: string; channel: string; version: string },
  find: (hash: string) => StoredElement | undefined,
  onHash?: (hash: string) => void,
): Promise<unknown[]> {
  const { threadId, checkpointNs, channel, version } = lineage;
  const where = () => `channel ${JSON.stringify(channel)} version ${JSON.stringify(version)} of thread ${JSON.stringify(threadId)} namespace ${JSON.stringify(checkpointNs)}`;
  const codec = elementCodec(serde);
  if (!codec) {
    throw new DeserializationError(`${where()}: a list stored by its elements cannot be read with this serializer (it binds values to their rows but cannot check an element list)`);
  }
  const opened = codec.open(refs, { table: "checkpoint_blobs", threadId, checkpointNs, channel, version }, where);
  const leaves = leavesOf(opened, find, where, onHash);
  return Promise.all(leaves.map(([hash, leaf]) => opened.element(hash, leaf.type, leaf.value ?? new Uint8Array(), elementRow(threadId, checkpointNs, hash))));
}

/**
 * The element rows a refs value names, in order, chunks expanded (and
 * checked against their hashes); a missing row is an error naming the hash.
 */
export function leavesOf(
  opened: OpenedRefs,
  find: (hash: string) => StoredElement | undefined,
  where: () => string,
  onHash?: (hash: string) => void,
): [string, StoredElement][] {
  const get = (hash: string): StoredElement => {
    const row = find(hash);
    if (!row) throw new DeserializationError(`${where()}: element ${hash} is not stored`);
    onHash?.(hash);
    return row;
  };
  const leaves: [string, StoredElement][] = [];
  for (const hash of opened.hashes) {
    const row = get(hash);
    if (row.type === REFS_TYPE) {
      for (const inner of opened.chunk(hash, row.value ?? new Uint8Array())) {
        const leaf = get(inner);
        if (leaf.type === REFS_TYPE) throw new DeserializationError(`${where()}: chunk ${hash} refers to another chunk`);
        leaves.push([inner, leaf]);
      }
    } else {
      leaves.push([hash, row]);
    }
  }
  return leaves;
}
