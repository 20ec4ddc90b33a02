/**
 * `langgraph-checkpoint-pg/otel`: the saver's, the store's and the operations' calls as
 * OpenTelemetry spans and metrics, opt-in (issue 42, docs/tracing.md). Only this entry loads
 * `@opentelemetry/api` (an optional peer dependency); the package's main entry never imports it.
 *
 * @example
 * ```ts
 * import { instrument } from "langgraph-checkpoint-pg/otel";
 * ```
 */
export { instrument, type InstrumentOptions, type IdsMode } from "./instrument.js";
