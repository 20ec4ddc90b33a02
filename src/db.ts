/**
 * One code path for two drivers: `pg` (a pool, or one client) and PGlite
 * (Postgres in WebAssembly, the embedded default). Everything above this file
 * speaks SQL through {@link Db}; only this file knows the drivers apart.
 */
import pg from "pg";

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

/** A pg pool: each statement on any pooled client; a transaction on one checked-out client. */
export function poolDb(pool: pg.Pool): Db {
  return {
    driver: "pg",
    query: <R extends Row>(text: string, values?: unknown[]) => pool.query<R>(text, values),
    run: <R extends Row>(text: string, values: unknown[], name?: string) =>
      pool.query<R>(name ? { name, text, values } : { text, values }),
    async transaction(fn, options) {
      const client = await pool.connect();
      let broken: Error | undefined;
      // A checked-out client has no listener of the pool's: without ours, its
      // connection dying mid-transaction would be an uncaught 'error' event.
      const onError = (err: Error) => {
        broken ??= err;
      };
      client.on("error", onError);
      try {
        return await inTransaction(client, fn, options?.rollback ?? false, (err) => {
          broken ??= err;
        });
      } finally {
        client.off("error", onError);
        // A client whose connection or ROLLBACK failed is in an unknown state: destroy it.
        client.release(broken);
      }
    },
  };
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
