/**
 * Structured events: every important step is observable. Pass `onEvent` to
 * the saver (or to `migrate`) and route events to a logger or tracer.
 *
 * @example
 * ```ts
 * const saver = new PostgresSaver(pool, {
 *   onEvent: (e) => (e.type === "conflict" || e.type === "fork" ? logger.warn(e) : logger.debug(e)),
 * });
 * ```
 */
import { channel } from "node:diagnostics_channel";
import type { SuggestedCommand } from "./hint.js";

export type SaverEvent =
  | {
      type: "put";
      threadId: string;
      checkpointNs: string;
      checkpointId: string;
      parentCheckpointId: string | undefined;
      blobs: number;
      /** The checkpoint's and its values' size as bound parameters (an upper bound); writes it carried are their own calls' `putWrites` events. */
      bytes: number;
      /** `putWrites` calls that waited for this put and went out in its statement (docs/architecture.md, "writes ride the next put"). */
      writes: number;
      /** Statements sent: more than 1 when the head moved under the put, or its parent was checked. */
      attempts: number;
      durationMs: number;
    }
  | {
      type: "putWrites";
      threadId: string;
      checkpointNs: string;
      checkpointId: string;
      taskId: string;
      writes: number;
      /** The rows' size as bound parameters. */
      bytes: number;
      durationMs: number;
    }
  | {
      /** A linear-mode put was rejected: another writer moved the head first. */
      type: "conflict";
      threadId: string;
      checkpointNs: string;
      checkpointId: string;
      expectedParent: string | undefined;
      actualHead: string | undefined;
      reason: "head-moved" | "run-in-progress";
      durationMs: number;
    }
  | {
      /**
       * A put was refused because its parent is not stored and the checkpoint
       * cannot stand without it (see `CheckpointParentMissingError`).
       */
      type: "parentMissing";
      threadId: string;
      checkpointNs: string;
      checkpointId: string;
      parentCheckpointId: string;
      /** Channel values the checkpoint refers to that are not stored (empty: linear mode refused the unknown parent itself). */
      missing: { channel: string; version: string }[];
      durationMs: number;
    }
  | {
      /**
       * A put or putWrites was refused because its thread was deleted and it
       * continues the deleted history (see `ThreadDeletedError`); nothing was written.
       */
      type: "deletedThreadWrite";
      threadId: string;
      checkpointNs: string;
      checkpointId: string;
      operation: "put" | "putWrites";
      reason: "history" | "thread";
      durationMs: number;
    }
  | {
      /** `deleteThread` deleted a thread (every namespace) and left its tombstone. */
      type: "deleteThread";
      threadId: string;
      checkpoints: number;
      writes: number;
      blobs: number;
      durationMs: number;
    }
  | {
      /** `copyThread` copied a thread's history (or the part up to `upTo`) to another thread id. */
      type: "copyThread";
      fromThreadId: string;
      toThreadId: string;
      upTo: string | undefined;
      /** The target held rows that the copy replaced (`overwrite: true`). */
      overwrote: boolean;
      checkpoints: number;
      writes: number;
      blobs: number;
      durationMs: number;
    }
  | RetentionEvent
  | {
      /** A branch-mode put whose parent was not the head: it started a new branch and displaced the old head. */
      type: "fork";
      threadId: string;
      checkpointNs: string;
      checkpointId: string;
      parentCheckpointId: string | undefined;
      displacedHead: string;
      /** True when the caller asked for the fork (`configurable.allow_fork`). */
      deliberate: boolean;
    }
  | {
      type: "migrate";
      schema: string;
      applied: string[];
      fromVersion: number;
      toVersion: number;
      dryRun: boolean;
      durationMs: number;
    }
  | {
      /**
       * Linear mode: a run's put or putWrites failed, and the run lease it held
       * on the lineage's head was released, so new input is accepted at once.
       */
      type: "leaseReleased";
      threadId: string;
      checkpointNs: string;
      checkpointId: string;
      /** 1 when released right after the failure; more when it had to be retried. */
      attempts: number;
    }
  | {
      /** A pooled connection failed while idle; the pool replaces it. */
      type: "connectionError";
      message: string;
    }
  | {
      /**
       * `setup()` or `migrate` failed for a reason that may pass (database not
       * reachable yet, restarting, a deadlock, a lock wait that timed out) and
       * tries again after `delayMs`.
       */
      type: "retry";
      operation: "setup" | "migrate";
      schema: string;
      /** The attempt that failed (1-based), of `attempts`. */
      attempt: number;
      attempts: number;
      delayMs: number;
      /** SQLSTATE, or the socket error's code (e.g. ECONNREFUSED). */
      code: string | undefined;
      message: string;
    }
  | {
      /**
       * A schema's first migration (`setup()`, `migrate`) found the tables of
       * the official LangGraph saver (`of: "saver"`) or of its PostgresStore
       * (`of: "store"`) in other schemas, and set this one up beside them:
       * they stay as they are, unread. Adopting them is a choice (`adopt`,
       * docs/adoption.md); the message says how.
       */
      type: "officialTablesFound";
      schema: string;
      of: "saver" | "store";
      /** The schemas holding them. */
      schemas: string[];
      message: string;
      /** The CLI command the message suggests (src/hint.ts), as data: the CLI prints it with its connection flags. */
      suggested: SuggestedCommand[];
    }
  | {
      /** The schema was migrated by a newer release whose newer migrations this code works with (additive). */
      type: "schemaNewer";
      schema: string;
      schemaVersion: number;
      codeVersion: number;
    };

/**
 * A run of the saver's background retention (option `retention`): what its
 * `prune` deleted, and when it started and finished by the database's clock;
 * or a run that failed (`retentionFailed`: the message and SQLSTATE or socket
 * code; the next check tries again); or, once, that the schema is not migrated
 * yet (`retentionWaiting`: the first run comes after `setup()` or `migrate`).
 */
export type RetentionEvent =
  | {
      type: "retention";
      schema: string;
      checkpoints: number;
      writes: number;
      blobs: number;
      bytes: number;
      threadsExpired: number;
      threadsSkipped: number;
      tombstones: number;
      threadsScanned: number;
      /** Stopped early by `stopRetention()` or `end()`. */
      aborted: boolean;
      /** ISO 8601, the database's clock. */
      startedAt: string;
      finishedAt: string;
      durationMs: number;
    }
  | { type: "retentionFailed"; schema: string; message: string; code: string | undefined }
  | { type: "retentionWaiting"; schema: string; message: string };

/** Receives structured events. May be async: a rejected promise is contained like a throw. */
export type EventHandler = (event: SaverEvent) => unknown;

/** Which callback failed, for {@link HandlerErrorHandler}. */
export interface HandlerErrorInfo {
  /** The option the failing callback was passed as. */
  handler: "onEvent" | "onProgress";
  /** For `onEvent`: the type of the event it failed on. */
  event?: SaverEvent["type"];
}

/**
 * Receives every error an `onEvent` / `onProgress` callback throws or rejects
 * with (option `onHandlerError`). Without it, the first error of each callback
 * is printed on stderr (as a process warning) and later ones are not.
 * Either way the operation's outcome is unchanged.
 *
 * @example
 * ```ts
 * new PostgresSaver(pool, { onEvent: sendToTracer, onHandlerError: (err, { event }) => log.error({ err, event }, "tracer failed") });
 * ```
 */
export type HandlerErrorHandler = (error: unknown, info: HandlerErrorInfo) => unknown;

/** Callbacks whose failure was already printed: each is reported once, not once per event. */
const warned = new WeakSet<object>();

function isThenable(x: unknown): x is PromiseLike<unknown> {
  return x !== null && (typeof x === "object" || typeof x === "function") && typeof (x as { then?: unknown }).then === "function";
}

/** Run `fn`; whatever it throws or rejects with goes to `fail`, never into the caller or the process. */
function contain(fn: () => unknown, fail: (error: unknown) => void): void {
  try {
    const result = fn();
    if (isThenable(result)) result.then(undefined, fail);
  } catch (error) {
    fail(error);
  }
}

function warnOnce(callback: object, name: string, error: unknown, info: HandlerErrorInfo): void {
  if (warned.has(callback)) return;
  warned.add(callback);
  const where = info.event ? ` on a "${info.event}" event` : "";
  process.emitWarning(
    `${name} handler failed${where}: ${String(error)}. The operation was not affected; further failures of this handler are not reported ` +
      "(pass onHandlerError to receive each one).",
    "CheckpointerHandlerWarning",
  );
}

/**
 * Wrap a user callback (`onEvent`, `onProgress`) so that nothing it does,
 * throwing or returning a rejected promise, reaches the operation or crashes
 * the process: failures go to `onHandlerError`, else once to stderr.
 *
 * @example
 * ```ts
 * const onEvent = guard(options.onEvent, "onEvent", options.onHandlerError);
 * onEvent?.({ type: "connectionError", message: "..." }); // never throws
 * ```
 */
export function guard<A extends [unknown?]>(
  callback: ((...args: A) => unknown) | undefined,
  name: HandlerErrorInfo["handler"],
  onHandlerError: HandlerErrorHandler | undefined,
): ((...args: A) => void) | undefined {
  if (!callback) return undefined;
  return (...args: A) =>
    contain(
      () => callback(...args),
      (error) => {
        const event = (args[0] as { type?: unknown } | undefined)?.type;
        const info: HandlerErrorInfo = name === "onEvent" && typeof event === "string" ? { handler: name, event: event as SaverEvent["type"] } : { handler: name };
        if (onHandlerError) contain(() => onHandlerError(error, info), (e) => warnOnce(onHandlerError, "onHandlerError", e, info));
        else warnOnce(callback, name, error, info);
      },
    );
}

/**
 * Every event of every saver, store and operation in the process is also published on this
 * `node:diagnostics_channel` channel, in the async context of the call that caused it: the hook
 * through which tracing (src/otel/) sees what only the saver knows, without the core importing
 * it. Nothing is published while nobody subscribes.
 *
 * @example
 * ```ts
 * import { subscribe } from "node:diagnostics_channel";
 * subscribe(EVENT_CHANNEL, (event) => console.log((event as SaverEvent).type));
 * ```
 */
export const EVENT_CHANNEL = "langgraph-checkpoint-pg:event";
const published = channel(EVENT_CHANNEL);

/** Call the handler, never letting a handler bug break a checkpoint operation; publish the event to subscribers of {@link EVENT_CHANNEL}. */
export function emit(handler: EventHandler | undefined, event: SaverEvent): void {
  if (handler) guard(handler, "onEvent", undefined)!(event);
  if (published.hasSubscribers) published.publish(event);
}
