/**
 * Encryption at rest for channel values and pending writes (optional, off by
 * default): a serializer that wraps another one and seals its bytes with
 * AES-256-GCM (`node:crypto`) under a named key, so keys can rotate.
 *
 * ## Format
 *
 * Type tag: `enc:<keyId>:<innerType>`, e.g. `enc:2025-01:msgpack`. The tag is
 * stored in plaintext (it is the `type` column): it says that the value is
 * encrypted, under which key, and what the inner serializer made of it.
 *
 * Bytes: format byte | 12-byte random IV | ciphertext | 16-byte GCM tag.
 *
 * Format 2 (bound to its row, what the saver writes): additional authenticated
 * data `langgraph-checkpoint-pg/enc/v2`, NUL, key id, NUL, inner type, NUL,
 * the row's identity (its table and key: thread, namespace, then channel and
 * version, or checkpoint, task and index; see rowserde.ts). A value copied to
 * another row, or two values swapped, fail to decrypt there.
 *
 * Format 1 (unbound; written by releases before row binding, and by
 * `dumpsTyped` without a row): additional authenticated data
 * `langgraph-checkpoint-pg/enc/v1`, NUL, key id, NUL, inner type. Still read
 * (unless `allowUnbound: false`); `reencrypt` rewrites such rows in format 2.
 *
 * Either way, changing the tag (another key id, another inner type) makes
 * decryption fail instead of feeding the plaintext to the wrong decoder, and
 * the format byte cannot be changed either (each format authenticates its own
 * label).
 *
 * ## Limits (say so, don't pretend)
 *
 * - A value is bound to its row, not to its moment: someone with write access
 *   can put back a row's earlier value (from a backup, say), and can delete
 *   rows. They cannot read, alter, move or forge a value, or plant one of their
 *   own (plaintext is refused, see `allowPlaintext`).
 * - Only what passes through the serializer is encrypted: the `value` columns
 *   of `checkpoint_blobs` and `checkpoint_writes` (the elements of lists
 *   stored by their elements too, sealed through {@link EncryptedSerializer.sealForRow};
 *   their hashes, HMACs under keys derived from these keys, stay plaintext:
 *   saver/element-codec.ts). Ids, namespaces, channel
 *   names, versions, task ids and paths, the checkpoint JSON without its
 *   values (timestamps, `channel_versions`, `versions_seen`) and the metadata
 *   (used by `list({ filter })`) stay plaintext.
 * - IVs are random (96 bits): rotate a key well before 2^32 values were
 *   written under it (NIST SP 800-38D).
 */
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, KeyObject, randomBytes } from "node:crypto";
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { DeserializationError, InvalidOptionsError, SerializationError } from "../errors.js";
import { rowIdentity, type SealingSerializer, type ValueRow } from "./rowserde.js";
import { MsgpackSerializer } from "./serde.js";

/** Prefix of the type tag of every encrypted value. */
export const ENCRYPTED_TYPE_PREFIX = "enc:";

/** Format byte: 1 unbound (authenticated data without the row), 2 bound to its row. */
const UNBOUND = 1;
const BOUND = 2;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID = /^[A-Za-z0-9_.-]{1,64}$/;
const AAD_LABEL = { [UNBOUND]: "langgraph-checkpoint-pg/enc/v1", [BOUND]: "langgraph-checkpoint-pg/enc/v2" } as const;
/** HKDF info of the digest keys derived from each key (one per use: keys never serve two purposes). */
const DIGEST_INFO = { hash: "langgraph-checkpoint-pg/elements/hash/v1", tag: "langgraph-checkpoint-pg/elements/tag/v1" } as const;

/** A 32-byte AES-256 key: raw bytes, or a secret `KeyObject` (`crypto.createSecretKey`). */
export type EncryptionKey = Uint8Array | KeyObject;

/** Options of {@link EncryptedSerializer}. */
export interface EncryptedSerializerOptions {
  /**
   * Every key that may still be needed to read, by key id (letters, digits,
   * `_`, `.`, `-`; at most 64). Keep old keys here until no row uses them.
   */
  keys: Record<string, EncryptionKey> | ReadonlyMap<string, EncryptionKey>;
  /** Id of the key new values are encrypted with. */
  current: string;
  /** The serializer whose output is encrypted. Default {@link MsgpackSerializer}. */
  inner?: SerializerProtocol;
  /**
   * Read values that are not encrypted (rows written before encryption was
   * turned on) through `inner`. Default false: such a value is refused with a
   * {@link DeserializationError}, so someone with write access to the tables
   * cannot plant a plaintext value. Turn it on only while migrating old rows.
   */
  allowPlaintext?: boolean;
  /**
   * Read values encrypted without their row (format 1: rows written before
   * this release). Default true, so existing rows still read; once `reencrypt`
   * has rewritten them, set it to false, so that an old value copied into
   * another row (from a backup, say) is refused too.
   */
  allowUnbound?: boolean;
  /**
   * Bind new values to their row (format 2). Default true. Set it to false
   * only during a rolling upgrade, while processes of an older release, which
   * cannot read format 2, still read the same tables.
   */
  bindToRow?: boolean;
}

/**
 * A serializer that encrypts what another serializer produces, with
 * AES-256-GCM under a key id, so that keys can rotate: new values use
 * `current`, old values still decrypt with the key they name.
 *
 * @example
 * ```ts
 * import { randomBytes } from "node:crypto";
 * import { EncryptedSerializer, PostgresSaver } from "langgraph-checkpoint-pg";
 *
 * const serde = new EncryptedSerializer({
 *   keys: { "2025-06": Buffer.from(process.env.CHECKPOINT_KEY_2025_06!, "base64"), "2025-01": oldKey },
 *   current: "2025-06",
 * });
 * const checkpointer = new PostgresSaver(pool, { serde });
 * // checkpoint_blobs.type is now e.g. "enc:2025-06:msgpack" and value is ciphertext.
 * ```
 */
export class EncryptedSerializer implements SealingSerializer {
  readonly #keys: Map<string, KeyObject>;
  readonly #digestKeyIds: readonly string[];
  /** Per key id, the digest keys derived from it (made at the first use). */
  readonly #digestKeys = new Map<string, Record<keyof typeof DIGEST_INFO, KeyObject>>();
  readonly #current: string;
  readonly #inner: SerializerProtocol;
  readonly #allowPlaintext: boolean;
  readonly #allowUnbound: boolean;
  readonly #bindToRow: boolean;

  constructor(options: EncryptedSerializerOptions) {
    if (options === null || typeof options !== "object") throw new InvalidOptionsError("EncryptedSerializer options", "expected an object");
    const entries = options.keys instanceof Map ? [...options.keys.entries()] : Object.entries(options.keys ?? {});
    if (entries.length === 0) throw new InvalidOptionsError("keys", "give at least one key");
    this.#keys = new Map();
    for (const [id, key] of entries) {
      if (!KEY_ID.test(id)) throw new InvalidOptionsError(`keys[${JSON.stringify(id)}]`, "key ids are 1-64 letters, digits, '_', '.' or '-'");
      this.#keys.set(id, toKeyObject(id, key));
    }
    if (typeof options.current !== "string" || !this.#keys.has(options.current)) {
      throw new InvalidOptionsError("current", "must be the id of one of the keys");
    }
    if (options.inner !== undefined && (typeof options.inner?.dumpsTyped !== "function" || typeof options.inner?.loadsTyped !== "function")) {
      throw new InvalidOptionsError("inner", "expected a serializer (dumpsTyped and loadsTyped)");
    }
    for (const flag of ["allowPlaintext", "allowUnbound", "bindToRow"] as const) {
      if (options[flag] !== undefined && typeof options[flag] !== "boolean") throw new InvalidOptionsError(flag, "expected a boolean");
    }
    this.#current = options.current;
    this.#digestKeyIds = Object.freeze([this.#current, ...[...this.#keys.keys()].filter((id) => id !== this.#current)]);
    this.#inner = options.inner ?? new MsgpackSerializer();
    this.#allowPlaintext = options.allowPlaintext ?? false;
    this.#allowUnbound = options.allowUnbound ?? true;
    this.#bindToRow = options.bindToRow ?? true;
  }

  /** Id of the key new values are encrypted with. */
  get currentKeyId(): string {
    return this.#current;
  }

  /**
   * Serializes with the inner serializer, then encrypts under the current key,
   * not bound to any row (format 1): for use outside the saver. The saver
   * calls {@link dumpsTypedForRow}.
   */
  async dumpsTyped(data: unknown): Promise<[string, Uint8Array]> {
    const [innerType, plain] = await this.#serialize(data);
    return this.#seal(innerType, plain, undefined);
  }

  /** Serializes, then encrypts under the current key, bound to `row` (format 2; format 1 with `bindToRow: false`). */
  async dumpsTypedForRow(data: unknown, row: ValueRow): Promise<[string, Uint8Array]> {
    const [innerType, plain] = await this.#serialize(data);
    return this.#seal(innerType, plain, this.#bindToRow ? row : undefined);
  }

  /**
   * Decrypts a value written by {@link dumpsTyped} (under any configured key)
   * and decodes it with the inner serializer. A value bound to its row needs
   * {@link loadsTypedForRow}. A wrong key, tampered bytes or tag, an unknown
   * key id, or a plaintext value (unless `allowPlaintext`) throw
   * {@link DeserializationError}.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async loadsTyped(type: string, data: Uint8Array | string): Promise<any> {
    const opened = this.#open(type, data, undefined);
    return opened.plaintext ? this.#inner.loadsTyped(type, data) : this.#inner.loadsTyped(opened.innerType, opened.plain);
  }

  /**
   * Decrypts a value stored in `row` and decodes it: format 2 only if it was
   * bound to this very row, format 1 while `allowUnbound`. A value moved from
   * another row fails with {@link DeserializationError}.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async loadsTypedForRow(type: string, data: Uint8Array | string, row: ValueRow): Promise<any> {
    const opened = this.#open(type, data, row);
    return opened.plaintext ? this.#inner.loadsTyped(type, data) : this.#inner.loadsTyped(opened.innerType, opened.plain);
  }

  /**
   * The stored form `row` should hold now: encrypted under the current key and
   * bound to the row. Undefined when it already is. The inner bytes are kept
   * as they are (never decoded and encoded again). What `reencrypt` writes.
   *
   * @example
   * ```ts
   * const next = await serde.rewrap(type, bytes, row); // [type, bytes] to store, or undefined
   * ```
   */
  async rewrap(type: string, data: Uint8Array | string, row: ValueRow): Promise<[string, Uint8Array] | undefined> {
    if (this.#isCurrent(type, data)) return undefined;
    const opened = this.#open(type, data, row);
    if (opened.plaintext) {
      const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
      return this.#seal(type, bytes, row);
    }
    return this.#seal(opened.innerType, opened.plain, row);
  }

  /** The serializer whose bytes are encrypted (the `inner` option). */
  get inner(): SerializerProtocol {
    return this.#inner;
  }

  /** Bytes encryption adds to a value: format byte, IV and GCM tag. */
  get sealOverhead(): number {
    return 1 + IV_BYTES + TAG_BYTES;
  }

  /**
   * Encrypts bytes the inner serializer made (type `innerType`) under the
   * current key, bound to `row` (unbound with `bindToRow: false`): the value
   * {@link dumpsTypedForRow} would store, from bytes already serialized.
   * Lists stored by their elements use it (an element is hashed over these
   * bytes, then sealed).
   *
   * @example
   * ```ts
   * const [innerType, bytes] = await serde.inner.dumpsTyped(value);
   * const [type, sealed] = serde.sealForRow(innerType, bytes, row);
   * ```
   */
  sealForRow(innerType: string, bytes: Uint8Array, row: ValueRow): [string, Uint8Array] {
    if (typeof innerType !== "string" || innerType === "" || !(bytes instanceof Uint8Array)) {
      throw new SerializationError("sealForRow expects the inner serializer's type and bytes");
    }
    return this.#seal(innerType, bytes, this.#bindToRow ? row : undefined);
  }

  /**
   * Decrypts a value stored in `row` without decoding it: its inner type and
   * bytes (a plaintext value as it is, when `allowPlaintext`). Fails like
   * {@link loadsTypedForRow} on a value that was not written for this row.
   *
   * @example
   * ```ts
   * const [innerType, bytes] = serde.openForRow(type, stored, row);
   * const value = await serde.inner.loadsTyped(innerType, bytes);
   * ```
   */
  openForRow(type: string, data: Uint8Array, row: ValueRow): [string, Uint8Array] {
    const opened = this.#open(type, data, row);
    return opened.plaintext ? [type, data] : [opened.innerType, opened.plain];
  }

  /** The ids of the configured keys, the current one first: the keys {@link digest} can use. */
  get digestKeyIds(): readonly string[] {
    return this.#digestKeyIds;
  }

  /**
   * HMAC-SHA-256 of `parts` under a key derived (HKDF-SHA-256) from key
   * `keyId`, a different one for each use: `"hash"` names the elements of
   * lists stored by their elements (so the hashes in the tables confirm no
   * guess about their content without the key), `"tag"` authenticates a
   * list's hashes for its row.
   *
   * @example
   * ```ts
   * const name = serde.digest(serde.currentKeyId, "hash", ["msgpack", "\u0000", bytes]).subarray(0, 16);
   * ```
   */
  digest(keyId: string, use: "hash" | "tag", parts: readonly (string | Uint8Array)[]): Buffer {
    let derived = this.#digestKeys.get(keyId);
    if (!derived) {
      const key = this.#keys.get(keyId);
      if (!key) throw new DeserializationError(`Key ${JSON.stringify(keyId)} is not configured (keep old keys in "keys")`);
      const derive = (info: string) => createSecretKey(Buffer.from(hkdfSync("sha256", key, Buffer.alloc(0), info, 32)));
      derived = { hash: derive(DIGEST_INFO.hash), tag: derive(DIGEST_INFO.tag) };
      this.#digestKeys.set(keyId, derived);
    }
    const mac = createHmac("sha256", derived[use]);
    for (const p of parts) mac.update(p);
    return mac.digest();
  }

  /** The type tag prefix and format byte of a value that needs no rewrap (what `reencrypt` selects against). */
  get currentForm(): { typePrefix: string; format: number } {
    return { typePrefix: `${ENCRYPTED_TYPE_PREFIX}${this.#current}:`, format: BOUND };
  }

  /** True when values that are not encrypted are read (the `allowPlaintext` option). */
  get allowsPlaintext(): boolean {
    return this.#allowPlaintext;
  }

  #isCurrent(type: string, data: Uint8Array | string): boolean {
    return typeof type === "string" && type.startsWith(this.currentForm.typePrefix) && data instanceof Uint8Array && data[0] === BOUND;
  }

  async #serialize(data: unknown): Promise<[string, Uint8Array]> {
    const [innerType, plain] = await this.#inner.dumpsTyped(data);
    if (typeof innerType !== "string" || !(plain instanceof Uint8Array)) {
      throw new SerializationError("The inner serializer returned something other than [type, bytes]");
    }
    return [innerType, plain];
  }

  #seal(innerType: string, plain: Uint8Array, row: ValueRow | undefined): [string, Uint8Array] {
    const id = this.#current;
    const format = row ? BOUND : UNBOUND;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#keys.get(id)!, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad(format, id, innerType, row));
    const body = cipher.update(plain);
    const rest = cipher.final(); // empty for GCM, kept for form
    const out = new Uint8Array(1 + IV_BYTES + body.length + rest.length + TAG_BYTES);
    out[0] = format;
    out.set(iv, 1);
    out.set(body, 1 + IV_BYTES);
    out.set(rest, 1 + IV_BYTES + body.length);
    out.set(cipher.getAuthTag(), out.length - TAG_BYTES);
    return [`${ENCRYPTED_TYPE_PREFIX}${id}:${innerType}`, out];
  }

  /** Decrypt (or accept plaintext, when allowed) a value read from `row` (undefined: no row known). */
  #open(type: string, data: Uint8Array | string, row: ValueRow | undefined): { plaintext: true } | { plaintext: false; innerType: string; plain: Uint8Array } {
    if (typeof type !== "string" || !type.startsWith(ENCRYPTED_TYPE_PREFIX)) {
      if (this.#allowPlaintext) return { plaintext: true };
      throw new DeserializationError(
        `Refusing an unencrypted value (type ${JSON.stringify(String(type).slice(0, 40))}): encryption is on. ` +
          "Set allowPlaintext: true only to read rows written before encryption was enabled.",
      );
    }
    const sep = type.indexOf(":", ENCRYPTED_TYPE_PREFIX.length);
    const id = sep < 0 ? "" : type.slice(ENCRYPTED_TYPE_PREFIX.length, sep);
    const innerType = sep < 0 ? "" : type.slice(sep + 1);
    if (!KEY_ID.test(id) || innerType === "") throw new DeserializationError("Malformed encrypted type tag");
    const key = this.#keys.get(id);
    if (!key) throw new DeserializationError(`Value encrypted under key ${JSON.stringify(id)}, which is not configured (keep old keys in "keys")`);
    if (!(data instanceof Uint8Array)) throw new DeserializationError("Encrypted data must be bytes");
    if (data.length < 1 + IV_BYTES + TAG_BYTES) throw new DeserializationError("Encrypted data is truncated");
    const format = data[0];
    if (format !== UNBOUND && format !== BOUND) throw new DeserializationError(`Unknown encryption format version ${format}`);
    if (format === BOUND && !row) {
      throw new DeserializationError("This value is bound to the row that stores it: read it through the saver (loadsTypedForRow), not loadsTyped");
    }
    if (format === UNBOUND && row && !this.#allowUnbound) {
      throw new DeserializationError("Refusing a value not bound to its row (written before row binding, or moved here): allowUnbound is false");
    }
    try {
      const decipher = createDecipheriv("aes-256-gcm", key, data.subarray(1, 1 + IV_BYTES), { authTagLength: TAG_BYTES });
      decipher.setAAD(aad(format, id, innerType, format === BOUND ? row : undefined));
      decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
      const body = decipher.update(data.subarray(1 + IV_BYTES, data.length - TAG_BYTES));
      const rest = decipher.final();
      return { plaintext: false, innerType, plain: rest.length === 0 ? body : Buffer.concat([body, rest]) };
    } catch (cause) {
      throw new DeserializationError(
        `Could not decrypt a value under key ${JSON.stringify(id)}: wrong key, or the data or its type tag were altered` +
          (format === BOUND ? ", or it was moved from another row" : ""),
        { cause },
      );
    }
  }
}

function aad(format: typeof UNBOUND | typeof BOUND, id: string, innerType: string, row: ValueRow | undefined): Buffer {
  const base = `${AAD_LABEL[format]}\u0000${id}\u0000${innerType}`;
  return Buffer.from(row ? `${base}\u0000${rowIdentity(row)}` : base, "utf8");
}

/** A private copy of the key: later changes to the caller's buffer do not affect it. */
function toKeyObject(id: string, key: EncryptionKey): KeyObject {
  const field = `keys[${JSON.stringify(id)}]`;
  if (key instanceof KeyObject) {
    if (key.type !== "secret" || key.symmetricKeySize !== 32) throw new InvalidOptionsError(field, "expected a 32-byte secret KeyObject");
    return key;
  }
  if (!(key instanceof Uint8Array) || key.length !== 32) {
    throw new InvalidOptionsError(field, "expected 32 bytes (AES-256), e.g. Buffer.from(base64Key, \"base64\")");
  }
  return createSecretKey(Buffer.from(key));
}
