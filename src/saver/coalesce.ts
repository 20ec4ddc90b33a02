/**
 * Write coalescing: a lineage's (thread + namespace) `putWrites` calls wait
 * in a queue and go out together, in one statement: those of one run of
 * promise callbacks (the parallel tasks of a step, finishing together), and
 * those that arrive while a put of the lineage is in flight (until it is
 * done, or until the first of them has waited {@link MAX_WAIT_MS}). The next
 * put of the lineage takes what is queued into its own statement (queries.ts
 * `putWithWrites`); what no put takes goes out on its own once the run of
 * promise callbacks that queued it is over (`process.nextTick`: no turn of
 * the event loop is waited for). Each call still settles only once its rows
 * are committed, so nothing is acknowledged early, whatever the durability.
 *
 * Why writes behind a put: LangGraph calls a thread's next `put` only after
 * the previous one resolved (pregel/loop.ts, `_checkpointerPutAfterPrevious`),
 * so puts never queue behind each other; with async durability the run goes
 * on meanwhile, and its tasks' writes pile up behind the put in flight (a
 * 10-node graph: 24 statements per invoke become 14). Why writes with the
 * next put: a step's writes are called right before the put of the checkpoint
 * that ends it (with sync durability, each step), and one statement costs one
 * round trip and one commit where two cost two (issue 31: a 10-node invoke
 * with sync durability, 24 statements become 13).
 *
 * Each call's outcome is the one it would have had alone: a batch keeps, for
 * a (checkpoint, task, idx) written by several calls, what the calls one after
 * another would have left (ordinary writes: the first; special ones: the
 * last), and when a batch of several calls fails or is refused, each call is
 * sent again on its own, so one call's failure never becomes another's (the
 * put that took them is sent again without them, see lineage.ts); unless
 * the failure is one each would have met alone (the connection lost, a
 * timeout: {@link sharedFailure}), which each call then gets.
 */

import { classify, DatabaseOperationError } from "../errors.js";
import type { ElementRow } from "./elements.js";
import type { WritesParams } from "./params.js";

/** The rows of one `putWrites` call: its statement's parameters before the values are packed. */
export interface WriteRows extends Omit<WritesParams, "offsets" | "lengths" | "bytes" | "elementHashes" | "elementTypes" | "elementOffsets" | "elementLengths"> {
  payloads: Uint8Array[];
  /** The element rows its values name that it sends (stored.ts), and every hash they name. */
  elements: ElementRow[];
  hashes: string[];
  /** Its rows' size as bound parameters (bounded by the caller). */
  bytes: number;
}

/** Sends the rows of one call, or of several of one lineage together. */
export type SendRows = (calls: WriteRows[]) => Promise<void>;

/** The longest a queued write waits for the write in flight before it is sent anyway. */
export const MAX_WAIT_MS = 20;
/** At most this many rows, and bytes, in one coalesced statement. */
const MAX_ROWS = 1000;
const MAX_BYTES = 16 * 1024 ** 2;

interface Queued {
  rows: WriteRows;
  resolve: () => void;
  reject: (err: unknown) => void;
}

interface Lineage {
  /** Statements of the lineage in flight (puts and writes). */
  busy: number;
  queue: Queued[];
  /** The cap's timer (then its immediate: see `write`). */
  timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** A flush is scheduled for the end of the current run of promise callbacks. */
  soon: boolean;
}

/** Writes a put takes into its statement (see {@link Coalescer.during}). */
export interface TakenWrites {
  /** The calls' rows, merged as one statement of them would carry them. */
  rows: WriteRows[];
  /** The put's statement stored them: each call resolves. */
  stored(): void;
  /** It did not (an error, or the gate refused them): each call is sent again on its own, for its own outcome. */
  alone(): Promise<void>;
  /** It failed in a way each call would have met alone ({@link sharedFailure}): each call rejects with it. */
  failed(err: unknown): void;
}

/**
 * Whether the failure of a statement carrying several calls is one each of them would have met
 * on its own: the connection or the server went away, a timeout, a conflict (anything
 * retryable, errors.ts `classify`). Then each call gets it, and none is sent again: a call sent
 * again after its caller's run had failed could land later, after a retry of that run had read
 * the thread (during a failover, a put landing so let LangGraph go on putting the failed run's
 * next checkpoints: a fork). Any other failure may be one call's own: each is sent again alone.
 */
export function sharedFailure(err: unknown): boolean {
  return classify(err).retryable;
}

/** `err`, a failure of a statement carrying writes, as the failure of a `putWrites` call. */
function asWritesFailure(err: unknown): unknown {
  return err instanceof DatabaseOperationError && err.operation !== "putWrites" ? new DatabaseOperationError("putWrites", err.cause, { retryable: err.retryable }) : err;
}

export class Coalescer {
  readonly #lineages = new Map<string, Lineage>();

  constructor(private readonly send: SendRows) {}

  /**
   * Run `op` (a put) as a write of lineage `key` in flight; `op` may take the
   * lineage's queued writes into its statement (`take`: up to `maxBytes` of them, see {@link TakenWrites}).
   */
  async during<T>(key: string | undefined, op: (take: (maxBytes: number) => TakenWrites | undefined) => Promise<T>): Promise<T> {
    if (key === undefined) return op(() => undefined);
    const lineage = this.#enter(key);
    try {
      return await op((maxBytes) => this.#take(lineage, maxBytes));
    } finally {
      this.#leave(key, lineage);
    }
  }

  /** Store one call's rows: with the calls queued in the same run of promise callbacks, or behind the lineage's write in flight. */
  write(key: string | undefined, rows: WriteRows): Promise<void> {
    if (key === undefined) return this.send([rows]);
    let lineage = this.#lineages.get(key);
    if (!lineage) this.#lineages.set(key, (lineage = { busy: 0, queue: [], timer: undefined, soon: false }));
    const l = lineage;
    return new Promise<void>((resolve, reject) => {
      l.queue.push({ rows, resolve, reject });
      if (l.busy === 0) this.#soon(key, l);
      else this.#cap(l);
    });
  }

  /**
   * The cap: what is queued is sent while the put still waits. Once it has passed, the event
   * loop's I/O goes first (setImmediate), so a put whose answer is already in is done and its
   * successor can take them (timers run before I/O in a turn).
   */
  #cap(lineage: Lineage): void {
    lineage.timer ??= setTimeout(() => {
      lineage.timer = setImmediate(() => {
        lineage.timer = undefined;
        this.#flush(lineage);
      });
    }, MAX_WAIT_MS);
  }

  #enter(key: string): Lineage {
    let lineage = this.#lineages.get(key);
    if (!lineage) this.#lineages.set(key, (lineage = { busy: 0, queue: [], timer: undefined, soon: false }));
    lineage.busy++;
    return lineage;
  }

  #leave(key: string, lineage: Lineage): void {
    lineage.busy--;
    // What waited for this put goes with the lineage's next put if it comes in the same run of
    // promise callbacks (LangGraph's next put follows this one's result), else on its own.
    if (lineage.busy === 0 && lineage.queue.length > 0) this.#soon(key, lineage);
    this.#forget(key, lineage);
  }

  #forget(key: string, lineage: Lineage): void {
    if (lineage.busy === 0 && lineage.queue.length === 0 && !lineage.soon && this.#lineages.get(key) === lineage) this.#lineages.delete(key);
  }

  /**
   * Flush once the current run of promise callbacks is over: a tick queued from a promise
   * callback runs after the promise queue is empty, before any I/O or timer.
   */
  #soon(key: string, lineage: Lineage): void {
    if (lineage.soon) return;
    lineage.soon = true;
    process.nextTick(() => {
      lineage.soon = false;
      // A put of the lineage started meanwhile: it takes them, or what it leaves waits for it
      // (no longer than the cap, as writes queued behind a put in flight).
      if (lineage.busy === 0) this.#flush(lineage);
      else if (lineage.queue.length > 0) this.#cap(lineage);
      this.#forget(key, lineage);
    });
  }

  /** The queued writes, up to the caps and `maxBytes`, for a put's statement; undefined if none. */
  #take(lineage: Lineage, maxBytes: number): TakenWrites | undefined {
    const batch = this.#next(lineage, maxBytes);
    if (batch.length === 0) return undefined;
    if (lineage.queue.length === 0) stopTimer(lineage);
    return {
      rows: merge(batch.map((q) => q.rows)),
      stored: () => {
        for (const q of batch) q.resolve();
      },
      alone: () => Promise.all(batch.map((q) => this.send([q.rows]).then(q.resolve, q.reject))).then(() => undefined),
      failed: (err) => {
        const failure = asWritesFailure(err);
        for (const q of batch) q.reject(failure);
      },
    };
  }

  /** The next batch of the queue: within the caps (at least one call, unless `maxBytes` is exceeded by it). */
  #next(lineage: Lineage, maxBytes = Number.POSITIVE_INFINITY): Queued[] {
    const batch: Queued[] = [];
    let rows = 0;
    let bytes = 0;
    while (lineage.queue.length > 0) {
      const next = lineage.queue[0]!;
      const n = next.rows.idx.length;
      if (bytes + next.rows.bytes > maxBytes || (batch.length > 0 && (rows + n > MAX_ROWS || bytes + next.rows.bytes > MAX_BYTES))) break;
      batch.push(lineage.queue.shift()!);
      rows += n;
      bytes += next.rows.bytes;
    }
    return batch;
  }

  /** Send everything queued, in batches within the caps. */
  #flush(lineage: Lineage): void {
    stopTimer(lineage);
    while (lineage.queue.length > 0) {
      const batch = this.#next(lineage);
      if (batch.length === 1) this.send([batch[0]!.rows]).then(batch[0]!.resolve, batch[0]!.reject);
      else void this.#many(batch);
    }
  }

  /**
   * Several calls in one statement. If it fails as each would have alone ({@link sharedFailure}),
   * each rejects with it; otherwise each is sent again on its own (writes are idempotent), for its own outcome.
   */
  async #many(batch: Queued[]): Promise<void> {
    try {
      await this.send(merge(batch.map((q) => q.rows)));
      for (const q of batch) q.resolve();
      return;
    } catch (err) {
      if (sharedFailure(err)) {
        for (const q of batch) q.reject(err);
        return;
      }
    }
    await Promise.all(batch.map((q) => this.send([q.rows]).then(q.resolve, q.reject)));
  }
}

function stopTimer(lineage: Lineage): void {
  const timer = lineage.timer;
  if (timer === undefined) return;
  // A Timeout can be refreshed, an Immediate cannot.
  if ("refresh" in timer) clearTimeout(timer);
  else clearImmediate(timer);
  lineage.timer = undefined;
}

/**
 * The calls' rows as one list of calls with, per (checkpoint, task, idx), the
 * row the calls one after another would have left: the first for an ordinary
 * write (idx >= 0, first wins), the last for a special one (idx < 0, replaced).
 */
function merge(calls: WriteRows[]): WriteRows[] {
  const seen = new Map<string, [number, number]>();
  const keep = calls.map((c) => c.idx.map(() => true));
  calls.forEach((c, i) =>
    c.idx.forEach((idx, j) => {
      const k = `${c.checkpointId}\u0000${c.taskId}\u0000${idx}`;
      const before = seen.get(k);
      if (before === undefined) seen.set(k, [i, j]);
      else if (idx < 0) {
        keep[before[0]]![before[1]] = false;
        seen.set(k, [i, j]);
      } else keep[i]![j] = false;
    }),
  );
  return calls.map((c, i) => {
    const pick = <T>(a: T[]) => a.filter((_, j) => keep[i]![j]);
    return { ...c, idx: pick(c.idx), channels: pick(c.channels), types: pick(c.types), payloads: pick(c.payloads) };
  });
}
