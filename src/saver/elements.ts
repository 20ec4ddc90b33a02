/**
 * List-valued channels stored by their elements (content-addressed), so a
 * chat's `messages` costs each message once per lineage, not once per step.
 *
 * ## Format (in `checkpoint_blobs`, no table of its own)
 *
 * - An **element row**: channel {@link ELEMENTS_CHANNEL}, version = the
 *   element's hash (32 lowercase hex digits), type and value as the
 *   serializer made them for the element alone. Stored once per (thread,
 *   namespace); a put inserts it with `ON CONFLICT DO NOTHING`.
 * - A **refs value** (type {@link REFS_TYPE}): 16-byte hashes one after
 *   another. A list channel's version is a refs value; so is a **chunk**, an
 *   element row holding the hashes of {@link CHUNK} consecutive elements. A
 *   list of n elements is stored as the hashes of its full chunks (elements
 *   0-31, 32-63, ...: an appended element leaves them unchanged) followed by
 *   the hashes of the rest: about n/32 + 16 hashes per version instead of n.
 *   A chunk holds element hashes only, never chunk hashes (one level).
 * - The hash: the first 16 bytes of SHA-256 over the element's type, a NUL,
 *   and its serialized bytes.
 *
 * A read expands refs values in SQL (queries.ts `read`), in the same
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
 * Used, when turned on (`elementStorage: true`), for plain arrays with at
 * least one element, with serializers that do not bind values to their rows
 * (an encrypting serializer stores whole values, as before).
 */
import { createHash } from "node:crypto";
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { DeserializationError } from "../errors.js";
import { isRowBound, loadsForRow } from "../serde/rowserde.js";

/** The reserved channel of element rows (no LangGraph channel is called so; the saver refuses it as a channel name). */
export const ELEMENTS_CHANNEL = "__elements__";
/** Type tag of a refs value: a list channel's version, or a chunk. */
export const REFS_TYPE = "pg:refs";
/** Bytes of one hash. */
export const HASH_BYTES = 16;
/** Elements per chunk. */
export const CHUNK = 32;

/** An element row to insert. */
export interface ElementRow {
  hash: string;
  type: string;
  bytes: Uint8Array;
}

/** Whether `value` is stored element by element. */
export function isElementList(value: unknown): value is unknown[] {
  return Array.isArray(value) && value.length > 0 && Object.getPrototypeOf(value) === Array.prototype;
}

/** Whether `serde` can store elements (it does not bind values to their rows). */
export function storesElements(serde: SerializerProtocol): boolean {
  return !isRowBound(serde);
}

function digest(parts: (string | Uint8Array)[]): Buffer {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest().subarray(0, HASH_BYTES);
}

/**
 * What the saver remembers to avoid sending elements again: per lineage, the
 * hashes the last checkpoint it wrote or read refers to. Bounded: at most
 * `maxLineages` lineages (the oldest is forgotten first).
 */
export class ElementMemory {
  readonly #lineages = new Map<string, { checkpointId: string; byChannel: Map<string, string[]> }>();
  readonly #maxLineages: number;
  /** Whether the serializer gives one value the same bytes twice (found out once, at the first list). */
  #deterministic: Promise<boolean> | undefined;

  constructor(maxLineages = 10_000) {
    this.#maxLineages = maxLineages;
  }

  /**
   * Whether lists can be stored by their elements with `serde`: only if it
   * serializes one value to the same bytes twice. One that does not (an
   * encrypting wrapper with random IVs, say) would give an unchanged element
   * a new hash at every put and store it again each time, more than a whole
   * value costs: such a saver stores whole values, and says so once.
   */
  usable(serde: SerializerProtocol, sample: unknown): Promise<boolean> {
    this.#deterministic ??= (async () => {
      const [[t1, b1], [t2, b2]] = await Promise.all([serde.dumpsTyped(sample), serde.dumpsTyped(sample)]);
      const same = t1 === t2 && Buffer.from(b1.buffer, b1.byteOffset, b1.byteLength).equals(Buffer.from(b2.buffer, b2.byteOffset, b2.byteLength));
      if (!same) {
        process.emitWarning("elementStorage: the serializer gives the same value different bytes each time, so lists are stored whole", {
          code: "LANGGRAPH_CHECKPOINT_PG_ELEMENTS",
        });
      }
      return same;
    })();
    // A value that fails to serialize decides nothing: the next list asks again.
    this.#deterministic.catch(() => (this.#deterministic = undefined));
    return this.#deterministic;
  }

  /** The hashes checkpoint `checkpointId` of the lineage refers to, if remembered. */
  known(lineage: string, checkpointId: string | null): Set<string> | undefined {
    if (checkpointId === null) return undefined;
    const entry = this.#lineages.get(lineage);
    if (entry?.checkpointId !== checkpointId) return undefined;
    const all = new Set<string>();
    for (const hashes of entry.byChannel.values()) for (const h of hashes) all.add(h);
    return all;
  }

  /**
   * Remember what checkpoint `checkpointId` refers to: `written` for the
   * channels it stored; the other channels' from its parent, when that is
   * the remembered one (otherwise only `written` is known).
   */
  rememberCheckpoint(lineage: string, checkpointId: string, parentId: string | null, written: Map<string, string[]>, dropped: Iterable<string> = []): void {
    const previous = this.#lineages.get(lineage);
    const byChannel = previous && parentId !== null && previous.checkpointId === parentId ? new Map(previous.byChannel) : new Map<string, string[]>();
    for (const channel of dropped) byChannel.delete(channel);
    for (const [channel, hashes] of written) byChannel.set(channel, hashes);
    this.#lineages.delete(lineage);
    this.#lineages.set(lineage, { checkpointId, byChannel });
    if (this.#lineages.size > this.#maxLineages) this.#lineages.delete(this.#lineages.keys().next().value!);
  }

  /** Forget a thread (deleted). */
  forgetThread(threadId: string): void {
    for (const key of this.#lineages.keys()) if (key.startsWith(`${threadId}\u0000`)) this.#lineages.delete(key);
  }
}

/** The key of an element row among those a read returned: thread, namespace, hash. */
export const elementKey = (threadId: string, checkpointNs: string, hash: string): string => `${threadId}\u0000${checkpointNs}\u0000${hash}`;

/** The memory key of a lineage. */
export function lineageKey(threadId: string, checkpointNs: string): string {
  return `${threadId}\u0000${checkpointNs}`;
}

/** A list channel's value encoded: its refs value, the rows to send, every hash it refers to (elements and chunks). */
export interface EncodedList {
  refs: Buffer;
  rows: ElementRow[];
  hashes: string[];
}

/**
 * Encode a list as refs; rows for elements and chunks not in `known` (nor
 * already in `sending`, the rows this put sends for other channels).
 * `check` sees each element's serialized bytes (size limit).
 */
export async function encodeList(
  serde: SerializerProtocol,
  list: unknown[],
  known: Set<string> | undefined,
  sending: Set<string>,
  check: (bytes: Uint8Array, index: number) => void,
): Promise<EncodedList> {
  const n = list.length;
  const raw = new Array<Buffer>(n);
  const rows: ElementRow[] = [];
  const hashes: string[] = [];
  await Promise.all(
    list.map(async (element, i) => {
      // Every element is serialized: its object may have changed in place since it was last stored
      // (LangGraph's own tests edit a message and hand the same object to updateState).
      const [type, bytes] = await serde.dumpsTyped(element);
      check(bytes, i);
      const hashBytes = digest([type, "\u0000", bytes]);
      const hash = hashBytes.toString("hex");
      raw[i] = hashBytes;
      if (!known?.has(hash) && !sending.has(hash)) {
        sending.add(hash);
        rows.push({ hash, type, bytes });
      }
    }),
  );
  const full = Math.floor(n / CHUNK);
  const parts: Buffer[] = [];
  for (let c = 0; c < full; c++) {
    const chunk = Buffer.concat(raw.slice(c * CHUNK, (c + 1) * CHUNK));
    const chunkHash = digest([REFS_TYPE, "\u0000", chunk]);
    const hex = chunkHash.toString("hex");
    parts.push(chunkHash);
    hashes.push(hex);
    if (!known?.has(hex) && !sending.has(hex)) {
      sending.add(hex);
      rows.push({ hash: hex, type: REFS_TYPE, bytes: chunk });
    }
  }
  for (let i = full * CHUNK; i < n; i++) parts.push(raw[i]!);
  for (const b of raw) hashes.push(b.toString("hex"));
  return { refs: Buffer.concat(parts), rows, hashes };
}

/** The hashes in a refs value, in order. */
export function refsOf(value: Uint8Array, where: () => string): string[] {
  if (value.byteLength % HASH_BYTES !== 0) throw new DeserializationError(`${where()}: a refs value of ${value.byteLength} bytes is not a list of ${HASH_BYTES}-byte hashes`);
  const out: string[] = [];
  for (let o = 0; o < value.byteLength; o += HASH_BYTES) out.push(Buffer.from(value.buffer, value.byteOffset + o, HASH_BYTES).toString("hex"));
  return out;
}

/** A stored element row, as a read returns it. */
export interface StoredElement {
  type: string;
  value: Uint8Array | null;
}

/**
 * The elements of a refs value, in order: chunks expanded, each element
 * decoded (a new object per call: lists of two checkpoints share no objects).
 * `find` looks an element row up by hash; a missing one is an error naming
 * the lineage and the hash, never a shorter list.
 */
export async function resolveList(
  serde: SerializerProtocol,
  refs: Uint8Array,
  lineage: { threadId: string; checkpointNs: string; channel: string; version: string },
  find: (hash: string) => StoredElement | undefined,
  onHash?: (hash: string) => void,
): Promise<unknown[]> {
  const where = () => `channel ${JSON.stringify(lineage.channel)} version ${JSON.stringify(lineage.version)} of thread ${JSON.stringify(lineage.threadId)} namespace ${JSON.stringify(lineage.checkpointNs)}`;
  const get = (hash: string): StoredElement => {
    const row = find(hash);
    if (!row) throw new DeserializationError(`${where()}: element ${hash} is not stored`);
    onHash?.(hash);
    return row;
  };
  const leaves: [string, StoredElement][] = [];
  for (const hash of refsOf(refs, where)) {
    const row = get(hash);
    if (row.type === REFS_TYPE) {
      for (const inner of refsOf(row.value ?? new Uint8Array(), where)) {
        const leaf = get(inner);
        if (leaf.type === REFS_TYPE) throw new DeserializationError(`${where()}: chunk ${hash} refers to another chunk`);
        leaves.push([inner, leaf]);
      }
    } else {
      leaves.push([hash, row]);
    }
  }
  return Promise.all(
    leaves.map(([hash, leaf]) =>
      loadsForRow(serde, leaf.type, leaf.value ?? new Uint8Array(), {
        table: "checkpoint_blobs",
        threadId: lineage.threadId,
        checkpointNs: lineage.checkpointNs,
        channel: ELEMENTS_CHANNEL,
        version: hash,
      }),
    ),
  );
}
