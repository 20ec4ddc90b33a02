/**
 * What only the saver knows, onto the spans and metrics of instrument.ts: the saver publishes its
 * events on `EVENT_CHANNEL` (src/events.ts) in the async context of the call that caused them, so
 * the operation found in that context ({@link OPERATION}) is the span they belong to. Background
 * work has no call: a retention run becomes a span of its own, after the fact.
 */
import { createContextKey, context, ROOT_CONTEXT, SpanKind, SpanStatusCode, type Attributes, type Counter, type Histogram, type Meter, type Span, type Tracer } from "@opentelemetry/api";
import { subscribe } from "node:diagnostics_channel";
import type pg from "pg";
import { EVENT_CHANNEL, type RetentionEvent, type SaverEvent } from "../events.js";

/** The operation a call runs under: the context key through which its events find its span. */
export const OPERATION = createContextKey("langgraph-checkpoint-pg operation");

/** One instrumentation's tracer and metrics. */
export interface Tools extends ReturnType<typeof toolMetrics> {
  tracer: Tracer;
}

/** A call in progress: its span, and the attributes its metrics are recorded with. */
export interface Operation {
  /** The object whose method it is: its calls of its own methods are part of this one (the store's listNamespaces calls its batch). */
  owner: unknown;
  span: Span;
  tools: Tools;
  base: Attributes;
  started: number;
}

/**
 * The metrics, named as OpenTelemetry's database conventions name them where they have a name
 * (`db.client.operation.duration`, in seconds, with their bucket advice), this package's otherwise.
 */
export function toolMetrics(meter: Meter) {
  return {
    duration: meter.createHistogram("db.client.operation.duration", {
      unit: "s",
      description: "Duration of the saver's and the store's operations",
      advice: { explicitBucketBoundaries: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10] },
    }) as Histogram,
    bytes: meter.createCounter("langgraph.checkpoint.bytes_written", { unit: "By", description: "Checkpoints', values' and writes' size as sent" }) as Counter,
    retries: meter.createCounter("langgraph.checkpoint.retries", { description: "Statements sent again (a put whose head moved, setup waiting for the database)" }) as Counter,
    conflicts: meter.createCounter("langgraph.checkpoint.conflicts", { description: "Linear-mode puts refused because another writer moved the head" }) as Counter,
    refusals: meter.createCounter("langgraph.checkpoint.refusals", { description: "Writes refused: a parent not stored, a deleted thread" }) as Counter,
  };
}

/** Pools already observed: a saver and a store on one pool report it once. */
const observedPools = new WeakSet<pg.Pool>();
let pools = 0;

/** The pool's connections, as the database conventions count them: idle, used, and requests waiting for one. */
export function poolMetrics(meter: Meter, pool: pg.Pool): void {
  if (observedPools.has(pool)) return;
  observedPools.add(pool);
  const name = { "db.client.connection.pool.name": ++pools === 1 ? "langgraph-checkpoint-pg" : `langgraph-checkpoint-pg-${pools}` };
  meter.createObservableUpDownCounter("db.client.connection.count", { unit: "{connection}", description: "Connections of the pool, by state" }).addCallback((result) => {
    result.observe(pool.idleCount, { ...name, "db.client.connection.state": "idle" });
    result.observe(pool.totalCount - pool.idleCount, { ...name, "db.client.connection.state": "used" });
  });
  meter.createObservableUpDownCounter("db.client.connection.pending_requests", { unit: "{request}", description: "Requests waiting for a connection" }).addCallback((result) => {
    result.observe(pool.waitingCount, name);
  });
}

/** Schemas whose retention runs become spans, and with which tools (the last saver instrumented on the schema's). */
const background = new Map<string, Tools>();
let listening = false;

/** Listen to the events (once per process), and make the retention runs of `schema` spans with `tools`. */
export function listen(tools: Tools, schema: string | undefined): void {
  if (schema !== undefined) background.set(schema, tools);
  if (listening) return;
  listening = true;
  subscribe(EVENT_CHANNEL, (message) => {
    // A subscriber's throw would be rethrown on the next tick and crash the process: tracing never may.
    try {
      const event = message as SaverEvent;
      if (event.type === "retention" || event.type === "retentionFailed") retentionSpan(event);
      else {
        const operation = context.active().getValue(OPERATION) as Operation | undefined;
        if (operation?.span.isRecording()) record(operation, event);
      }
    } catch {
      // Nothing to do: the span lacks one fact.
    }
  });
}

/** An event's facts onto its operation's span and metrics. Ids and values are not among them. */
function record({ span, tools, base }: Operation, event: SaverEvent): void {
  switch (event.type) {
    case "put":
      span.setAttributes({ "langgraph.checkpoint.blobs": event.blobs, "langgraph.bytes_written": event.bytes, "langgraph.checkpoint.writes_coalesced": event.writes, "langgraph.attempts": event.attempts });
      tools.bytes.add(event.bytes, base);
      if (event.attempts > 1) tools.retries.add(event.attempts - 1, base);
      return;
    case "putWrites":
      span.setAttributes({ "langgraph.checkpoint.writes": event.writes, "langgraph.bytes_written": event.bytes });
      tools.bytes.add(event.bytes, base);
      return;
    case "conflict":
      span.setAttribute("langgraph.checkpoint.conflict", event.reason);
      tools.conflicts.add(1, base);
      return;
    case "parentMissing":
    case "deletedThreadWrite": {
      const reason = event.type === "parentMissing" ? "parent-missing" : `thread-deleted:${event.reason}`;
      span.setAttribute("langgraph.checkpoint.refused", reason);
      tools.refusals.add(1, { ...base, "langgraph.checkpoint.refused": reason });
      return;
    }
    case "fork":
      span.setAttribute("langgraph.checkpoint.fork", event.deliberate ? "deliberate" : "displaced-head");
      return;
    case "deleteThread":
      span.setAttribute("langgraph.rows_deleted", event.checkpoints + event.writes + event.blobs);
      return;
    case "copyThread":
      span.setAttributes({ "langgraph.rows_written": event.checkpoints + event.writes + event.blobs, "langgraph.copy.overwrote": event.overwrote });
      return;
    case "migrate":
      span.setAttributes({ "db.namespace": event.schema, "langgraph.migrations.applied": event.applied.length, "langgraph.migrations.from_version": event.fromVersion, "langgraph.migrations.to_version": event.toVersion, "langgraph.dry_run": event.dryRun });
      return;
    case "retry":
      // Its message is the driver's: left out, as errors' are.
      span.addEvent("retry", { "langgraph.attempt": event.attempt, "langgraph.delay_ms": event.delayMs, ...(event.code ? { "error.type": event.code } : {}) });
      tools.retries.add(1, base);
      return;
    case "leaseReleased":
      span.setAttribute("langgraph.checkpoint.lease_released", true);
      return;
  }
}

/** A retention run, a span of its own (no call started it), from its start to its end as the event says. */
function retentionSpan(event: Extract<RetentionEvent, { type: "retention" | "retentionFailed" }>): void {
  const tools = background.get(event.schema);
  if (!tools) return;
  const base: Attributes = { "db.system.name": "postgresql", "db.system": "postgresql", "db.operation.name": "retention", "db.namespace": event.schema };
  const now = Date.now();
  const startTime = event.type === "retention" ? now - event.durationMs : now;
  const span = tools.tracer.startSpan("checkpoint.retention", { kind: SpanKind.INTERNAL, root: true, startTime, attributes: base }, ROOT_CONTEXT);
  if (event.type === "retention") {
    span.setAttributes({
      "langgraph.rows_deleted": event.checkpoints + event.writes + event.blobs,
      "langgraph.bytes_deleted": event.bytes,
      "langgraph.retention.threads_expired": event.threadsExpired,
      "langgraph.retention.threads_skipped": event.threadsSkipped,
      "langgraph.retention.aborted": event.aborted,
    });
  } else {
    const type = event.code ?? "RetentionFailed";
    span.setAttribute("error.type", type);
    span.setStatus({ code: SpanStatusCode.ERROR, message: type });
  }
  span.end(now);
  tools.duration.record((now - startTime) / 1000, event.type === "retention" ? base : { ...base, "error.type": event.code ?? "RetentionFailed" });
}
