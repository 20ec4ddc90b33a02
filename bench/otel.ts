/**
 * `npm run bench -- --otel`: what tracing costs a 10-node invoke (issue 42). Three savers on one
 * database and one pool, each compiled into the 10-node graph (graph.ts), interleaved in small
 * alternating batches (stats.ts):
 *
 * - `off`: the saver as it is, not instrumented;
 * - `on, SDK`: instrumented, with the OpenTelemetry SDK recording every span (a BatchSpanProcessor
 *   handing them to an exporter that drops them, so no I/O is timed) and every metric (a reader
 *   that collects only at the end);
 * - `on, no SDK`: instrumented with no provider registered: the API's no-op, what a library
 *   instrumented by default costs an application that does not trace.
 *
 * The async-hooks context manager is registered for all three, as the Node SDK registers it in an
 * application that traces; what it costs is the SDK's, not this package's. With one saver
 * instrumented the events' channel has a subscriber, so `off` also pays for publishing its events:
 * its numbers are an upper bound of the plain saver's.
 */
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { createDatabase, dropAll, startServer } from "./db.js";
import { tenNodeGraph, type Durability } from "./graph.js";
import { compare, fmt, fmtRatio, fmtSpread, median, pairedRatio, roundRatio } from "./stats.js";

const log = (msg: string) => console.error(`[bench otel] ${msg}`);

/** An exporter that drops what it is given: the SDK's work is timed, an exporter's I/O is not. */
class DroppingExporter implements SpanExporter {
  spans = 0;
  export(spans: ReadableSpan[], done: (result: { code: 0 }) => void): void {
    this.spans += spans.length;
    done({ code: 0 });
  }
  async shutdown(): Promise<void> {}
}

export async function otelMain(args: { rounds: number }): Promise<number> {
  const { PostgresSaver, migrate } = await import("../src/index.js");
  const { instrument } = await import("../src/otel/index.js");
  const server = await startServer();
  log(`postgres: ${server.source}`);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const exporter = new DroppingExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
  const reader = new PeriodicExportingMetricReader({ exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE), exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  // LangGraph's default durability: what most graphs run with.
  const durability: Durability = "async";
  try {
    const db = await createDatabase(server.adminUrl, "otel");
    const pool = db.pool({ max: 10 });
    await migrate({ pool, schema: "public" });
    const graphs = {
      off: tenNodeGraph(new PostgresSaver(pool)),
      "on, SDK": tenNodeGraph(instrument(new PostgresSaver(pool), { tracerProvider, meterProvider, pool })),
      "on, no SDK": tenNodeGraph(instrument(new PostgresSaver(pool))),
    };
    // This process's CPU time per invoke, beside the wall time: less at the mercy of a busy machine.
    const cpu = new Map<string, number[]>(Object.keys(graphs).map((name) => [name, []]));
    const contenders = Object.entries(graphs).map(([name, graph]) => ({
      name,
      op: async (i: number) => {
        const before = process.cpuUsage();
        await graph.invoke(`${name}-${i}`, durability);
        const used = process.cpuUsage(before);
        cpu.get(name)!.push((used.user + used.system) / 1000);
      },
    }));
    log(`${args.rounds} rounds of 8 batches of 5 invokes per contender, alternating`);
    const stats = await compare(contenders, { rounds: args.rounds, batches: 8, batchSize: 5, warmup: 10 });
    await tracerProvider.forceFlush();
    const off = stats.get("off")!;
    const invokes = stats.get("on, SDK")!.samples + 10;
    console.log(`tracing's cost per 10-node invoke (durability ${durability}; ${args.rounds} rounds, batches alternating; ratios: per round median [min-max], and paired batches' geometric mean [95% interval])`);
    for (const [name, s] of stats) {
      const latency = name === "off" ? "" : `  p50 vs off ${fmtSpread(roundRatio(s, off, (r) => r.p50), 3)}  throughput off/this ${fmtRatio(pairedRatio(off, s), 3)}`;
      const cpuMs = median(cpu.get(name)!);
      const cpuRatio = name === "off" ? "" : ` (${(cpuMs / median(cpu.get("off")!)).toFixed(3)}x)`;
      console.log(`  ${name.padEnd(11)} p50 ${fmt(s.p50)} ms  ${fmt(s.opsPerSec)} invokes/s  CPU ${fmt(cpuMs)} ms${cpuRatio}${latency}`);
    }
    console.log(`  spans exported by the SDK: ${(exporter.spans / invokes).toFixed(1)} per invoke`);
    return 0;
  } finally {
    await tracerProvider.shutdown();
    await meterProvider.shutdown();
    await dropAll();
    await server.stop();
  }
}
