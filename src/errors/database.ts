/**
 * Database failures: {@link DatabaseOperationError}, the SQLSTATE of a
 * driver error, and the classification that decides what is retried
 * (connection loss, failover, serialization failures, deadlocks, timeouts)
 * and what counts as an unconfirmed commit.
 */
import { CheckpointerError } from "./base.js";

/**
 * A database operation failed. `cause` is the driver error; `sqlState` is the
 * SQLSTATE the server sent (undefined for a socket or client-side failure,
 * whose Node `code` stays on `cause`). `retryable` follows
 * {@link isRetryable}'s table: connection loss, a server that cannot take
 * writes now (shutdown, restart, failover, read-only), serialization failures,
 * deadlocks and timeouts.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof DatabaseOperationError && e.retryable) scheduleRetry(); }
 * ```
 */
export class DatabaseOperationError extends CheckpointerError {
  readonly operation: string;
  readonly sqlState: string | undefined;
  /**
   * @param options.retryable overrides the classification of `cause`, for
   * failures this package detects itself (e.g. a head that kept moving).
   */
  constructor(operation: string, cause: unknown, options?: { retryable?: boolean }) {
    const sqlState = sqlStateOf(cause);
    const failure = classify(cause);
    const { what, said } = describeFailure(cause);
    const text = sqlState || failure.connection ? `${what}${said ? ` (${said})` : ""}` : (said ?? "unknown error");
    super("DATABASE_ERROR", `${operation} failed: ${text}`, { cause, retryable: options?.retryable ?? failure.retryable });
    this.operation = operation;
    this.sqlState = sqlState;
  }
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * A driver failure, for a message: `what` is `SQLSTATE 28P01`, or `connection
 * error ECONNREFUSED` (`connection error` without a socket code); `said` is
 * the first line of what the server (or the socket) said, e.g. `password
 * authentication failed for user "app"`. The one place messages take a
 * driver's words from. Left out for data exceptions (SQLSTATE class 22:
 * `invalid input syntax for type json: "…"` quotes the value it choked on),
 * so no parameter reaches a message; a server never puts a password in one.
 *
 * @example
 * ```ts
 * const { what, said } = describeFailure(err);
 * log.error(`${operation} failed: ${what}${said ? ` (${said})` : ""}`);
 * ```
 */
export function describeFailure(err: unknown): { what: string; said: string | undefined } {
  const sqlState = sqlStateOf(err);
  if (sqlState) return { what: `SQLSTATE ${sqlState}`, said: sqlState.startsWith("22") ? undefined : firstLine(err) };
  const code = socketCodeOf(err);
  const said = firstLine(err);
  if (code || classify(err).connection || !(err instanceof Error)) return { what: `connection error${code ? ` ${code}` : ""}`, said };
  return { what: err.name, said };
}

/**
 * {@link describeFailure} as the tail of a message: `(SQLSTATE 28P01): password
 * authentication failed for user "app"`, `(connection error ECONNREFUSED):
 * connect ECONNREFUSED 127.0.0.1:5432`, or `(SQLSTATE 22P02)` alone.
 *
 * @example
 * ```ts
 * throw new MigrationError(`migrating schema "public" failed ${failureText(err)}; nothing was applied`, { cause: err });
 * ```
 */
export function failureText(err: unknown): string {
  const { what, said } = describeFailure(err);
  return `(${what})${said ? `: ${said}` : ""}`;
}

/** The first non-empty first line of a message in `err`'s chain (an AggregateError of a refused dual-stack connect has none of its own). */
function firstLine(err: unknown): string | undefined {
  for (const e of chain(err)) {
    const message = (e as { message?: unknown }).message;
    if (typeof message === "string" && message.trim() !== "") return message.split("\n")[0]!.trim();
  }
  return undefined;
}

/**
 * The SQLSTATE of an error the server sent, if it is one. Only a driver
 * `DatabaseError` (pg's, another copy of pg's, PGlite's: each carries the
 * server's `severity`) has one; a Node socket error's `code` (`EPIPE`,
 * `EBADF`...) has the same shape and is not a SQLSTATE.
 *
 * @example
 * ```ts
 * if (sqlStateOf(err) === "23505") throw new ThreadExistsError(threadId, schema, { cause: err });
 * ```
 */
export function sqlStateOf(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const e = err as { code?: unknown; severity?: unknown; errno?: unknown; syscall?: unknown };
  if (typeof e.code !== "string" || !SQLSTATE.test(e.code)) return undefined;
  return typeof e.severity === "string" && e.errno === undefined && e.syscall === undefined ? e.code : undefined;
}

/**
 * SQLSTATEs worth retrying. `drop`: the connection (and, for a server-wide
 * event, every connection made before it) must not be reused.
 */
const RETRYABLE_SQLSTATES: ReadonlyArray<readonly [pattern: RegExp, drop: boolean]> = [
  // Class 08, connection exception (PgBouncer sends 08P01 for its own timeouts and lost servers).
  [/^08...$/, true],
  // read_only_sql_transaction: a standby, or a primary being switched over.
  [/^25006$/, true],
  // admin_shutdown (also pg_terminate_backend), crash_shutdown, cannot_connect_now (starting, stopping, promoting).
  [/^57P0[123]$/, true],
  // idle_session_timeout, idle_in_transaction_session_timeout: this session ended, the server is fine.
  [/^(57P05|25P03)$/, false],
  // serialization_failure, deadlock_detected (both also for conflicts with recovery on a standby),
  // query_canceled (statement_timeout, a cancel, recovery conflicts), lock_not_available (lock_timeout),
  // too_many_connections.
  [/^(40001|40P01|57014|55P03|53300)$/, false],
];

/** Node socket error codes of a connection that failed or went away. */
const SOCKET_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "ENETRESET",
  "ENOTCONN",
  "EAI_AGAIN",
  "ERR_STREAM_DESTROYED",
  "ERR_STREAM_WRITE_AFTER_END",
]);

/**
 * pg's own errors for a lost or silent connection carry no code, only these
 * messages (pg 8: client.js, pg-pool). Matched exactly; anything else without
 * a SQLSTATE or a socket code is not retryable.
 */
const CONNECTION_MESSAGES = new Set([
  "Connection terminated unexpectedly",
  "Connection terminated",
  "Connection terminated due to connection timeout",
  "Query read timeout",
  "timeout expired",
  "Client has encountered a connection error and is not queryable",
]);

/** pg-pool's "no free client in time": retryable, but says nothing about the server. */
const POOL_WAIT_TIMEOUT = "timeout exceeded when trying to connect";

/** The Node socket error code of `err` or of an error it wraps. */
function socketCodeOf(err: unknown): string | undefined {
  for (const e of chain(err)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && SOCKET_CODES.has(code)) return code;
  }
  return undefined;
}

/** `err`, the errors it wraps (`cause`), and an AggregateError's members (a host with several addresses). */
function* chain(err: unknown, depth = 0): Generator<object> {
  if (typeof err !== "object" || err === null || depth > 5) return;
  yield err;
  const { cause, errors } = err as { cause?: unknown; errors?: unknown };
  yield* chain(cause, depth + 1);
  if (Array.isArray(errors)) for (const member of errors) yield* chain(member, depth + 1);
}

/**
 * The `cause` of a retryable {@link DatabaseOperationError}: Postgres
 * committed locally but its synchronous standby had not confirmed the commit
 * (the wait for it was canceled, e.g. by `pg_cancel_backend`; the server only
 * warns). Such a commit may be missing after a failover, so it is not reported
 * as a success; repeating the write is safe.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof DatabaseOperationError && e.cause instanceof UnconfirmedCommitError) metrics.unconfirmed++; }
 * ```
 */
export class UnconfirmedCommitError extends Error {
  constructor() {
    super("the commit was not confirmed by the synchronous standby (the wait for it was canceled); it may not survive a failover");
    this.name = "UnconfirmedCommitError";
  }
}

/** What a failure means for a retry and for the connection it happened on. */
export interface FailureClass {
  /** Repeating the operation later may succeed. */
  retryable: boolean;
  /** No answer from the server: the link or the connection failed (or none was free in time). */
  connection: boolean;
  /**
   * The connection, and the server or link behind it, cannot be trusted: drop
   * it, and do not reuse connections opened before it either.
   */
  connectionLost: boolean;
}

/** See {@link isRetryable}; also says whether the connection behind the failure is done for. */
export function classify(err: unknown): FailureClass {
  const none = { retryable: false, connection: false, connectionLost: false };
  if (err instanceof DatabaseOperationError) return { ...classify(err.cause), retryable: err.retryable };
  if (err instanceof CheckpointerError) return { ...none, retryable: err.retryable };
  if (err instanceof UnconfirmedCommitError) return { ...none, retryable: true };
  for (const e of chain(err)) {
    const state = sqlStateOf(e);
    if (state) {
      const rule = RETRYABLE_SQLSTATES.find(([pattern]) => pattern.test(state));
      return rule ? { retryable: true, connection: false, connectionLost: rule[1] } : none;
    }
  }
  const lost = { retryable: true, connection: true, connectionLost: true };
  if (socketCodeOf(err)) return lost;
  for (const e of chain(err)) {
    const message = (e as { message?: unknown }).message;
    if (typeof message !== "string") continue;
    if (CONNECTION_MESSAGES.has(message)) return lost;
    if (message === POOL_WAIT_TIMEOUT) return { retryable: true, connection: true, connectionLost: false };
  }
  return none;
}

/**
 * True when repeating the failed operation later may succeed: the one rule
 * every retry in and around this package follows. For this package's errors it
 * is their `retryable` flag; for driver errors (what `cause` holds, or what a
 * pool you use directly throws) it is decided by the SQLSTATE the server sent,
 * else by the Node socket code, else by pg's connection-loss messages:
 *
 * | SQLSTATE or code | meaning | retryable |
 * |---|---|---|
 * | `08xxx` | connection exception | yes |
 * | `25006` | read-only transaction: a standby, or a primary being switched over | yes |
 * | `57P01` `57P02` `57P03` | shutdown, crash, cannot connect now (starting, promoting) | yes |
 * | `57P05` `25P03` | idle session / idle-in-transaction timeout | yes |
 * | `40001` `40P01` | serialization failure, deadlock (also recovery conflicts) | yes |
 * | `57014` `55P03` | statement canceled or timed out, lock timeout | yes |
 * | `53300` | too many connections | yes |
 * | `ECONNRESET` `ECONNREFUSED` `EPIPE` `ETIMEDOUT` `EHOSTUNREACH` ... | socket errors | yes |
 * | pg: `Connection terminated`, `Query read timeout`, connection or pool timeout | no answer in time | yes |
 * | anything else (`23505`, `42501`, `ENOTFOUND`, TLS and password errors...) | | no |
 *
 * A retry is safe: a re-put of the same checkpoint is accepted once, and
 * writes are idempotent per (task, idx).
 *
 * @example
 * ```ts
 * for (let attempt = 1; ; attempt++) {
 *   try { return await graph.invoke(input, config); }
 *   catch (err) { if (!isRetryable(err) || attempt === 10) throw err; await sleep(100 * 2 ** attempt); }
 * }
 * ```
 */
export function isRetryable(err: unknown): boolean {
  return classify(err).retryable;
}
