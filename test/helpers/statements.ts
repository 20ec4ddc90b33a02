/**
 * Recording the statements code really sends, with their values: every
 * `query()` of every client a pool connects (pg's `Pool.query`, `connect()`
 * and the saver's own checkouts all go through a client's `query`).
 *
 * @example
 * ```ts
 * const sent = recordStatements(pool);
 * await saver.getTuple(config);
 * console.log(sent.map((s) => s.text));
 * ```
 */
import type pg from "pg";

/** One statement as sent: its text and its values (none for simple-protocol queries). */
export interface Sent {
  text: string;
  values: unknown[];
}

/** Add what one `query(first, values)` call sends to `sent` (a text, or a config object with text and values). */
export function recordQuery(sent: Sent[], first: unknown, values: unknown): void {
  const config = typeof first === "string" ? { text: first, values } : (first as { text: string; values?: unknown[] });
  sent.push({ text: config.text, values: (config.values as unknown[] | undefined) ?? (Array.isArray(values) ? values : []) });
}

/** Record every statement the clients of `pool` send from now on (clients it connects from now on); returns the list, newest last. */
export function recordStatements(pool: pg.Pool, sent: Sent[] = []): Sent[] {
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      recordQuery(sent, args[0], args[1]);
      return query(...args);
    };
  });
  return sent;
}
