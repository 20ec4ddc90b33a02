/**
 * The saver: `PostgresSaver`, LangGraph's `BaseCheckpointSaver` on our tables.
 * The class and its public methods (saver.ts; its options in options.ts, what
 * `open()` shares with the store in src/db/open.ts; the state its parts share in context.ts), the write path (write.ts: put and
 * putWrites, their values encoded in encode.ts), the order of the work on
 * each thread (threads.ts: results in call order, reads after the writes in
 * flight, writes riding the next put), the read path (read.ts: rows back
 * into tuples; filter.ts: list's metadata filter), what a put does to its
 * lineage and run leases (lineage.ts), state upgrades (upgrade.ts), channel
 * versions (version.ts), state-schema upcasting (upcast.ts), and the statements: their text
 * (sql/), their parameters by name (params.ts), how they run (runner.ts:
 * prepared, typed errors); deleted threads' tombstones and the write gate
 * (tombstones.ts), copying a thread (copy.ts), background retention
 * (retention.ts). This file is what the package exports from the folder.
 */
export { PostgresSaver } from "./saver.js";
export { StateVersionError, type Upcaster, type UpcastFunction, type UpcastContext } from "./upcast.js";
export type { CopyThreadOptions, CopyThreadResult } from "./copy.js";
export type { RetentionOptions } from "./retention.js";
export { ALLOW_FORK_KEY, BOUNDED_POOL, type PostgresSaverOptions, type SetupOptions, type OpenOptions, type LineageMode } from "./options.js";
