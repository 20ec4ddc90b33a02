/**
 * The saver: `PostgresSaver`, LangGraph's `BaseCheckpointSaver` on our tables.
 * The class and its public methods (saver.ts; its options in options.ts, what
 * `open()` shares with the store in src/db/open.ts; the state its parts share
 * in context.ts). A put from its call to its outcome (put.ts), pending writes
 * (writes.ts), values encoded for both (encode.ts; by content: stored.ts,
 * elements.ts, element-codec.ts), the order of the work on each thread
 * (threads.ts: results in call order, reads after the writes in flight,
 * writes riding the next put), the read path (read.ts: rows back into tuples;
 * filter.ts: list's metadata filter), run leases (leases.ts), state upgrades
 * (upgrade.ts, upcast.ts), channel versions (version.ts), and the statements:
 * their text and parameters (sql/), how they run (runner.ts: prepared, typed
 * errors); deleted threads' tombstones and the write gates (tombstones.ts),
 * copying a thread (copy.ts), background retention (retention.ts). This file
 * is what the package exports from the folder.
 */
export { PostgresSaver } from "./saver.js";
export { StateVersionError, type Upcaster, type UpcastFunction, type UpcastContext } from "./upcast.js";
export type { CopyThreadOptions, CopyThreadResult } from "./copy.js";
export type { RetentionOptions } from "./retention.js";
export { ALLOW_FORK_KEY, BOUNDED_POOL, type PostgresSaverOptions, type SetupOptions, type OpenOptions, type LineageMode } from "./options.js";
