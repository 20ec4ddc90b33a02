/**
 * Retrying whole invocations: after a lineage conflict (`withConflictRetry`:
 * "process the second message after the first"), or after any retryable
 * failure, a failover included (`withRetry`). Bounded, with jittered
 * exponential backoff.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { CheckpointConflictError, InvalidOptionsError, isRetryable } from "./errors.js";
import type { RetryOptions } from "./db/migrate.js";

export interface ConflictRetryOptions {
  /** Total attempts, the first included. Default 5. */
  attempts?: number;
  /** First backoff in ms; doubles each retry, with full jitter. Default 10. */
  baseDelayMs?: number;
  /** Cap on one backoff in ms. Default 1000. */
  maxDelayMs?: number;
  /** Called before each retry with the conflict that caused it. */
  onRetry?: (error: CheckpointConflictError, attempt: number) => void;
}

/**
 * Options of {@link withRetry}: the names of `migrate`'s {@link RetryOptions},
 * with defaults for retrying an invocation through a failover, and a time budget.
 */
export interface WithRetryOptions extends RetryOptions {
  /** Total attempts, the first included. Default: unlimited within `maxElapsedMs`. */
  attempts?: number;
  /** First backoff in ms; doubles each retry, with full jitter. Default 100. */
  initialDelayMs?: number;
  /** Cap on one backoff in ms. Default 2000. */
  maxDelayMs?: number;
  /**
   * No retry starts later than this many ms after the first attempt began.
   * Default 60000: longer than a typical failover (a crash noticed, a standby
   * promoted, a silent link timed out).
   */
  maxElapsedMs?: number;
  /** Which failures to retry. Default {@link isRetryable}. */
  retryIf?: (error: unknown) => boolean;
  /** Called before each retry with the failure that caused it. */
  onRetry?: (error: unknown, attempt: number) => void;
}

/**
 * Run `fn`; when it fails with {@link CheckpointConflictError}, run it again.
 * Other errors, and the last conflict, propagate unchanged.
 *
 * @example
 * ```ts
 * const saver = new PostgresSaver(pool, { lineage: "linear" });
 * const graph = builder.compile({ checkpointer: saver });
 * const result = await withConflictRetry(() => graph.invoke({ messages: [msg] }, { configurable: { thread_id } }));
 * ```
 */
export function withConflictRetry<T>(fn: () => Promise<T>, options: ConflictRetryOptions = {}): Promise<T> {
  return retrying(fn, {
    attempts: options.attempts ?? 5,
    maxElapsedMs: Infinity,
    baseDelayMs: options.baseDelayMs ?? 10,
    maxDelayMs: options.maxDelayMs ?? 1000,
    retryIf: (err) => err instanceof CheckpointConflictError,
    onRetry: options.onRetry as ((error: unknown, attempt: number) => void) | undefined,
  });
}

/**
 * Run `fn`; when it fails with a retryable error ({@link isRetryable}: a
 * lost connection, a server shutting down, restarting, read-only or failing
 * over, a timeout, a lineage conflict...), run it again until it succeeds, the
 * attempts or the time run out, or a failure is not retryable. The last
 * failure propagates unchanged.
 *
 * Re-running a whole invocation is safe for the checkpointer (a re-put of the
 * same checkpoint is accepted once, writes are idempotent per task); your
 * nodes run again, so their side effects should be idempotent too, e.g.
 * messages with stable ids (LangGraph's messages reducer replaces a message
 * by id).
 *
 * @example
 * ```ts
 * const result = await withRetry(() => graph.invoke({ messages: [msg] }, { configurable: { thread_id } }), {
 *   onRetry: (err, attempt) => log.warn({ err, attempt }, "retrying"),
 * });
 * ```
 */
export function withRetry<T>(fn: () => Promise<T>, options: WithRetryOptions = {}): Promise<T> {
  return retrying(fn, {
    attempts: options.attempts ?? Infinity,
    maxElapsedMs: options.maxElapsedMs ?? 60_000,
    baseDelayMs: options.initialDelayMs ?? 100,
    maxDelayMs: options.maxDelayMs ?? 2000,
    retryIf: options.retryIf ?? isRetryable,
    onRetry: options.onRetry,
  });
}

interface Loop {
  attempts: number;
  maxElapsedMs: number;
  baseDelayMs: number;
  maxDelayMs: number;
  retryIf: (error: unknown) => boolean;
  onRetry: ((error: unknown, attempt: number) => void) | undefined;
}

async function retrying<T>(fn: () => Promise<T>, o: Loop): Promise<T> {
  if (!(o.attempts >= 1) || (Number.isFinite(o.attempts) && !Number.isInteger(o.attempts))) {
    throw new InvalidOptionsError("attempts", "expected an integer >= 1");
  }
  if (!(o.baseDelayMs >= 0) || !(o.maxDelayMs >= 0)) throw new InvalidOptionsError("initialDelayMs/baseDelayMs/maxDelayMs", "expected non-negative numbers");
  if (!(o.maxElapsedMs >= 0)) throw new InvalidOptionsError("maxElapsedMs", "expected a non-negative number");
  if (typeof o.retryIf !== "function") throw new InvalidOptionsError("retryIf", "expected a function");
  const started = performance.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= o.attempts || !o.retryIf(err)) throw err;
      const delay = Math.random() * Math.min(o.maxDelayMs, o.baseDelayMs * 2 ** (attempt - 1));
      if (performance.now() + delay - started > o.maxElapsedMs) throw err;
      o.onRetry?.(err, attempt);
      await sleep(delay);
    }
  }
}
