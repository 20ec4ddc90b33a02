/**
 * One code path for two drivers: `pg` (a pool, or one client) and PGlite
 * (Postgres in WebAssembly, the embedded default). Everything above this file
 * speaks SQL through {@link Db}; only this file knows the drivers apart.
 */
import pg from "pg";
import { classify, UnconfirmedCommitError } from "../errors.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- rows are whatever the SQL selects
export type Row = Record<string, any>;

/** The minimal query surface both drivers share. */
export interface Queryable {
  query<R extends Row = Row>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
}

/** Structural type of a PGlite instance (the package is an optional peer: never imported here). */
export interface PGliteLike extends Queryable {
  exec(query: string): Promise<unknown>;
  transaction<T>(fn: (tx: Queryable & { rollback(): Promise<void> }) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  readonly closed: boolean;
}

export interface Db extends Queryable {
  readonly driver: "pg" | "pglite";
  /** One statement. `name` enables a server-side prepared statement where the driver has them. */
  run<R extends Row = Row>(text: string, values: unknown[], name?: string): Promise<{ rows: R[] }>;
  /** `fn` inside BEGIN/COMMIT on one connection; ROLLBACK on error, or always with `rollback`. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>, options?: { rollback?: boolean }): Promise<T>;
}

export function isPGlite(x: unknown): x is PGliteLike {
  return (
    typeof x === "object" &&
    x !== null &&
    typeof (x as PGliteLike).exec === "function" &&
    typeof (x as PGliteLike).transaction === "function" &&
    typeof (x as { connect?: unknown }).connect !== "function"
  );
}

/**
 * A pg pool: each statement on any pooled client; a transaction on one
 * checked-out client. Clients are checked out by hand (not `pool.query`) so
 * that one which met a lost connection or a read-only server is never
 * returned to the pool, and connections opened before such a failure are not
 * reused (see {@link PoolWatch}).
 */
export function poolDb(pool: pg.Pool): Db {
  const watch = watchPool(pool);
  return {
    driver: "pg",
    query: <R extends Row>(text: string, values?: unknown[]) => onClient(pool, watch, (client) => client.query<R>(text, values)),
    run: <R extends Row>(text: string, values: unknown[], name?: string) =>
      onClient(pool, watch, (client) => client.query<R>(name ? { name, text, values } : { text, values })),
    transaction: (fn, options) =>
      onClient(pool, watch, (client, onBroken) => inTransaction(client, fn, options?.rollback ?? false, onBroken), { keepAfterSqlError: true }),
  };
}

/**
 * What the Dbs on one pool (a saver's, migrate's, prune's...) know about its
 * connections. A failover leaves a pool full of connections to a server that
 * is gone, silent or read-only; each would otherwise be found out only by
 * using it (up to `query_timeout` each on a silent link).
 */
interface PoolWatch {
  /** Raised by each lost connection: those opened at an earlier epoch may lead to the same dead server. */
  epoch: number;
  /** The epoch at which each client connected (0: before we watched). */
  born: WeakMap<object, number>;
  /** Clients whose server reported it turned read-only or a standby. */
  readOnly: WeakSet<object>;
}

const watches = new WeakMap<object, PoolWatch>();

function watchPool(pool: pg.Pool): PoolWatch {
  let watch = watches.get(pool);
  if (!watch) {
    const w: PoolWatch = { epoch: 0, born: new WeakMap(), readOnly: new WeakSet() };
    watches.set(pool, w);
    pool.on("connect", (client) => watchClient(w, client, w.epoch));
    watch = w;
  }
  return watch;
}

interface StatusMessage {
  parameterName: string;
  parameterValue: string;
}

function watchClient(watch: PoolWatch, client: pg.PoolClient, epoch: number): void {
  if (watch.born.has(client)) return;
  watch.born.set(client, epoch);
  // Postgres 14+ reports both settings to the client whenever they change, in
  // the answer to the next statement: no extra round trip. A primary turned
  // read-only for a switchover (default_transaction_read_only = on, reloaded)
  // says so here; so would a server that became a hot standby.
  const connection = (client as { connection?: { on?: (event: string, listener: (msg: StatusMessage) => void) => void } }).connection;
  connection?.on?.("parameterStatus", (msg) => {
    if ((msg.parameterName === "default_transaction_read_only" || msg.parameterName === "in_hot_standby") && msg.parameterValue === "on") {
      watch.readOnly.add(client);
      watch.epoch++;
    }
  });
  // Permanent, unlike the pool's own listener (removed while the client is
  // checked out): an idle connection dying also tells us about its siblings.
  client.on("error", (err) => noteFailure(watch, err));
}

function noteFailure(watch: PoolWatch, err: unknown): void {
  if (err !== undefined && classify(err).connectionLost) watch.epoch++;
}

/**
 * A client from the pool that is neither known read-only nor older than the
 * last lost connection; such ones are destroyed on the way (each at most once).
 */
async function checkout(pool: pg.Pool, watch: PoolWatch): Promise<pg.PoolClient> {
  const since = watch.epoch;
  for (;;) {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      noteFailure(watch, err);
      throw err;
    }
    watchClient(watch, client, 0);
    if (watch.born.get(client)! >= since && !watch.readOnly.has(client)) return client;
    client.release(true);
  }
}

/**
 * Run `fn` on a checked-out client and give it back, or destroy it when it is
 * broken: a lost connection, a read-only server, or (like `pool.query`) any
 * error unless `keepAfterSqlError` (a transaction that rolled back cleanly).
 * A commit the synchronous standby did not confirm fails with
 * {@link UnconfirmedCommitError}.
 */
async function onClient<T>(
  pool: pg.Pool,
  watch: PoolWatch,
  fn: (client: pg.PoolClient, onBroken: (err: Error) => void) => Promise<T>,
  options: { keepAfterSqlError?: boolean } = {},
): Promise<T> {
  const client = await checkout(pool, watch);
  let broken: unknown;
  let failure: unknown;
  // A checked-out client has no listener of the pool's: without ours, its
  // connection dying mid-statement would be an uncaught 'error' event.
  const onError = (err: Error) => {
    broken ??= err;
  };
  client.on("error", onError);
  // Postgres' only sign of a canceled wait for the synchronous standby is a
  // WARNING; `routine` names the function raising it, whatever lc_messages is.
  let unconfirmed = false;
  const onNotice = (notice: { routine?: string }) => {
    if (notice.routine === "SyncRepWaitForLSN") unconfirmed = true;
  };
  client.on("notice", onNotice);
  try {
    const result = await fn(client, onError);
    if (unconfirmed) throw new UnconfirmedCommitError();
    return result;
  } catch (err) {
    failure = err;
    throw err;
  } finally {
    client.off("error", onError);
    client.off("notice", onNotice);
    noteFailure(watch, broken ?? failure);
    const drop =
      broken !== undefined ||
      watch.readOnly.has(client) ||
      (failure !== undefined && (!options.keepAfterSqlError || classify(failure).connectionLost));
    client.release(drop);
  }
}

/** A single pg client (e.g. one the caller holds for a migration). */
export function clientDb(client: pg.Client | pg.PoolClient): Db {
  return {
    driver: "pg",
    query: <R extends Row>(text: string, values?: unknown[]) => client.query<R>(text, values),
    run: <R extends Row>(text: string, values: unknown[], name?: string) =>
      client.query<R>(name ? { name, text, values } : { text, values }),
    transaction: (fn, options) => inTransaction(client, fn, options?.rollback ?? false, () => undefined),
  };
}

async function inTransaction<T>(
  client: pg.Client | pg.PoolClient,
  fn: (tx: Queryable) => Promise<T>,
  rollback: boolean,
  onBroken: (err: Error) => void,
): Promise<T> {
  await client.query("BEGIN");
  try {
    const result = await fn(client);
    await client.query(rollback ? "ROLLBACK" : "COMMIT");
    return result;
  } catch (err) {
    await client.query("ROLLBACK").catch((rollbackErr: Error) => onBroken(rollbackErr));
    throw err;
  }
}

/** PGlite: one in-process connection; it queues statements itself. */
export function pgliteDb(db: PGliteLike): Db {
  return {
    driver: "pglite",
    query: <R extends Row>(text: string, values?: unknown[]) => db.query<R>(text, values),
    run: <R extends Row>(text: string, values: unknown[]) => db.query<R>(text, values),
    transaction: (fn, options) =>
      db.transaction(async (tx) => {
        const result = await fn(tx);
        if (options?.rollback) await tx.rollback();
        return result;
      }),
  };
}

/**
 * The Db for whatever a caller handed us: a PGlite instance, a pool (also one
 * from another copy of pg, which fails instanceof but counts its clients), or
 * one client.
 */
export function dbOf(target: pg.Pool | pg.Client | pg.PoolClient | PGliteLike): Db {
  if (isPGlite(target)) return pgliteDb(target);
  if (target instanceof pg.Pool || "totalCount" in target) return poolDb(target as pg.Pool);
  return clientDb(target as pg.Client);
}

/**
 * Defaults for pools the saver creates (spread them into a pool you make):
 * nothing waits forever, and a dead or silent server is noticed in seconds.
 * - connecting, or waiting for a free client: 5 s (`connectionTimeoutMillis`);
 * - a statement: 20 s on the server (`statement_timeout`), 25 s on the client
 *   (`query_timeout`: the server's own timeout cannot fire when the link is
 *   silent); a lock wait 10 s; an idle transaction 60 s;
 * - TCP keepalive probes after 10 s without traffic (`keepAliveInitialDelayMillis`;
 *   Node then probes every second, 10 times), so a connection to a host that
 *   died or dropped off the network fails within about 20 s, also one waiting
 *   for an answer (a statement the dead host never received is left to
 *   `query_timeout`). Without an initial delay the OS default applies: 2 hours.
 * Override any of them with the `pool` option.
 *
 * @example
 * ```ts
 * const pool = new pg.Pool({ ...BOUNDED_POOL, connectionString: process.env.DATABASE_URL, max: 20 });
 * const saver = new PostgresSaver(pool);
 * ```
 */
export const BOUNDED_POOL: pg.PoolConfig = {
  application_name: "langgraph-checkpoint-pg",
  connectionTimeoutMillis: 5_000,
  statement_timeout: 20_000,
  lock_timeout: 10_000,
  idle_in_transaction_session_timeout: 60_000,
  query_timeout: 25_000,
  keepAlive: true,
  keepAliveInitialDelayMillis: 10_000,
};
