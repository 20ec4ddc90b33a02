/**
 * Channel versions: how this saver makes them, reads their counter and keeps
 * a thread in one format.
 *
 * LangGraph treats versions as opaque, but orders them two ways: the next
 * version comes from the largest one of a checkpoint (`maxChannelVersion`,
 * `String.localeCompare` for strings) and a node runs when a channel's
 * version is `>` the one it last saw (code-unit order). Both orders agree on
 * the characters used here (`.`, digits, lowercase letters), so a format only
 * has to sort like its counter. A version must also differ between two
 * branches that reach the same counter (blobs are keyed by version), hence the
 * random part.
 *
 * Three formats, one per thread:
 * - **short** (new threads): `-`, a letter giving the number of base-36
 *   digits of the counter (`a` one, `b` two ...), the counter in base 36, `.`
 *   and 8 random base-36 characters, the first a digit: `-b1k.3xf09qzl`
 *   (counter 56, 13 characters where the long format takes 51). The length
 *   letter keeps the order across 35 -> 36 -> ...; the leading `-` sorts
 *   before every digit, so every short version sorts before every long one.
 *   That is what keeps a rolling deploy (or a rollback of this release) safe:
 *   the previous release reads a short version's counter as 0 and continues
 *   the thread in long versions, which still sort after everything before.
 * - **long**: a 32-digit zero-padded decimal counter, `.`, a random fraction
 *   (`00000000000000000000000000000002.0.27282425125643517`): this package's
 *   earlier format and the Python savers'. Threads in it keep it.
 * - **numeric**: numbers (threads adopted from the official JS saver, which
 *   refuses string versions): counter + a fraction below 1/2.
 */

const LONG_WIDTH = 32;
const RANDOM_CHARS = 8;
// The random part starts with a digit, as a long version's fraction does, so an
// upcast's `.u…` and upgradeState's `.r…` (upcast.ts) sort after every version
// of the same counter in either format. 10 * 36^7: about 7.8e11 values.
const RANDOM_RANGE = 10 * 36 ** (RANDOM_CHARS - 1);
const LONG = /^(\d{32})(?:\.|$)/;
const SHORT = /^-([a-z])([0-9a-z]+)(?:\.|$)/;

export type VersionFormat = "short" | "long" | "numeric";

interface Parsed {
  format: VersionFormat;
  counter: number;
  /** What follows the counter and its dot ("" if nothing). */
  rest: string;
}

/** The format and counter of a version; unknown strings count as long with the counter their leading digits give. */
export function parseVersion(version: unknown): Parsed {
  if (typeof version === "number") return { format: "numeric", counter: Number.isFinite(version) ? Math.floor(version) : 0, rest: "" };
  const text = String(version ?? "");
  const short = SHORT.exec(text);
  if (short && short[2]!.length === short[1]!.charCodeAt(0) - 96) {
    return { format: "short", counter: Number.parseInt(short[2]!, 36), rest: text.slice(short[0].length) };
  }
  const long = LONG.exec(text);
  if (long) return { format: "long", counter: Number.parseInt(long[1]!, 10), rest: text.slice(long[0].length) };
  // Anything else (a decimal string of another width, garbage): its leading digits, as before short versions existed.
  const dot = text.indexOf(".");
  return { format: "long", counter: Number.parseInt(dot < 0 ? text : text.slice(0, dot), 10) || 0, rest: dot < 0 ? "" : text.slice(dot + 1) };
}

/** The counter of a version (0 for none). */
export function versionCounter(version: unknown): number {
  return version === undefined || version === null ? 0 : parseVersion(version).counter;
}

/** The counter written in `format` (`short` or `long`), without the dot and what follows. */
export function counterText(counter: number, format: "short" | "long"): string {
  if (format === "long") return String(counter).padStart(LONG_WIDTH, "0");
  const digits = counter.toString(36);
  return `-${String.fromCharCode(96 + digits.length)}${digits}`;
}

/**
 * The version after `current` in the same format (short for a new thread).
 * Its counter is one more; the random part differs between branches.
 */
export function nextVersion(current: string | number | undefined): string | number {
  if (typeof current === "number") return Math.floor(current) + 1 + Math.random() / 2;
  if (current === undefined || current === null) return `${counterText(1, "short")}.${randomPart()}`;
  const { format, counter } = parseVersion(current);
  if (format === "short") return `${counterText(counter + 1, "short")}.${randomPart()}`;
  // Long keeps its shape exactly: a random fraction, as the Python savers write.
  return `${counterText(counter + 1, "long")}.${Math.random()}`;
}

function randomPart(): string {
  return Math.floor(Math.random() * RANDOM_RANGE)
    .toString(36)
    .padStart(RANDOM_CHARS, "0");
}

/**
 * The same version in the long format (counter and what follows kept): for the
 * Python saver, which reads a version's counter with `int(v.split(".")[0])`.
 */
export function toLongVersion(version: string): string {
  const { format, counter, rest } = parseVersion(version);
  return format === "short" ? `${counterText(counter, "long")}.${rest}` : version;
}
