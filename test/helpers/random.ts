/**
 * Seeded randomness for the fuzz and property tests: the same seed gives the
 * same cases, so a failure replays.
 *
 * @example
 * ```ts
 * const rng = prng(42);
 * const s = randomString(rng, 201, { bom: true }); // 201 UTF-8 bytes, starting with U+FEFF
 * ```
 */

/** mulberry32: small, fast, reproducible. */
export function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (max: number) => Math.floor(next() * max);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const bytes = (len: number) => Uint8Array.from({ length: len }, () => int(256));
  return { next, int, pick, bytes };
}

export type Rng = ReturnType<typeof prng>;

/** Characters that are easy to get wrong, besides random ones of each UTF-8 length. */
const SPECIAL = ["\ufeff", "\ufffd", "\ufffe", "\uffff", "\u0000", "\u2028", "\ud83d\ude00", "\udbff\udfff", "\u0080", "\u07ff", "\u0800"];

/** One random well-formed character of at most `room` UTF-8 bytes (room >= 1). */
function char(rng: Rng, room: number): string {
  const kind = rng.int(room >= 4 ? 6 : room >= 3 ? 5 : room >= 2 ? 4 : 3);
  switch (kind) {
    case 0:
    case 1:
    case 2: // one byte (control characters included)
      return String.fromCharCode(rng.int(0x80));
    case 3: // two bytes
      return String.fromCharCode(0x80 + rng.int(0x800 - 0x80));
    case 4: {
      // three bytes (never a surrogate), or a special one that fits
      const special = SPECIAL.filter((c) => Buffer.byteLength(c) <= room);
      if (rng.int(4) === 0) return rng.pick(special);
      const unit = 0x800 + rng.int(0x10000 - 0x800 - 0x800);
      return String.fromCharCode(unit < 0xd800 ? unit : unit + 0x800);
    }
    default:
      return String.fromCodePoint(0x10000 + rng.int(0x110000 - 0x10000));
  }
}

/**
 * A random well-formed string (no lone surrogates: they have their own rule)
 * of exactly `utf8Bytes` UTF-8 bytes. `bom`: it starts with U+FEFF (when 3
 * bytes fit); `twice`: with two of them.
 */
export function randomString(rng: Rng, utf8Bytes: number, options: { bom?: boolean; twice?: boolean } = {}): string {
  let out = "";
  let used = 0;
  const marks = options.twice ? 2 : options.bom ? 1 : 0;
  for (let i = 0; i < marks && used + 3 <= utf8Bytes; i++) {
    out += "\ufeff";
    used += 3;
  }
  const parts: string[] = [out];
  while (used < utf8Bytes) {
    const c = char(rng, utf8Bytes - used);
    parts.push(c);
    used += Buffer.byteLength(c);
  }
  return parts.join("");
}

/**
 * Lengths (UTF-8 bytes) across every boundary of the msgpack codec: every
 * length up to 300 (fixstr ends at 31, the key cache at 16, the encoder's
 * TextEncoder starts above 50 UTF-16 units, the decoder's TextDecoder above
 * 200 bytes, str8 ends at 255), then around str16's end (65535).
 */
export function boundaryLengths(): number[] {
  const out: number[] = [];
  for (let n = 0; n <= 300; n++) out.push(n);
  for (let n = 65530; n <= 65541; n++) out.push(n);
  return out;
}
