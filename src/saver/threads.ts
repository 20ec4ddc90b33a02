/**
 * The order of this process's work on each thread: the one place that decides
 * when a write goes out and when a result is delivered. Each guarantee is a
 * method of {@link Threads}:
 *
 * 1. `deliver`: one thread's results are delivered in the order its operations
 *    were called, as MemorySaver's are; the statements still run concurrently.
 *    The parallel tasks of a step (subgraphs started by `Send`, each in its own
 *    namespace) then reach their interrupts in task order, and LangGraph reports
 *    the interrupts of a step in the order the tasks got there (its test
 *    "resume multiple interrupts"). A failure is delivered at once: LangGraph
 *    stops the run on it, and the sooner it does, the fewer steps run on past a
 *    write that was lost.
 * 2. `read`: a read waits for this process's writes in flight on its lineage,
 *    then takes its place in the thread's order. LangGraph's `invoke` can reject
 *    while writes of the same run are still queued (with "async" durability it
 *    chains a run's puts and rejects on the first failed write without waiting
 *    for the others); during a failover those land later, on the new primary. A
 *    retry that read the head before they landed would start from an older
 *    checkpoint and fork the thread.
 * 3. `put` and `write`: writes ride the next put. A lineage's `putWrites` calls
 *    wait in a queue and go out together: those of one run of promise callbacks
 *    (the parallel tasks of a step), and those that arrive while a put of the
 *    lineage is in flight (until it is done, or the first of them has waited
 *    {@link MAX_WAIT_MS}). The next put takes what is queued into its own
 *    statement (sql/put.ts `putWithWrites`); what no put takes goes out on its
 *    own once the run of promise callbacks that queued it is over. LangGraph
 *    calls a thread's next put only after the previous one resolved
 *    (pregel/loop.ts, `_checkpointerPutAfterPrevious`), and a step's writes
 *    come right before the put of the checkpoint that ends it: one statement
 *    costs one round trip and one commit where two cost two (issue 31: a
 *    10-node invoke with sync durability, 24 statements became 13). Each call
 *    settles only once its rows are committed, whatever the durability.
 * 4. `sharedFailure`: each call's outcome is the one it would have had alone. A
 *    batch keeps, per (checkpoint, task, idx), what the calls one after another
 *    would have left (ordinary writes: the first; special ones: the last); a
 *    batch that fails or is refused is sent again call by call, unless the
 *    failure is one each would have met alone (the connection lost, a timeout),
 *    which each call then gets: a call sent again after its run had failed
 *    could land after a retry of that run read the thread (the failover fork).
 * 5. `settledThread`: a deletion waits for this process's writes already issued
 *    on the thread, so none lands after it and starts the thread again.
 * 6. `putsSettled`: writes refused because their thread was deleted and not
 *    started again may be a new conversation's, sent before the put that starts
 *    it committed: they wait once for the puts in flight, and are sent again if
 *    one was in flight or settled since they were called (tombstones.ts).
 */
import { classify, DatabaseOperationError } from "../errors.js";
import type { ElementRow } from "./elements.js";
import type { WritesParams } from "./sql/writes.js";

/** The rows of one `putWrites` call: its statement's parameters before the values are packed. */
export interface WriteRows extends Omit<WritesParams, "offsets" | "lengths" | "bytes" | "elementHashes" | "elementTypes" | "elementOffsets" | "elementLengths"> {
  payloads: Uint8Array[];
  /** The element rows its values name that it sends (stored.ts), and every hash they name, per channel written. */
  elements: ElementRow[];
  hashes: [string, string[]][];
  /** Its rows' size as bound parameters (bounded by the caller). */
  bytes: number;
}

/** Sends the rows of one call, or of several of one lineage together. */
export type SendRows = (calls: WriteRows[]) => Promise<void>;

/** Writes a put takes into its statement (see {@link Threads.put}). */
export interface TakenWrites {
  /** The calls' rows, merged as one statement of them would carry them. */
  rows: WriteRows[];
  /** How many calls they are (the put's event reports it). */
  calls: number;
  /** The put's statement stored them: each call resolves. */
  stored(): void;
  /** It did not (an error, or the gate refused them): each call is sent again on its own, for its own outcome. */
  alone(): Promise<void>;
  /** It failed in a way each call would have met alone ({@link sharedFailure}): each call rejects with it. */
  failed(err: unknown): void;
}

/** Takes up to `maxBytes` of a lineage's queued writes for a put's statement; undefined if none. */
export type Take = (maxBytes: number) => TakenWrites | undefined;

/** The longest a queued write waits for the put in flight before it is sent anyway. */
export const MAX_WAIT_MS = 20;
/** At most this many rows, and bytes, in one coalesced statement. */
const MAX_ROWS = 1000;
const MAX_BYTES = 16 * 1024 ** 2;

/**
 * Whether the failure of a statement carrying several calls is one each of them would have met
 * on its own: the connection or the server went away, a timeout, a conflict (anything
 * retryable, errors.ts `classify`). Then each call gets it, and none is sent again (guarantee 4).
 */
export function sharedFailure(err: unknown): boolean {
  return classify(err).retryable;
}

interface Queued {
  rows: WriteRows;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** One lineage's (thread and namespace) work in flight. */
interface Lineage {
  /** Its writes in flight, puts and putWrites calls: a read waits for them (2, 5). */
  inFlight: Set<Promise<void>>;
  /** Its puts in flight, as settled promises: refused writes wait for them (6). */
  puts: Set<Promise<void>>;
  /** Puts running now: queued writes wait behind them (3). */
  busy: number;
  queue: Queued[];
  /** The cap's timer (then its immediate: see `#cap`). */
  timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** A flush is scheduled for the end of the current run of promise callbacks. */
  soon: boolean;
}

interface Thread {
  /** Settles once the latest operation called on the thread, and all before it, have (1). */
  tail: Promise<void> | undefined;
  lineages: Map<string, Lineage>;
  /** Puts of the thread settled so far, any lineage (6): the thread stays known while a refused call is in flight. */
  putsDone: number;
}

interface Where {
  threadId: string;
  ns: string;
}

/** A config's thread and namespace; undefined if it has no string thread id (the call fails validation anyway). */
function whereOf(config: { configurable?: Record<string, unknown> } | undefined): Where | undefined {
  const threadId = config?.configurable?.thread_id;
  const ns = config?.configurable?.checkpoint_ns ?? "";
  return typeof threadId === "string" && typeof ns === "string" ? { threadId, ns } : undefined;
}

export class Threads {
  readonly #threads = new Map<string, Thread>();

  constructor(private readonly send: SendRows) {}

  /**
   * A put: `op` runs as a put of its lineage in flight, and may take the lineage's queued writes
   * into its statement (3); its result is delivered in the thread's order (1).
   */
  put<T>(config: { configurable?: Record<string, unknown> }, op: (take: Take) => Promise<T>): Promise<T> {
    const where = whereOf(config);
    if (where === undefined) return op(() => undefined);
    const lineage = this.#lineage(where);
    lineage.busy++;
    const running = (async () => {
      try {
        return await op((maxBytes) => this.#take(lineage, maxBytes));
      } finally {
        this.#thread(where.threadId).putsDone++;
        lineage.busy--;
        // What waited for this put goes with the lineage's next put if it comes in the same run of
        // promise callbacks (LangGraph's next put follows this one's result), else on its own.
        if (lineage.busy === 0 && lineage.queue.length > 0) this.#soon(where, lineage);
        this.#forget(where);
      }
    })();
    this.#track(where, lineage.puts, running);
    return this.deliver(config, this.#track(where, lineage.inFlight, running));
  }

  /**
   * A putWrites call: `op` runs as a write of its lineage in flight; it stores its rows with
   * `queue` (3). Its result is delivered in the thread's order (1).
   */
  write(config: { configurable?: Record<string, unknown> }, op: (queue: (rows: WriteRows) => Promise<void>) => Promise<void>): Promise<void> {
    const where = whereOf(config);
    if (where === undefined) return op((rows) => this.send([rows]));
    const running = op((rows) => this.#queue(where, rows));
    return this.deliver(config, this.#track(where, this.#lineage(where).inFlight, running));
  }

  /**
   * A read: waits for this process's writes in flight on its lineage (2), then runs `op` and takes
   * its place in the thread's order (1). It joins the order only after waiting: joined at the
   * call, a put of a failed run issued meanwhile would be delivered only after the read, so
   * LangGraph would put that run's next checkpoint only once the read had returned the head before
   * it, and the retry starting from that head would fork the thread.
   */
  async read<T>(config: { configurable?: Record<string, unknown> }, op: () => Promise<T>): Promise<T> {
    await this.#settled(whereOf(config), "inFlight");
    return this.deliver(config, op());
  }

  /** Deliver `op`'s result in its thread's call order (1): after every operation called on the thread before it. */
  deliver<T>(config: { configurable?: Record<string, unknown> } | undefined, op: Promise<T>): Promise<T> {
    const threadId: unknown = config?.configurable?.thread_id;
    if (typeof threadId !== "string") return op;
    const thread = this.#thread(threadId);
    const before = thread.tail;
    // Settles (never rejects) once this operation and every earlier one on the thread have.
    const turn: Promise<void> = (before === undefined ? op : before.then(() => op)).then(noop, noop);
    thread.tail = turn;
    void turn.then(() => {
      if (thread.tail === turn) thread.tail = undefined;
      this.#forgetThread(threadId);
    });
    // Usually nothing is in flight on the thread: then the operation itself, no wait.
    if (before === undefined) return op;
    return op.then((value) => before.then(() => value));
  }

  /**
   * Resolves once the writes in flight now on any lineage of `threadId` have settled (5); not
   * those started later: a run that goes on writing would never let it resolve.
   */
  async settledThread(threadId: string): Promise<void> {
    const now: Promise<void>[] = [];
    for (const lineage of this.#threads.get(threadId)?.lineages.values() ?? []) now.push(...lineage.inFlight);
    await Promise.all(now);
  }

  /**
   * Writes refused for a thread deleted and not started again (6): waits for the puts in flight
   * on the thread's root lineage and, for `also`, on that lineage; false when none was in flight
   * and no put of the thread settled since `since` (then nothing has started the thread for them).
   * A put that settled meanwhile counts: on a slow put (Citus) the writes went out while it was in
   * flight, and its answer came before their refusal.
   */
  async putsSettled(threadId: string, since: number, also?: { configurable?: Record<string, unknown> }): Promise<boolean> {
    const lineages = [{ threadId, ns: "" }, ...(also ? [whereOf(also)] : [])].filter((w): w is Where => w !== undefined);
    const inFlight = lineages.some((w) => (this.#threads.get(w.threadId)?.lineages.get(w.ns)?.puts.size ?? 0) > 0);
    for (const w of lineages) await this.#settled(w, "puts");
    // Also when a put settled while the refused call was on its way: it may be the one that started the thread.
    return inFlight || this.putsDone(threadId) > since;
  }

  /** How many puts of the thread have settled (a mark for {@link putsSettled}'s `since`, taken as a call starts). */
  putsDone(threadId: string): number {
    return this.#threads.get(threadId)?.putsDone ?? 0;
  }

  /**
   * Resolves once none of the lineage's `which` is in flight. At once when none is; after waiting,
   * one more macrotask: a write chained behind the settled ones (by promise callbacks only) has
   * been issued by then, and is waited for too.
   */
  async #settled(where: Where | undefined, which: "inFlight" | "puts"): Promise<void> {
    if (where === undefined) return;
    const pending = () => this.#threads.get(where.threadId)?.lineages.get(where.ns)?.[which];
    if (!pending()?.size) return;
    for (;;) {
      const writes = pending();
      if (writes?.size) {
        await Promise.all(writes);
        continue;
      }
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (!pending()?.size) return;
    }
  }

  /** Register `write` in `set` until it settles; returns it unchanged. */
  #track<T>(where: Where, set: Set<Promise<void>>, write: Promise<T>): Promise<T> {
    const settled: Promise<void> = write.then(noop, noop);
    set.add(settled);
    void settled.then(() => {
      set.delete(settled);
      this.#forget(where);
    });
    return write;
  }

  #thread(threadId: string): Thread {
    let thread = this.#threads.get(threadId);
    if (!thread) this.#threads.set(threadId, (thread = { tail: undefined, lineages: new Map(), putsDone: 0 }));
    return thread;
  }

  #lineage(where: Where): Lineage {
    const lineages = this.#thread(where.threadId).lineages;
    let lineage = lineages.get(where.ns);
    if (!lineage) lineages.set(where.ns, (lineage = { inFlight: new Set(), puts: new Set(), busy: 0, queue: [], timer: undefined, soon: false }));
    return lineage;
  }

  /** Drop a lineage (and its thread) once nothing of it is in flight or queued. */
  #forget(where: Where): void {
    const thread = this.#threads.get(where.threadId);
    const lineage = thread?.lineages.get(where.ns);
    if (lineage && lineage.busy === 0 && lineage.queue.length === 0 && !lineage.soon && lineage.inFlight.size === 0 && lineage.puts.size === 0) {
      thread!.lineages.delete(where.ns);
    }
    this.#forgetThread(where.threadId);
  }

  #forgetThread(threadId: string): void {
    const thread = this.#threads.get(threadId);
    if (thread && thread.tail === undefined && thread.lineages.size === 0) this.#threads.delete(threadId);
  }

  /** Store one call's rows: with the calls queued in the same run of promise callbacks, or behind the lineage's put in flight (3). */
  #queue(where: Where, rows: WriteRows): Promise<void> {
    const lineage = this.#lineage(where);
    return new Promise<void>((resolve, reject) => {
      lineage.queue.push({ rows, resolve, reject });
      if (lineage.busy === 0) this.#soon(where, lineage);
      else this.#cap(lineage);
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

  /**
   * Flush once the current run of promise callbacks is over: a tick queued from a promise
   * callback runs after the promise queue is empty, before any I/O or timer.
   */
  #soon(where: Where, lineage: Lineage): void {
    if (lineage.soon) return;
    lineage.soon = true;
    process.nextTick(() => {
      lineage.soon = false;
      // A put of the lineage started meanwhile: it takes them, or what it leaves waits for it
      // (no longer than the cap, as writes queued behind a put in flight).
      if (lineage.busy === 0) this.#flush(lineage);
      else if (lineage.queue.length > 0) this.#cap(lineage);
      this.#forget(where);
    });
  }

  /** The queued writes, up to the caps and `maxBytes`, for a put's statement; undefined if none. */
  #take(lineage: Lineage, maxBytes: number): TakenWrites | undefined {
    const batch = next(lineage, maxBytes);
    if (batch.length === 0) return undefined;
    if (lineage.queue.length === 0) stopTimer(lineage);
    return {
      rows: merge(batch.map((q) => q.rows)),
      calls: batch.length,
      stored: () => {
        for (const q of batch) q.resolve();
      },
      alone: () => Promise.all(batch.map((q) => this.send([q.rows]).then(q.resolve, q.reject))).then(noop),
      failed: (err) => {
        const failure = asWritesFailure(err);
        for (const q of batch) q.reject(failure);
      },
    };
  }

  /** Send everything queued, in batches within the caps. */
  #flush(lineage: Lineage): void {
    stopTimer(lineage);
    while (lineage.queue.length > 0) {
      const batch = next(lineage);
      if (batch.length === 1) this.send([batch[0]!.rows]).then(batch[0]!.resolve, batch[0]!.reject);
      else void this.#many(batch);
    }
  }

  /** Several calls in one statement; if it fails, each call's own outcome (4). */
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

/** The next batch of a lineage's queue: within the caps (at least one call, unless `maxBytes` is exceeded by it). */
function next(lineage: Lineage, maxBytes = Number.POSITIVE_INFINITY): Queued[] {
  const batch: Queued[] = [];
  let rows = 0;
  let bytes = 0;
  while (lineage.queue.length > 0) {
    const first = lineage.queue[0]!;
    const n = first.rows.idx.length;
    if (bytes + first.rows.bytes > maxBytes || (batch.length > 0 && (rows + n > MAX_ROWS || bytes + first.rows.bytes > MAX_BYTES))) break;
    batch.push(lineage.queue.shift()!);
    rows += n;
    bytes += first.rows.bytes;
  }
  return batch;
}

function stopTimer(lineage: Lineage): void {
  const timer = lineage.timer;
  if (timer === undefined) return;
  // A Timeout can be refreshed, an Immediate cannot.
  if ("refresh" in timer) clearTimeout(timer);
  else clearImmediate(timer);
  lineage.timer = undefined;
}

/** `err`, a failure of a statement carrying writes, as the failure of a `putWrites` call. */
function asWritesFailure(err: unknown): unknown {
  return err instanceof DatabaseOperationError && err.operation !== "putWrites" ? new DatabaseOperationError("putWrites", err.cause, { retryable: err.retryable }) : err;
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

function noop(): void {}
