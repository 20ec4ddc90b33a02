/**
 * Write coalescing: while a put of a lineage (thread + namespace) is in
 * flight, the lineage's `putWrites` calls wait in a queue and go out together,
 * in one statement, when it is done (or when the first of them has waited
 * {@link MAX_WAIT_MS}). Each call still settles only once its rows are
 * committed, so nothing is acknowledged early, whatever the durability.
 *
 * Why writes behind a put: LangGraph calls a thread's next `put` only after
 * the previous one resolved (pregel/loop.ts, `_checkpointerPutAfterPrevious`),
 * so puts never queue behind each other; with async durability the run goes
 * on meanwhile, and its tasks' writes pile up behind the put in flight (a
 * 10-node graph: 24 statements per invoke become 14). Writes do not queue
 * behind writes: the writes of parallel tasks of one step still go out side
 * by side, not one round trip after another.
 *
 * Each call's outcome is the one it would have had alone: a batch keeps, for
 * a (checkpoint, task, idx) written by several calls, what the calls one after
 * another would have left (ordinary writes: the first; special ones: the
 * last), and when a batch of several calls fails, each call is sent again on
 * its own, so one call's failure never becomes another's.
 */

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
  timer: NodeJS.Timeout | undefined;
}

export class Coalescer {
  readonly #lineages = new Map<string, Lineage>();

  constructor(private readonly send: SendRows) {}

  /** Run `op` (a put) as a write of lineage `key` in flight. */
  async during<T>(key: string | undefined, op: () => Promise<T>): Promise<T> {
    if (key === undefined) return op();
    const lineage = this.#enter(key);
    try {
      return await op();
    } finally {
      this.#leave(key, lineage);
    }
  }

  /** Store one call's rows: now if nothing of the lineage is in flight, else with the calls queued behind it. */
  write(key: string | undefined, rows: WriteRows): Promise<void> {
    const lineage = key === undefined ? undefined : this.#lineages.get(key);
    if (lineage === undefined || lineage.busy === 0) return this.send([rows]);
    return new Promise<void>((resolve, reject) => {
      lineage.queue.push({ rows, resolve, reject });
      lineage.timer ??= setTimeout(() => {
        lineage.timer = undefined;
        this.#flush(lineage);
      }, MAX_WAIT_MS);
    });
  }

  #enter(key: string): Lineage {
    let lineage = this.#lineages.get(key);
    if (!lineage) this.#lineages.set(key, (lineage = { busy: 0, queue: [], timer: undefined }));
    lineage.busy++;
    return lineage;
  }

  #leave(key: string, lineage: Lineage): void {
    lineage.busy--;
    if (lineage.busy === 0 && lineage.queue.length > 0) this.#flush(lineage);
    if (lineage.busy === 0 && lineage.queue.length === 0 && this.#lineages.get(key) === lineage) this.#lineages.delete(key);
  }

  /** Send everything queued, in batches within the caps. */
  #flush(lineage: Lineage): void {
    if (lineage.timer !== undefined) {
      clearTimeout(lineage.timer);
      lineage.timer = undefined;
    }
    while (lineage.queue.length > 0) {
      const batch: Queued[] = [];
      let rows = 0;
      let bytes = 0;
      while (lineage.queue.length > 0) {
        const next = lineage.queue[0]!;
        const n = next.rows.idx.length;
        if (batch.length > 0 && (rows + n > MAX_ROWS || bytes + next.rows.bytes > MAX_BYTES)) break;
        batch.push(lineage.queue.shift()!);
        rows += n;
        bytes += next.rows.bytes;
      }
      if (batch.length === 1) this.send([batch[0]!.rows]).then(batch[0]!.resolve, batch[0]!.reject);
      else void this.#many(batch);
    }
  }

  /** Several calls in one statement; if it fails, each call again on its own (writes are idempotent), for its own outcome. */
  async #many(batch: Queued[]): Promise<void> {
    try {
      await this.send(merge(batch.map((q) => q.rows)));
      for (const q of batch) q.resolve();
      return;
    } catch {
      // Below: each call's own result.
    }
    await Promise.all(batch.map((q) => this.send([q.rows]).then(q.resolve, q.reject)));
  }
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
