/**
 * Waiting out failures that may pass (the database not reachable yet or
 * restarting, a deadlock, a lock wait that timed out): jittered exponential
 * backoff, as `migrate`, `setup()` and the CLI's `migrate --wait` use it. Its
 * own file so that migrate.ts stays the migration run.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { CheckpointerError, InvalidOptionsError, sqlStateOf } from "../errors.js";
import { emit, type EventHandler } from "../events.js";

/**
 * Retrying a migration that failed for a reason that may pass (the database
 * not reachable yet or restarting, a deadlock, a serialization failure, a lock
 * wait that timed out): jittered exponential backoff between attempts. With
 * the defaults, about 30 seconds of waiting in all.
 *
 * @example
 * ```ts
 * await migrate({ pool, schema: "agents", retry: { attempts: 20, initialDelayMs: 500, maxDelayMs: 10_000 } });
 * ```
 */
export interface RetryOptions {
  /** Total attempts, the first included. Default 10. */
  attempts?: number;
  /** First wait in ms; doubles on each retry. Default 250. */
  initialDelayMs?: number;
  /** Cap on one wait in ms. Default 5000. */
  maxDelayMs?: number;
  /**
   * No retry starts later than this many ms after the first attempt began
   * (the CLI's `migrate --wait`). Default: no bound but `attempts`, which may
   * then be `Infinity`.
   */
  maxElapsedMs?: number;
}

/**
 * The defaults of {@link RetryOptions}.
 *
 * @example
 * ```ts
 * await saver.setup({ retry: { ...DEFAULT_RETRY, attempts: 30 } }); // wait about two minutes
 * ```
 */
export const DEFAULT_RETRY: Readonly<Required<RetryOptions>> = Object.freeze({ attempts: 10, initialDelayMs: 250, maxDelayMs: 5000, maxElapsedMs: Infinity });

/** `retry` checked, with its defaults (see {@link RetryOptions}); `open()` checks it before anything is opened. */
export function checkRetry(retry: unknown): Required<RetryOptions> {
  if (retry === false) return { ...DEFAULT_RETRY, attempts: 1 };
  if (retry === undefined) return DEFAULT_RETRY;
  if (retry === null || typeof retry !== "object") throw new InvalidOptionsError("retry", "expected { attempts?, initialDelayMs?, maxDelayMs?, maxElapsedMs? } or false");
  for (const key of Object.keys(retry)) {
    if (!(key in DEFAULT_RETRY)) throw new InvalidOptionsError(`retry.${key}`, "is not an option (attempts, initialDelayMs, maxDelayMs, maxElapsedMs)");
  }
  const r = { ...DEFAULT_RETRY, ...(retry as RetryOptions) };
  if (!(Number.isInteger(r.attempts) || r.attempts === Infinity) || r.attempts < 1) throw new InvalidOptionsError("retry.attempts", "expected an integer >= 1 (or Infinity)");
  if (!(r.initialDelayMs >= 0) || !(r.maxDelayMs >= 0)) throw new InvalidOptionsError("retry.initialDelayMs/maxDelayMs", "expected non-negative numbers");
  if (!(r.maxElapsedMs >= 0)) throw new InvalidOptionsError("retry.maxElapsedMs", "expected a non-negative number of milliseconds");
  return r;
}

/** What {@link withBackoff} tells its caller before each retry. */
export interface RetryNotice {
  /** The attempt that failed (1-based), of `attempts` (Infinity: bounded by time only). */
  attempt: number;
  attempts: number;
  delayMs: number;
  /** The SQLSTATE, or the socket error's code (ECONNREFUSED...). */
  code: string | undefined;
  error: CheckpointerError;
}

/**
 * Run `fn` until it succeeds, fails for good (an error that is not a
 * retryable {@link CheckpointerError}), or runs out of attempts or time;
 * jittered exponential backoff between attempts, each retry announced to
 * `onRetry` first. setup(), migrate() and the CLI's `migrate --wait` wait this way.
 *
 * @example
 * ```ts
 * await withBackoff({ attempts: Infinity, maxElapsedMs: 60_000 }, () => migrate({ connectionString, retry: false }), (n) => console.error(`attempt ${n.attempt} failed`));
 * ```
 */
export async function withBackoff<T>(retry: RetryOptions | false | undefined, fn: () => Promise<T>, onRetry: (notice: RetryNotice) => void): Promise<T> {
  const { attempts, initialDelayMs, maxDelayMs, maxElapsedMs } = checkRetry(retry);
  const started = performance.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof CheckpointerError) || !err.retryable || attempt >= attempts) throw err;
      const cap = Math.min(maxDelayMs, initialDelayMs * 2 ** Math.min(attempt - 1, 30));
      const delayMs = Math.round(cap / 2 + (Math.random() * cap) / 2);
      if (performance.now() - started + delayMs > maxElapsedMs) throw err;
      onRetry({ attempt, attempts, delayMs, code: codeOf(err), error: err });
      await sleep(delayMs);
    }
  }
}

/** Run `fn` with {@link withBackoff}; report each retry as a `retry` event (both migration tracks, the store's included). */
export function withRetry<T>(
  { operation, schema, retry, onEvent }: { operation: "setup" | "migrate"; schema: string; retry: RetryOptions | false | undefined; onEvent: EventHandler | undefined },
  fn: () => Promise<T>,
): Promise<T> {
  return withBackoff(retry, fn, ({ attempt, attempts, delayMs, code, error }) =>
    emit(onEvent, { type: "retry", operation, schema, attempt, attempts, delayMs, code, message: error.message }),
  );
}

/** The underlying code of an error: its SQLSTATE, or the socket error's code (ECONNREFUSED...). */
function codeOf(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const state = sqlStateOf(e);
    if (state) return state;
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && !(e instanceof CheckpointerError)) return code;
  }
  return undefined;
}
