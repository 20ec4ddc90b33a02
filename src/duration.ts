/**
 * Durations for retention options: a number of milliseconds, or a string of
 * one or more `<number><unit>` parts (`ms`, `s`, `m`, `h`, `d`, `w`), e.g.
 * `"90d"`, `"1h30m"`, `"500ms"`.
 */
import { InvalidOptionsError } from "./errors.js";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * Parse a duration into milliseconds; throws {@link InvalidOptionsError} naming `option`.
 *
 * @example
 * ```ts
 * parseDuration("1h30m", "olderThan"); // 5400000
 * ```
 */
export function parseDuration(value: unknown, option: string): number {
  if (typeof value === "number") {
    if (!Number.isFinite(value) || value <= 0) throw new InvalidOptionsError(option, "expected a positive number of milliseconds");
    return value;
  }
  if (typeof value !== "string") throw new InvalidOptionsError(option, 'expected a duration such as "30d", "12h" or a number of milliseconds');
  const text = value.trim().toLowerCase();
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("").replace(/\s/g, "") !== text.replace(/\s/g, "")) {
    throw new InvalidOptionsError(option, `cannot parse ${JSON.stringify(value)}; use e.g. "30d", "12h", "1h30m", "500ms"`);
  }
  const ms = parts.reduce((sum, p) => sum + Number(p[1]) * UNIT_MS[p[2]!]!, 0);
  if (!(ms > 0)) throw new InvalidOptionsError(option, "must be longer than zero");
  return ms;
}
