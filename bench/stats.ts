/**
 * Small statistics helpers and the interleaved comparison loop.
 *
 * The machine is noisy (identical runs differ 0.85x-2x), so contenders are never
 * measured one after the other: every round runs small batches of each contender
 * in alternating order (A B C | C B A | A B C ...), and ratios are taken per round
 * (same time window for both sides), then summarized as median [min-max] over rounds.
 */

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export interface Spread {
  median: number;
  min: number;
  max: number;
  /** One value per round. */
  values: number[];
}

export function spread(values: readonly number[]): Spread {
  return { median: median(values), min: Math.min(...values), max: Math.max(...values), values: [...values] };
}

/** One contender of a comparison: `op(i)` is one timed unit (counted as `unitsPerOp` operations). */
export interface Contender {
  name: string;
  op: (i: number) => Promise<unknown>;
  /** Operations one call of `op` performs (e.g. 10 parallel invokes). Default 1. */
  unitsPerOp?: number;
}

export interface RoundStats {
  /** Median latency of one `op` call in this round, ms. */
  p50: number;
  p99: number;
  /** Units per second over the time spent in this contender's batches. */
  opsPerSec: number;
}

export interface ContenderStats {
  name: string;
  rounds: RoundStats[];
  /** Median over rounds of the per-round p50 (ms). */
  p50: number;
  /** p99 of all samples pooled over rounds (ms). */
  p99: number;
  /** Median over rounds of the per-round ops/s. */
  opsPerSec: number;
  samples: number;
}

export interface CompareOptions {
  rounds: number;
  /** Batches per round; the order flips every batch. */
  batches: number;
  /** `op` calls per contender per batch. */
  batchSize: number;
  /** Untimed calls per contender before the first round. */
  warmup: number;
}

/**
 * Runs the contenders interleaved and returns per-contender stats. The `i`
 * passed to `op` counts that contender's calls (warmup included), so each
 * contender sees the same sequence of inputs.
 */
export async function compare(contenders: Contender[], opts: CompareOptions): Promise<Map<string, ContenderStats>> {
  const counters = new Map<string, number>(contenders.map((c) => [c.name, 0]));
  const next = (c: Contender) => {
    const i = counters.get(c.name)!;
    counters.set(c.name, i + 1);
    return i;
  };
  for (let w = 0; w < opts.warmup; w++) {
    for (const c of w % 2 ? [...contenders].reverse() : contenders) await c.op(next(c));
  }
  const samples = new Map<string, number[][]>(contenders.map((c) => [c.name, []]));
  const busy = new Map<string, number[]>(contenders.map((c) => [c.name, []]));
  for (let r = 0; r < opts.rounds; r++) {
    for (const c of contenders) {
      samples.get(c.name)!.push([]);
      busy.get(c.name)!.push(0);
    }
    for (let b = 0; b < opts.batches; b++) {
      // Rotate the starting contender as well as flipping, so no one always follows the same one.
      const base = b % 2 === 0 ? contenders : [...contenders].reverse();
      const shift = Math.floor(b / 2) % contenders.length;
      const order = [...base.slice(shift), ...base.slice(0, shift)];
      for (const c of order) {
        const mine = samples.get(c.name)![r]!;
        const t0 = performance.now();
        for (let k = 0; k < opts.batchSize; k++) {
          const s = performance.now();
          await c.op(next(c));
          mine.push(performance.now() - s);
        }
        busy.get(c.name)![r]! += performance.now() - t0;
      }
    }
  }
  const out = new Map<string, ContenderStats>();
  for (const c of contenders) {
    const units = c.unitsPerOp ?? 1;
    const perRound = samples.get(c.name)!;
    const rounds = perRound.map((xs, r) => {
      const s = [...xs].sort((a, b) => a - b);
      return { p50: percentile(s, 50), p99: percentile(s, 99), opsPerSec: (xs.length * units * 1000) / busy.get(c.name)![r]! };
    });
    const pooled = perRound.flat().sort((a, b) => a - b);
    out.set(c.name, {
      name: c.name,
      rounds,
      p50: median(rounds.map((x) => x.p50)),
      p99: percentile(pooled, 99),
      opsPerSec: median(rounds.map((x) => x.opsPerSec)),
      samples: pooled.length,
    });
  }
  return out;
}

/** Per-round ratio a/b of a per-round statistic, summarized over rounds. */
export function roundRatio(a: ContenderStats, b: ContenderStats, pick: (r: RoundStats) => number): Spread {
  return spread(a.rounds.map((r, i) => pick(r) / pick(b.rounds[i]!)));
}

export function fmt(n: number | undefined, digits = 2): string {
  if (n === undefined || !Number.isFinite(n)) return "-";
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString("en-US");
  if (Math.abs(n) >= 100) return n.toFixed(0);
  if (Math.abs(n) >= 10) return n.toFixed(1);
  return n.toFixed(digits);
}

export function fmtSpread(s: Spread | undefined, digits = 2): string {
  if (!s) return "-";
  return `${s.median.toFixed(digits)}x [${s.min.toFixed(digits)}-${s.max.toFixed(digits)}]`;
}
