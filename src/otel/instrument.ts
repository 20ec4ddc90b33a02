/**
 * `instrument()`: a saver's, a store's or an operation's calls as OpenTelemetry spans and metrics
 * (issue 42). It replaces the target's public async methods, on the object itself, by ones that
 * run the original inside a span, a child of the caller's active span; what only the saver knows
 * (bytes sent, writes carried by a put, conflicts, refusals, retries) comes from its events
 * (facts.ts). The core knows nothing of this: it publishes its events (src/events.ts,
 * `EVENT_CHANNEL`) and this module listens.
 */
import { context, metrics, SpanKind, SpanStatusCode, trace, type Attributes, type Context } from "@opentelemetry/api";
import type { MeterProvider, TracerProvider } from "@opentelemetry/api";
import { createHash } from "node:crypto";
import type pg from "pg";
import { InvalidOptionsError } from "../errors.js";
import { checkOptionKeys } from "../validate.js";
import { listen, OPERATION, poolMetrics, toolMetrics, type Operation, type Tools } from "./facts.js";

/** What names a user's data, and how it goes into spans: a hash (the default), as it is, or not at all. */
export type IdsMode = "hash" | "raw" | "omit";

/** Options of {@link instrument}. */
export interface InstrumentOptions {
  /** Where spans go. Default: the global provider (`trace.getTracerProvider()`): none registered, none recorded. */
  tracerProvider?: TracerProvider;
  /** Where metrics go. Default: the global provider (`metrics.getMeterProvider()`). */
  meterProvider?: MeterProvider;
  /**
   * Thread ids and store namespaces may be personal data (a user's id in them): `"hash"` (default)
   * records `langgraph.thread.id_hash` (sha256 of `idSalt` and the id, 16 hex digits: the same id
   * gives the same hash, so one thread's spans can be found together), `"raw"` the id itself,
   * `"omit"` nothing. Values, keys and SQL parameters are never recorded.
   */
  ids?: IdsMode;
  /** Mixed into the hash, so a hash cannot be matched against a list of guessed ids. */
  idSalt?: string;
  /** A `pg.Pool` whose connections (idle, used, waiting) to report as metrics. */
  pool?: pg.Pool;
}

const OPTIONS = ["tracerProvider", "meterProvider", "ids", "idSalt", "pool"] as const satisfies readonly (keyof InstrumentOptions)[];

/** The package's span and meter name (instrumentation scope). */
const SCOPE = "langgraph-checkpoint-pg";

/** Instrumented targets: instrumenting one twice would time each call twice. */
const instrumented = new WeakSet<object>();

/** How ids go into attributes ({@link InstrumentOptions.ids}). */
type Ids = (id: unknown, what?: "thread" | "namespace") => Attributes;

/** A method's span attributes from its arguments, and (optionally) from its result. */
interface Traced {
  args?: (args: unknown[], ids: Ids) => Attributes;
  result?: (result: unknown) => Attributes;
}

const threadOf = (config: unknown): unknown => (config as { configurable?: { thread_id?: unknown } } | undefined)?.configurable?.thread_id;
const nsOf = (config: unknown): Attributes => {
  const ns = (config as { configurable?: { checkpoint_ns?: unknown } } | undefined)?.configurable?.checkpoint_ns;
  // A namespace names nodes and task ids, not users: it is recorded as it is.
  return typeof ns === "string" ? { "langgraph.checkpoint.ns": ns } : {};
};
const fromConfig = (config: unknown, ids: Ids): Attributes => ({ ...ids(threadOf(config)), ...nsOf(config) });
const rows = (n: number): Attributes => ({ "db.response.returned_rows": n });
/** An operation's schema, from its options (`prune({ schema })`); else its `migrate` event says it. */
const schemaOf = (options: unknown): Attributes => {
  const schema = (options as { schema?: unknown } | undefined)?.schema;
  return typeof schema === "string" ? { "db.namespace": schema } : {};
};

/** The saver's methods traced, and what each span says. */
const SAVER: Record<string, Traced> = {
  put: { args: ([config], ids) => fromConfig(config, ids) },
  putWrites: { args: ([config], ids) => fromConfig(config, ids) },
  getTuple: { args: ([config], ids) => fromConfig(config, ids), result: (tuple) => rows(tuple === undefined ? 0 : 1) },
  list: { args: ([config], ids) => fromConfig(config, ids) },
  getDeltaChannelHistory: { args: ([options], ids) => fromConfig((options as { config?: unknown } | undefined)?.config, ids) },
  deleteThread: { args: ([threadId], ids) => ids(threadId) },
  copyThread: { args: ([from, to], ids) => ({ ...ids(from), ...prefixed(ids(to), "langgraph.thread.", "langgraph.target_thread.") }) },
  setup: {},
};

/** The store's methods traced: a namespace may hold a user's id, so it is recorded as thread ids are. */
const STORE: Record<string, Traced> = {
  get: { args: ([namespace], ids) => ids(namespace, "namespace"), result: (item) => rows(item === null ? 0 : 1) },
  put: { args: ([namespace], ids) => ids(namespace, "namespace") },
  delete: { args: ([namespace], ids) => ids(namespace, "namespace") },
  search: { args: ([prefix], ids) => ids(prefix, "namespace"), result: (items) => rows((items as unknown[]).length) },
  batch: { args: ([operations]) => ({ "langgraph.store.operations": (operations as unknown[]).length }) },
  listNamespaces: { result: (namespaces) => rows((namespaces as unknown[]).length) },
  setup: {},
};

/** The package's plain operations that can be instrumented, by their name: their span's, and what it says. */
const FUNCTIONS: Record<string, { span: string } & Traced> = {
  prune: {
    span: "checkpoint.prune",
    args: ([options]) => schemaOf(options),
    result: (r) => {
      const p = r as { checkpoints: number; writes: number; blobs: number; bytes: number; dryRun: boolean; threadsScanned: number };
      return { "langgraph.rows_deleted": p.dryRun ? 0 : p.checkpoints + p.writes + p.blobs, "langgraph.bytes_deleted": p.dryRun ? 0 : p.bytes, "langgraph.prune.threads_scanned": p.threadsScanned, "langgraph.dry_run": p.dryRun };
    },
  },
  migrate: { span: "checkpoint.migrate", args: ([options]) => schemaOf(options) },
  migrateStore: { span: "store.migrate", args: ([options]) => schemaOf(options) },
};

function prefixed(attributes: Attributes, from: string, to: string): Attributes {
  return Object.fromEntries(Object.entries(attributes).map(([k, v]) => [k.replace(from, to), v]));
}

function checkOptions(options: unknown): InstrumentOptions {
  const o = checkOptionKeys<InstrumentOptions>(options ?? {}, OPTIONS, "instrument()");
  if (o.ids !== undefined && o.ids !== "hash" && o.ids !== "raw" && o.ids !== "omit") throw new InvalidOptionsError("ids", 'expected "hash", "raw" or "omit"');
  if (o.idSalt !== undefined && typeof o.idSalt !== "string") throw new InvalidOptionsError("idSalt", "expected a string");
  for (const name of ["tracerProvider", "meterProvider"] as const) {
    const method = name === "tracerProvider" ? "getTracer" : "getMeter";
    if (o[name] !== undefined && typeof (o[name] as unknown as Record<string, unknown>)?.[method] !== "function") throw new InvalidOptionsError(name, `expected an OpenTelemetry ${name} (with ${method}())`);
  }
  if (o.pool !== undefined && typeof (o.pool as { totalCount?: unknown })?.totalCount !== "number") throw new InvalidOptionsError("pool", "expected a pg.Pool");
  return o;
}

/** How ids go into spans ({@link InstrumentOptions.ids}); `what` names the attribute: `thread.id`, `store.namespace`. */
function idRecorder(mode: IdsMode, salt: string): Ids {
  // The last id's hash: a run's calls are on one thread, and hashing was a fifth of what a span cost.
  let last: { text: string; hash: string } | undefined;
  return (id, what = "thread") => {
    if (mode === "omit" || id === undefined || id === null) return {};
    const text = Array.isArray(id) ? id.join("/") : String(id);
    const name = what === "thread" ? "langgraph.thread.id" : "langgraph.store.namespace";
    if (mode === "raw") return { [name]: text };
    if (last?.text !== text) last = { text, hash: createHash("sha256").update(salt).update("\0").update(text).digest("hex").slice(0, 16) };
    return { [`${name}_hash`]: last.hash };
  };
}

/**
 * Trace a saver, a store, or one of the package's operations (`prune`, `migrate`, `migrateStore`):
 * each call of theirs becomes a span, a child of the caller's active span, with the OpenTelemetry
 * database attributes and this package's own, and its duration, bytes written, retries and
 * conflicts metrics. A saver or store is changed in place and returned (instrumenting it again
 * changes nothing); a function is returned traced. Without a registered OpenTelemetry SDK (or providers passed in), spans are not recorded
 * and the cost is a few function calls. See docs/tracing.md.
 *
 * @example
 * ```ts
 * import { instrument } from "langgraph-checkpoint-pg/otel";
 * const checkpointer = instrument(new PostgresSaver(pool), { pool });
 * const graph = builder.compile({ checkpointer });
 * ```
 */
export function instrument<T extends object>(target: T, options?: InstrumentOptions): T {
  const o = checkOptions(options);
  const tracer = (o.tracerProvider ?? trace.getTracerProvider()).getTracer(SCOPE);
  const meter = (o.meterProvider ?? metrics.getMeterProvider()).getMeter(SCOPE);
  const tools: Tools = { tracer, ...toolMetrics(meter) };
  if (o.pool) poolMetrics(meter, o.pool);
  const ids = idRecorder(o.ids ?? "hash", o.idSalt ?? "");
  if (typeof (target as unknown) === "function") {
    const traced = FUNCTIONS[(target as unknown as Method).name];
    if (!traced) throw new InvalidOptionsError("target", `expected a saver, a store, or one of ${Object.keys(FUNCTIONS).join(", ")}`);
    const [kind, operation] = traced.span.split(".") as [string, string];
    return wrap(target as unknown as Method, traced, tools, ids, { kind, operation, schema: undefined }) as T;
  }
  const methods = isSaver(target) ? SAVER : isStore(target) ? STORE : undefined;
  if (!methods) throw new InvalidOptionsError("target", `expected a saver, a store, or one of ${Object.keys(FUNCTIONS).join(", ")}`);
  if (instrumented.has(target)) return target;
  instrumented.add(target);
  const kind = methods === SAVER ? "checkpoint" : "store";
  const schema = typeof (target as { schema?: unknown }).schema === "string" ? (target as { schema: string }).schema : undefined;
  listen(tools, schema);
  const object = target as unknown as Record<string, Method>;
  for (const [name, traced] of Object.entries(methods)) {
    const method = object[name];
    if (typeof method !== "function") continue;
    const where = { kind, operation: name, schema };
    object[name] = name === "list" ? wrapGenerator(method, traced, tools, ids, where) : wrap(method, traced, tools, ids, where);
  }
  return target;
}

type Method = (...args: unknown[]) => unknown;
interface Where {
  kind: string;
  operation: string;
  schema: string | undefined;
}

function isSaver(x: object): boolean {
  const o = x as Record<string, unknown>;
  return typeof o.putWrites === "function" && typeof o.getTuple === "function";
}

function isStore(x: object): boolean {
  const o = x as Record<string, unknown>;
  return typeof o.batch === "function" && typeof o.listNamespaces === "function";
}

/** Start a call's span under the caller's active span; its context carries the span and the operation events report to. */
function begin(owner: unknown, traced: Traced, tools: Tools, ids: Ids, where: Where, args: unknown[], parent: Context): { operation: Operation; active: Context } {
  const base: Attributes = { "db.system.name": "postgresql", "db.system": "postgresql", "db.operation.name": where.operation, ...(where.schema === undefined ? {} : { "db.namespace": where.schema }) };
  const span = tools.tracer.startSpan(`${where.kind}.${where.operation}`, { kind: SpanKind.CLIENT, attributes: base }, parent);
  // No SDK, or not sampled: nothing to describe (hashing ids is the one cost worth skipping).
  if (span.isRecording() && traced.args) span.setAttributes(traced.args(args, ids));
  const operation: Operation = { owner, span, tools, base, started: performance.now() };
  return { operation, active: trace.setSpan(parent, span).setValue(OPERATION, operation) };
}

/** End a call's span and record its duration: an error by its name, `code` and `retryable` only (messages may quote what the server said). */
function end(operation: Operation, traced: Traced, error: unknown, result?: unknown): void {
  const { span, tools, base } = operation;
  const attributes: Attributes = { ...base };
  if (error !== undefined) {
    const e = error as { name?: unknown; code?: unknown; retryable?: unknown; sqlState?: unknown };
    const name = typeof e.name === "string" ? e.name : "Error";
    const code = typeof e.code === "string" ? e.code : undefined;
    attributes["error.type"] = code ?? name;
    span.setAttributes({
      "error.type": code ?? name,
      ...(typeof e.retryable === "boolean" ? { "langgraph.error.retryable": e.retryable } : {}),
      ...(typeof e.sqlState === "string" ? { "db.response.status_code": e.sqlState } : {}),
    });
    span.recordException({ name, message: code ?? name });
    span.setStatus({ code: SpanStatusCode.ERROR, message: code ?? name });
  } else if (traced.result && span.isRecording()) span.setAttributes(traced.result(result));
  span.end();
  tools.duration.record((performance.now() - operation.started) / 1000, attributes);
}

function wrap(method: Method, traced: Traced, tools: Tools, ids: Ids, where: Where): Method {
  return function (this: unknown, ...args: unknown[]) {
    const parent = context.active();
    // A plain function (prune) has no object: it is its own owner.
    const owner = this ?? method;
    if ((parent.getValue(OPERATION) as Operation | undefined)?.owner === owner) return method.apply(this, args);
    const { operation, active } = begin(owner, traced, tools, ids, where, args, parent);
    let result: unknown;
    try {
      result = context.with(active, method, this, ...args);
    } catch (error) {
      end(operation, traced, error);
      throw error;
    }
    return Promise.resolve(result).then(
      (value) => {
        end(operation, traced, undefined, value);
        return value;
      },
      (error: unknown) => {
        end(operation, traced, error);
        throw error;
      },
    );
  };
}

/** `list` streams: its span lasts from the first page asked for to the last (or to the caller's `break`), counting what it yielded. */
function wrapGenerator(method: Method, traced: Traced, tools: Tools, ids: Ids, where: Where): Method {
  return function (this: unknown, ...args: unknown[]) {
    const parent = context.active();
    const self = this;
    return (async function* () {
      const { operation, active } = begin(self, traced, tools, ids, where, args, parent);
      let yielded = 0;
      let failure: unknown;
      const inner = context.with(active, method, self, ...args) as AsyncGenerator<unknown>;
      try {
        for (;;) {
          // Each page is read in the span's context, whoever asks for it.
          const next = await context.with(active, () => inner.next());
          if (next.done) return;
          yielded++;
          yield next.value;
        }
      } catch (error) {
        failure = error;
        throw error;
      } finally {
        if (failure === undefined) await context.with(active, () => inner.return(undefined));
        operation.span.setAttributes(rows(yielded));
        end(operation, traced, failure);
      }
    })();
  };
}
