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
export type SaverEvent =
  | {
      type: "put";
      threadId: string;
      checkpointNs: string;
      checkpointId: string;
      parentCheckpointId: string | undefined;
      blobs: number;
      durationMs: number;
    }
  | {
      type: "putWrites";
      threadId: string;
      checkpointNs: string;
      checkpointId: string;
      taskId: string;
      writes: number;
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
      reason: "head-moved" | "run-in-progress" | "parent-missing";
      durationMs: number;
    }
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
      /** The schema was migrated by a newer release whose newer migrations this code works with (additive). */
      type: "schemaNewer";
      schema: string;
      schemaVersion: number;
      codeVersion: number;
    };

export type EventHandler = (event: SaverEvent) => void;

/** Call the handler, never letting a handler bug break a checkpoint operation. */
export function emit(handler: EventHandler | undefined, event: SaverEvent): void {
  if (!handler) return;
  try {
    handler(event);
  } catch (err) {
    // Not silent: a broken handler surfaces as a process warning.
    process.emitWarning(`onEvent handler threw on a "${event.type}" event: ${String(err)}`, "CheckpointerEventWarning");
  }
}
