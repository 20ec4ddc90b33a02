/**
 * How element rows and refs values (elements.ts) are made and checked, for
 * the serializer in use. Nothing read from the tables is trusted:
 *
 * - **Plain** (a serializer that does not bind values to their rows): an
 *   element's hash is the first 16 bytes of SHA-256 over its type, a NUL and
 *   its bytes; a chunk's over `pg:refs`, a NUL and its hashes. A refs value is
 *   the hashes alone. On read every element and chunk is hashed again and
 *   compared: a row swapped for another, or altered, fails loudly.
 * - **Sealed** (an encrypting serializer, rowserde.ts `SealingSerializer`):
 *   the same hashes, keyed: HMAC-SHA-256 under a key derived from the current
 *   encryption key, over the inner serializer's type and bytes, so the hashes
 *   in the tables confirm no guess about an element's content. An element row
 *   holds its bytes sealed for that row (channel `__elements__`, version its
 *   hash). A refs value carries, after its hashes, a 16-byte tag: HMAC under
 *   another derived key over the list's row (thread, namespace, channel,
 *   version) and its hashes, so a refs value edited, reordered, shortened,
 *   moved to another row or forged fails with a `DeserializationError`. The
 *   tag's key is found among the configured keys (the current one first); the
 *   list's hashes are keyed under the same key. A refs value without a valid
 *   tag reads only with `allowPlaintext` (lists written before encryption was
 *   turned on: plain hashes); `reencrypt` re-keys those and lists of old keys.
 *
 * The tag is 16 bytes, so a refs value stays a whole number of hashes: the SQL
 * that expands refs values (sql/read.ts, prune, export) sees the tag as one
 * more hash, which names no row (2^-128).
 */
import * as crypto from "node:crypto";
import { createHash, timingSafeEqual } from "node:crypto";
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { DeserializationError, SerializationError } from "../errors.js";
import { isRowBound, isSealing, rowIdentity, type SealingSerializer, type ValueRow } from "../serde/rowserde.js";
import { MsgpackSerializer } from "../serde/serde.js";

import { ELEMENTS_CHANNEL, HASH_BYTES, REFS_TYPE } from "./element-names.js";

// The names it reserves live in element-names.ts (loaded without the codec); imported from here too.
export { ELEMENTS_CHANNEL, HASH_BYTES, KNOWS_ELEMENTS, REFS_TYPE, KNOWS_ELEMENTS_SQL } from "./element-names.js";

/** A row of `checkpoint_blobs`: where a list or an element is stored. */
export type BlobRow = Extract<ValueRow, { table: "checkpoint_blobs" }>;

/** The row of element `hash` (hex) of a lineage. */
export const elementRow = (threadId: string, checkpointNs: string, hash: string): BlobRow => ({
  table: "checkpoint_blobs",
  threadId,
  checkpointNs,
  channel: ELEMENTS_CHANNEL,
  version: hash,
});

/**
 * An element serialized: its hash, its size as stored, what its element row stores (made only when the
 * row is sent), and what another row would store for the same value whole (sealed for that row).
 */
export interface DumpedElement {
  hash: Buffer;
  size: number;
  stored(): [string, Uint8Array];
  forRow(row: ValueRow): [string, Uint8Array];
}

/** The hashes of a refs value, authenticated, and how to check what they name. */
export interface OpenedRefs {
  /** Element and chunk hashes, in order (hex). */
  hashes: string[];
  /** A chunk's element hashes, after checking its bytes against its hash. */
  chunk(hash: string, bytes: Uint8Array): string[];
  /** An element row's inner type and bytes (opened, for a sealing serializer), after checking them against its hash. */
  checked(hash: string, type: string, bytes: Uint8Array, row: BlobRow): [string, Uint8Array];
  /** An element decoded, after checking it against its hash. */
  element(hash: string, type: string, bytes: Uint8Array, row: BlobRow): Promise<unknown>;
  /** Elements decoded, in order, after checking each against its hash (one decoder pass where the serializer allows). */
  elements(leaves: readonly { hash: string; type: string; bytes: Uint8Array; row: BlobRow }[]): Promise<unknown[]>;
}

/** How lists are stored by their elements with one serializer. */
export interface ElementCodec {
  /** Whether one value gives the same hash twice (else an unchanged element would be stored again at each put). */
  deterministic(sample: unknown): Promise<boolean>;
  /**
   * Serialize an element of a list of `threadId`/`checkpointNs`; undefined when the serializer would
   * write it differently inside its container than alone (see `dumpsTypedExact` in serde.ts).
   */
  element(value: unknown, threadId: string, checkpointNs: string): Promise<DumpedElement | undefined>;
  /**
   * {@link element} for every element of a list in one synchronous pass, where the serializer allows
   * it: `visit` gets each one's hash, stored size, and its element row's type and bytes (copied: call
   * only for a row that is sent). True when each was visited; false when one is written differently
   * alone (the list stays whole); undefined when this pass cannot say (call `element` on each).
   */
  each?(list: readonly unknown[], visit: (i: number, hash: Buffer, size: number, stored: () => [string, Uint8Array]) => void): boolean | undefined;
  /**
   * True when `value` certainly serializes to fewer than `bytes` bytes, false when it may not; only
   * where the serializer can tell without serializing it.
   */
  smallerThan?(value: unknown, bytes: number): boolean;
  /** A chunk's hash. */
  chunkHash(chunk: Uint8Array): Buffer;
  /** The refs value (or refs area) the row naming these hashes stores. */
  refs(hashes: Buffer, row: ValueRow): Buffer;
  /** Authenticate a refs value (or refs area) read from `row`; `where` names the value in errors. */
  open(value: Uint8Array, row: ValueRow, where: () => string): OpenedRefs;
}

/** How one list's hashes are made: unkeyed (SHA-256) or keyed under one key of a sealing serializer. */
export interface Hasher {
  /** The key id, or undefined for unkeyed hashes. */
  keyId: string | undefined;
  hash(type: string, bytes: Uint8Array): Buffer;
  /** Whether `type` and `bytes` hash to `hex` (what a read checks for every element: kept cheap). */
  matches(type: string, bytes: Uint8Array, hex: string): boolean;
  tag(row: ValueRow, hashes: Uint8Array): Buffer | undefined;
}

/** `type`, NUL: what precedes an element's bytes in its hash (one buffer per type). */
const prefixes = new Map<string, Buffer>();
/**
 * A scratch buffer the hashed bytes are laid out in (reused: a read checks every element of a list, and a
 * new buffer per element was a good part of a long list's read, in garbage collection). Synchronous use only.
 */
let scratch = Buffer.allocUnsafe(64 * 1024);
function prefixed(type: string, bytes: Uint8Array): Uint8Array {
  let prefix = prefixes.get(type);
  if (!prefix) {
    prefix = Buffer.from(`${type}\u0000`);
    if (prefixes.size < 64) prefixes.set(type, prefix);
  }
  const n = prefix.byteLength + bytes.byteLength;
  if (n > scratch.byteLength) {
    if (n > 4 * 1024 * 1024) return Buffer.concat([prefix, bytes]);
    scratch = Buffer.allocUnsafe(2 ** Math.ceil(Math.log2(n)));
  }
  prefix.copy(scratch, 0);
  scratch.set(bytes, prefix.byteLength);
  return scratch.subarray(0, n);
}

/** SHA-256, one call per value (node:crypto `hash` where the runtime has it: a hash object per element costs more than hashing it). */
const oneShot = (crypto as { hash?: (algorithm: string, data: Uint8Array, encoding: "hex" | "buffer") => string | Buffer }).hash;
const sha256 = (data: Uint8Array, encoding: "hex" | "buffer"): string | Buffer =>
  oneShot ? oneShot("sha256", data, encoding) : encoding === "hex" ? createHash("sha256").update(data).digest("hex") : createHash("sha256").update(data).digest();

/** Unkeyed hashes (plain serializers; lists written before encryption was turned on). */
export const UNKEYED: Hasher = {
  keyId: undefined,
  hash: (type, bytes) => (sha256(prefixed(type, bytes), "buffer") as Buffer).subarray(0, HASH_BYTES),
  matches: (type, bytes, hex) => hex.length === 2 * HASH_BYTES && (sha256(prefixed(type, bytes), "buffer") as Buffer).toString("hex", 0, HASH_BYTES) === hex,
  tag: () => undefined,
};

/** Hashes keyed under key `keyId` of `serde`. */
export function keyedHasher(serde: SealingSerializer, keyId: string): Hasher {
  const hash = (type: string, bytes: Uint8Array) => serde.digest(keyId, "hash", [type, "\u0000", bytes]).subarray(0, HASH_BYTES);
  return {
    keyId,
    hash,
    matches: (type, bytes, hex) => hash(type, bytes).toString("hex") === hex,
    tag: (row, hashes) => serde.digest(keyId, "tag", [rowIdentity(row), "\u0000", hashes]).subarray(0, HASH_BYTES),
  };
}

const hex = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("hex");

/** The hashes in `bytes` (hex), which must be a whole number of them. */
export function splitHashes(bytes: Uint8Array, where: () => string): string[] {
  if (bytes.byteLength % HASH_BYTES !== 0) throw new DeserializationError(`${where()}: a refs value of ${bytes.byteLength} bytes is not a list of ${HASH_BYTES}-byte hashes`);
  const out: string[] = [];
  for (let o = 0; o < bytes.byteLength; o += HASH_BYTES) out.push(hex(bytes.subarray(o, o + HASH_BYTES)));
  return out;
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && timingSafeEqual(a, b);
}

/** The stored value did not hash to the name it is stored under. */
function mismatch(where: () => string, what: string, hash: string): DeserializationError {
  return new DeserializationError(`${where()}: ${what} ${hash} does not match its hash (the row was altered or swapped for another)`);
}

/**
 * Elements this process has checked against their hashes, with their bytes: a read that finds the same
 * bytes under the same hash again compares them (memcmp) instead of hashing them (a long list's read
 * hashed every element, most of its decoding time). Bytes that differ in any way are hashed and
 * checked as before, so a row altered since is still caught. Least recently used first out, within
 * {@link VERIFIED_BYTES} of bytes.
 */
class VerifiedElements {
  readonly #byKey = new Map<string, { type: string; bytes: Buffer }>();
  #bytes = 0;

  constructor(private readonly budget: number) {}

  has(keyId: string | undefined, hash: string, type: string, bytes: Uint8Array): boolean {
    const key = `${keyId ?? ""}\u0000${hash}`;
    const hit = this.#byKey.get(key);
    if (!hit || hit.type !== type || !hit.bytes.equals(bytes)) return false;
    this.#byKey.delete(key);
    this.#byKey.set(key, hit);
    return true;
  }

  add(keyId: string | undefined, hash: string, type: string, bytes: Uint8Array): void {
    if (bytes.byteLength > this.budget / 64) return;
    const key = `${keyId ?? ""}\u0000${hash}`;
    const old = this.#byKey.get(key);
    if (old) this.#bytes -= old.bytes.byteLength;
    // A copy: the caller's buffer is a slice of a driver's message, which it may reuse.
    this.#byKey.delete(key);
    this.#byKey.set(key, { type, bytes: Buffer.from(bytes) });
    this.#bytes += bytes.byteLength;
    for (const [k, v] of this.#byKey) {
      if (this.#bytes <= this.budget) break;
      this.#byKey.delete(k);
      this.#bytes -= v.bytes.byteLength;
    }
  }
}

/** How many bytes of checked elements a process keeps (see {@link VerifiedElements}). */
const VERIFIED_BYTES = 16 * 1024 * 1024;
const VERIFIED = new VerifiedElements(VERIFIED_BYTES);

/**
 * Check lists' rows against `hasher`: chunks and elements. `load` decodes an
 * element's checked bytes; `open` gives an element row's inner type and bytes.
 */
function reader(
  hasher: Hasher,
  hashes: string[],
  where: () => string,
  open: (type: string, bytes: Uint8Array, row: BlobRow) => [string, Uint8Array],
  load: (type: string, bytes: Uint8Array) => Promise<unknown>,
  inner: SerializerProtocol,
): OpenedRefs {
  const checked = (hash: string, type: string, bytes: Uint8Array, row: BlobRow): [string, Uint8Array] => {
    const [innerType, innerBytes] = open(type, bytes, row);
    if (!VERIFIED.has(hasher.keyId, hash, innerType, innerBytes)) {
      if (!hasher.matches(innerType, innerBytes, hash)) throw mismatch(where, "element", hash);
      VERIFIED.add(hasher.keyId, hash, innerType, innerBytes);
    }
    return [innerType, innerBytes];
  };
  return {
    hashes,
    chunk(hash, bytes) {
      if (!hasher.matches(REFS_TYPE, bytes, hash)) throw mismatch(where, "chunk", hash);
      return splitHashes(bytes, where);
    },
    checked,
    element: async (hash, type, bytes, row) => load(...checked(hash, type, bytes, row)),
    async elements(leaves) {
      const parts = leaves.map((l) => checked(l.hash, l.type, l.bytes, l.row));
      // msgpack elements one after another behind an array header are that array: one decoder pass, as
      // a list stored whole takes, instead of one per element (a long list reads about as fast).
      if (parts.length > 1 && inner instanceof MsgpackSerializer && parts.every(([t]) => t === "msgpack")) {
        const decoded = await load("msgpack", msgpackArray(parts.map(([, b]) => b))).catch(() => undefined);
        if (Array.isArray(decoded) && decoded.length === parts.length) return decoded;
      }
      return Promise.all(parts.map(([t, b]) => load(t, b)));
    },
  };
}

/** A msgpack array of `items` (each a whole msgpack value): its header, then the items. */
function msgpackArray(items: readonly Uint8Array[]): Buffer {
  const n = items.length;
  const header = n < 16 ? Buffer.from([0x90 | n]) : n < 0x10000 ? Buffer.from([0xdc, n >> 8, n & 0xff]) : Buffer.from([0xdd, n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]);
  return Buffer.concat([header, ...items]);
}

function plainCodec(serde: SerializerProtocol): ElementCodec {
  // This package's serializer writes a list's elements in one pass, and bounds small values without writing them.
  const msgpack = serde instanceof MsgpackSerializer ? serde : undefined;
  return {
    async deterministic(sample) {
      const [[t1, b1], [t2, b2]] = await Promise.all([serde.dumpsTyped(sample), serde.dumpsTyped(sample)]);
      return t1 === t2 && Buffer.from(b1.buffer, b1.byteOffset, b1.byteLength).equals(Buffer.from(b2.buffer, b2.byteOffset, b2.byteLength));
    },
    async element(value) {
      const dumped = await dumpExact(serde, value);
      if (!dumped) return undefined;
      const [type, bytes] = dumped;
      return { hash: UNKEYED.hash(type, bytes), size: bytes.byteLength, stored: () => [type, bytes], forRow: () => [type, bytes] };
    },
    each: msgpack && ((list, visit) => msgpack.dumpsEachExact(list, (bytes, i) => visit(i, UNKEYED.hash("msgpack", bytes), bytes.byteLength, () => ["msgpack", Buffer.from(bytes)]))),
    smallerThan: msgpack && ((value, bytes) => msgpack.fitsUnder(value, bytes)),
    chunkHash: (chunk) => UNKEYED.hash(REFS_TYPE, chunk),
    refs: (hashes) => hashes,
    open: (value, _row, where) =>
      reader(UNKEYED, splitHashes(value, where), where, (type, bytes) => [type, bytes], (type, bytes) => serde.loadsTyped(type, bytes), serde),
  };
}

/** A serializer that can tell when a value is not written as it is (serde.ts `dumpsTypedExact`). */
interface ExactSerializer extends SerializerProtocol {
  dumpsTypedExact(data: unknown): Promise<[string, Uint8Array] | undefined>;
}

/** An element as `serde` writes it alone, or undefined when that would differ from it inside its container. */
function dumpExact(serde: SerializerProtocol, value: unknown): Promise<[string, Uint8Array] | undefined> {
  return typeof (serde as Partial<ExactSerializer>).dumpsTypedExact === "function" ? (serde as ExactSerializer).dumpsTypedExact(value) : serde.dumpsTyped(value);
}

async function dumpInner(serde: SealingSerializer, value: unknown, exact = false): Promise<[string, Uint8Array] | undefined> {
  const dumped = exact ? await dumpExact(serde.inner, value) : await serde.inner.dumpsTyped(value);
  if (dumped === undefined) return undefined;
  const [type, bytes] = dumped;
  if (typeof type !== "string" || !(bytes instanceof Uint8Array)) throw new SerializationError("The inner serializer returned something other than [type, bytes]");
  return [type, bytes];
}

/** The key under which a refs value read from `row` was tagged, and its hashes; undefined when no configured key made its tag. */
export function authenticate(serde: SealingSerializer, value: Uint8Array, row: ValueRow): { hasher: Hasher; hashes: Uint8Array } | undefined {
  if (value.byteLength < HASH_BYTES || value.byteLength % HASH_BYTES !== 0) return undefined;
  const hashes = value.subarray(0, value.byteLength - HASH_BYTES);
  const tag = value.subarray(value.byteLength - HASH_BYTES);
  for (const keyId of serde.digestKeyIds) {
    const hasher = keyedHasher(serde, keyId);
    if (same(hasher.tag(row, hashes)!, tag)) return { hasher, hashes };
  }
  return undefined;
}

function sealedCodec(serde: SealingSerializer): ElementCodec {
  const current = () => keyedHasher(serde, serde.digestKeyIds[0]!);
  const open = (type: string, bytes: Uint8Array, row: BlobRow) => serde.openForRow(type, bytes, row);
  const load = (type: string, bytes: Uint8Array) => serde.inner.loadsTyped(type, bytes);
  return {
    async deterministic(sample) {
      const [one, two] = await Promise.all([dumpInner(serde, sample), dumpInner(serde, sample)]);
      return one![0] === two![0] && Buffer.from(one![1]).equals(Buffer.from(two![1]));
    },
    async element(value, threadId, checkpointNs) {
      const dumped = await dumpInner(serde, value, true);
      if (!dumped) return undefined;
      const [innerType, bytes] = dumped;
      const hash = current().hash(innerType, bytes);
      return {
        hash,
        size: bytes.byteLength + serde.sealOverhead,
        stored: () => serde.sealForRow(innerType, bytes, elementRow(threadId, checkpointNs, hex(hash))),
        forRow: (row) => serde.sealForRow(innerType, bytes, row),
      };
    },
    chunkHash: (chunk) => current().hash(REFS_TYPE, chunk),
    refs: (hashes, row) => Buffer.concat([hashes, current().tag(row, hashes)!]),
    open(value, row, where) {
      const found = authenticate(serde, value, row);
      if (found) return reader(found.hasher, splitHashes(found.hashes, where), where, open, load, serde.inner);
      if (serde.allowsPlaintext) return reader(UNKEYED, splitHashes(value, where), where, open, load, serde.inner);
      throw new DeserializationError(
        `${where()}: its refs value is not authenticated: altered, moved from another row, forged, written under a key that is not configured, ` +
          "or written before encryption was turned on (read those with allowPlaintext: true, then run reencrypt)",
      );
    },
  };
}

const codecs = new WeakMap<SerializerProtocol, ElementCodec | null>();

/**
 * The codec for `serde`; undefined for a serializer that binds values to
 * their rows but cannot seal inner bytes or key hashes (it cannot store
 * lists by their elements, nor read them: an unauthenticated refs value
 * would bypass it).
 */
export function elementCodec(serde: SerializerProtocol): ElementCodec | undefined {
  let codec = codecs.get(serde);
  if (codec === undefined) {
    codec = isSealing(serde) ? sealedCodec(serde) : isRowBound(serde) ? null : plainCodec(serde);
    codecs.set(serde, codec);
  }
  return codec ?? undefined;
}
