/**
 * Small statistics helpers and the interleaved comparison loop.
 *
 * The machine is noisy (identical runs differ 0.85x-2x), so contenders are never
 * measured one after the other: every round runs small batches of each contender
 * in alternating order (A B C | C B A | A B C ...), and ratios are taken per round
 * (same time window for both sides), then summarized as median [min-max] over rounds.
 *
 * A ratio between two contenders is also given with a 95% confidence interval
 * (`pairedRatio`): each batch of A is paired with the batch of B of the same round
 * and batch number (they ran back to back, in alternating order), the paired
 * ratio is B's batch time ÷ A's batch time (= A's ops/s ÷ B's, same batch size),
 * and the estimate is the geometric mean of those ratios, its interval a
 * percentile bootstrap over the pairs (resampled with replacement, fixed seed).
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

/** One batch of one contender: its wall time and the units it completed. */
export interface BatchTime {
  round: number;
  batch: number;
  ms: number;
  units: number;
}

export interface ContenderStats {
  name: string;
  rounds: RoundStats[];
  /** Every timed batch, in the order run: the unit of the paired bootstrap. */
  batches: BatchTime[];
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
  const batchTimes = new Map<string, BatchTime[]>(contenders.map((c) => [c.name, []]));
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
        const ms = performance.now() - t0;
        busy.get(c.name)![r]! += ms;
        batchTimes.get(c.name)!.push({ round: r, batch: b, ms, units: opts.batchSize * (c.unitsPerOp ?? 1) });
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
      batches: batchTimes.get(c.name)!,
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

/** A ratio with its 95% confidence interval (see the file comment). */
export interface Ratio {
  /** Geometric mean of the paired per-batch ratios. */
  estimate: number;
  /** 95% percentile-bootstrap interval of `estimate`. */
  lo: number;
  hi: number;
  /** Number of pairs (batches) it rests on. */
  pairs: number;
  /** Per-round ratios of ops/s, median [min-max] (the earlier summary, kept for comparison). */
  rounds: Spread;
}

export const BOOTSTRAP_RESAMPLES = 10_000;
export const CONFIDENCE = 0.95;

/** A small deterministic PRNG (mulberry32): the same data gives the same interval (and storage.ts the same text). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Geometric mean and percentile-bootstrap interval of paired log-ratios.
 * `logs[k]` = ln(ratio of pair k).
 */
export function bootstrapGeomean(logs: readonly number[], resamples = BOOTSTRAP_RESAMPLES, confidence = CONFIDENCE): { estimate: number; lo: number; hi: number } {
  const n = logs.length;
  if (n === 0) return { estimate: Number.NaN, lo: Number.NaN, hi: Number.NaN };
  const mean = logs.reduce((x, y) => x + y, 0) / n;
  const rand = prng(0x5eed + n);
  const means = new Float64Array(resamples);
  for (let b = 0; b < resamples; b++) {
    let sum = 0;
    for (let k = 0; k < n; k++) sum += logs[Math.floor(rand() * n)]!;
    means[b] = sum / n;
  }
  means.sort();
  const tail = (1 - confidence) / 2;
  const at = (q: number) => means[Math.min(resamples - 1, Math.max(0, Math.floor(q * resamples)))]!;
  return { estimate: Math.exp(mean), lo: Math.exp(at(tail)), hi: Math.exp(at(1 - tail)) };
}

/**
 * a's throughput ÷ b's, paired batch by batch (same round, same batch number),
 * with a 95% bootstrap interval. Throughput per batch = units / time, so batches
 * of different sizes (none today) would still compare fairly.
 */
export function pairedRatio(a: ContenderStats, b: ContenderStats): Ratio {
  const key = (t: BatchTime) => `${t.round}/${t.batch}`;
  const bBy = new Map(b.batches.map((t) => [key(t), t]));
  const logs: number[] = [];
  for (const ta of a.batches) {
    const tb = bBy.get(key(ta));
    if (!tb) continue;
    logs.push(Math.log(ta.units / ta.ms / (tb.units / tb.ms)));
  }
  return { ...bootstrapGeomean(logs), pairs: logs.length, rounds: roundRatio(a, b, (r) => r.opsPerSec) };
}

/** `1.52x [1.31–1.74]`: the estimate and its 95% interval. */
export function fmtRatio(r: Ratio | undefined, digits = 2): string {
  if (!r || !Number.isFinite(r.estimate)) return "-";
  return `${r.estimate.toFixed(digits)}x [${r.lo.toFixed(digits)}–${r.hi.toFixed(digits)}]`;
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
