/**
 * What the saver's parts share. `PostgresSaver` keeps its state in private
 * fields; the write path, the read path, the lineage and upgrade code are
 * plain functions that get this view of it, so each lives in its own file
 * while the class stays the one face of the saver.
 */
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import type pg from "pg";
import type { Db } from "../db/db.js";
import type { EventHandler, HandlerErrorHandler } from "../events.js";
import type { StateVersioning } from "./upcast.js";
import type { ElementMemory } from "./elements.js";
import type { LineageMode } from "./options.js";
import type { Statements } from "./sql/index.js";

/** The fixed statements (all but `list`'s, which are built per call). */
export type StatementName = { [K in keyof Statements]: Statements[K] extends string ? K : never }[keyof Statements];

export interface SaverContext {
  readonly schema: string;
  readonly lineage: LineageMode;
  /** The saver's serializer, read at each use (it is a public field of the base class). */
  readonly serde: SerializerProtocol;
  readonly db: Db;
  readonly queries: Statements;
  readonly onEvent: EventHandler | undefined;
  readonly onHandlerError: HandlerErrorHandler | undefined;
  /** Linear mode: how long a run's newest checkpoint keeps the lineage busy (runLeaseMs), in seconds. */
  readonly leaseSeconds: number;
  readonly ttlSeconds: number | null;
  readonly maxValueBytes: number;
  readonly versioning: StateVersioning | undefined;
  /** List channels stored by their elements (see elements.ts), with what the saver remembers of them; undefined: off. */
  readonly elements: ElementMemory | undefined;
  /** Checks once per saver that the schema is migrated to exactly what this code knows. */
  ensureReady(): Promise<void>;
  /** Run a fixed statement (prepared, unless turned off); a failure becomes a typed error. */
  query<R extends pg.QueryResultRow>(op: StatementName, values: unknown[], what: string): Promise<{ rows: R[] }>;
  /** Run a statement by its text, as {@link query}. */
  run<R extends pg.QueryResultRow>(text: string, values: unknown[], what: string): Promise<{ rows: R[] }>;
  /** The saver's `getNextVersion` (a subclass may override it). */
  nextVersion(current: string | number | undefined): string | number;
}
