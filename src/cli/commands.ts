/**
 * What each CLI command does, once its arguments are parsed and checked
 * (src/cli/main.ts). Loaded lazily, so `--help` and usage errors stay instant.
 * By concern: commands-migrate.ts (migrate, status, upgrade-state,
 * reencrypt), commands-read.ts (threads, history, show, export) and
 * commands-write.ts (delete, copy, import, prune, compact); context.ts holds what they share.
 */
export type { Common, Io } from "./context.js";
export { migrateCommand, reencryptCommand, statusCommand, upgradeStateCommand } from "./commands-migrate.js";
export { storeMigrateCommand } from "./commands-store.js";
export { exportCommand, historyCommand, showCommand, threadsCommand } from "./commands-read.js";
export { compactCommand, copyThreadCommand, deleteThreadsCommand, importCommand, pruneCommand } from "./commands-write.js";
