/**
 * Turn a lineage conflict into "process the second message after the first":
 * re-run the whole invocation from the new head, a bounded number of times,
 * with jittered exponential backoff.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { CheckpointConflictError, InvalidOptionsError } from "./errors.js";

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
export async function withConflictRetry<T>(fn: () => Promise<T>, options: ConflictRetryOptions = {}): Promise<T> {
  const attempts = options.attempts ?? 5;
  const base = options.baseDelayMs ?? 10;
  const cap = options.maxDelayMs ?? 1000;
  if (!Number.isInteger(attempts) || attempts < 1) throw new InvalidOptionsError("attempts", "expected an integer >= 1");
  if (!(base >= 0) || !(cap >= 0)) throw new InvalidOptionsError("baseDelayMs/maxDelayMs", "expected non-negative numbers");
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof CheckpointConflictError) || attempt >= attempts) throw err;
      options.onRetry?.(err, attempt);
      await sleep(Math.random() * Math.min(cap, base * 2 ** (attempt - 1)));
    }
  }
}
