/**
 * Durations, the one parser for every option and flag that takes one (prune's
 * and retention's rules, `grace`, `keepTombstones`, `lockTimeout`, the saver's
 * `ttl` and `runLeaseMs`, the store's TTLs, the CLI's `--older-than`, `--grace`,
 * `--wait`...): a number (milliseconds; minutes for the store's TTLs, as
 * LangGraph's store counts them), or a string of one or more
 * `<number><unit>` parts (`ms`, `s`, `m`, `h`, `d`, `w`), e.g. `"90d"`,
 * `"1h30m"`, `"500ms"`. Zero is written `0`, `"0"` or `"0s"` alike, and means
 * the same wherever a duration may be zero (a grace period turned off); where
 * it may not, all three are refused the same way (STYLE habit 15).
 */
import { InvalidOptionsError } from "./errors.js";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** What a duration option accepts besides a positive duration. */
export interface DurationRule {
  /** Zero allowed (it turns something off, or keeps nothing). Default: refused, "must be longer than zero". */
  zero?: boolean;
  /** What a bare number counts. Default milliseconds; the store's TTLs count minutes. */
  numberUnit?: "ms" | "minutes";
}

/**
 * A duration in milliseconds, or what is wrong with it (without the option's
 * name: the caller's error names it, as an option, an input field or a flag).
 *
 * @example
 * ```ts
 * readDuration("0s", { zero: true }); // { ms: 0 }
 * readDuration("0s"); // { problem: "must be longer than zero" }
 * ```
 */
export function readDuration(value: unknown, rule: DurationRule = {}): { ms: number } | { problem: string } {
  const unit = rule.numberUnit === "minutes" ? "minutes" : "milliseconds";
  let ms: number;
  if (typeof value === "number") {
    if (!Number.isFinite(value) || value < 0) return { problem: `expected a duration: a number of ${unit} (${rule.zero ? "0 or more" : "more than 0"}) or a string such as "30d"` };
    ms = rule.numberUnit === "minutes" ? value * 60_000 : value;
  } else if (typeof value === "string") {
    const text = value.trim().toLowerCase();
    // A bare zero needs no unit: it is zero in every unit. Any other bare number would be a guess.
    if (/^0+(\.0+)?$/.test(text)) ms = 0;
    else {
      const parts = [...text.matchAll(/(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)/g)];
      if (parts.length === 0 || parts.map((p) => p[0]).join("").replace(/\s/g, "") !== text.replace(/\s/g, "")) {
        return { problem: `cannot parse ${JSON.stringify(value)}; use e.g. "30d", "12h", "1h30m", "500ms"${rule.zero ? ', or "0"' : ""}` };
      }
      ms = parts.reduce((sum, p) => sum + Number(p[1]) * UNIT_MS[p[2]!]!, 0);
    }
  } else {
    return { problem: `expected a duration such as "30d", "12h" or a number of ${unit}` };
  }
  if (ms === 0 && !rule.zero) return { problem: "must be longer than zero" };
  return { ms };
}

/**
 * Parse a duration into milliseconds; throws {@link InvalidOptionsError} naming `option`.
 *
 * @example
 * ```ts
 * parseDuration("1h30m", "olderThan"); // 5400000
 * parseDuration("0s", "grace", { zero: true }); // 0, as 0 and "0" give
 * ```
 */
export function parseDuration(value: unknown, option: string, rule: DurationRule = {}): number {
  const read = readDuration(value, rule);
  if ("problem" in read) throw new InvalidOptionsError(option, read.problem);
  return read.ms;
}
