/**
 * What the CLI's command table is made of (main.ts): a command's help and its
 * `run` (parse and check the arguments, nothing opened before they are
 * valid, then load and call the command's module), and what they share.
 */
import { connectionTarget, schemaOption } from "./args.js";
import type { Common, Io } from "./context.js";

export interface CommandSpec {
  usage: string;
  summary: string;
  options: string;
  examples: string;
  /** Parse and check `argv` (throwing UsageError), then run. */
  run(argv: string[], io: Io): Promise<number>;
}

/**
 * Each command's module, loaded when the command runs: `--help` and usage
 * errors load none, and a command loads only its own. Those that decode no
 * stored value (migrate, status, threads, history, prune) load no
 * @langchain/*, which alone took most of a second of each start (issue 39).
 */
export const load = {
  /** migrate (its adoption steps load what they need), status */
  migrate: () => import("./commands-migrate.js"),
  /** migrate --store, --store-only */
  store: () => import("./commands-store.js"),
  /** threads (the list), history */
  read: () => import("./commands-read.js"),
  /** show, export */
  show: () => import("./commands-show.js"),
  prune: () => import("./commands-prune.js"),
  /** threads delete, threads copy, import, compact */
  write: () => import("./commands-write.js"),
  /** upgrade-state, reencrypt */
  state: () => import("./commands-state.js"),
};

export const JSON_OPTION = { json: { type: "boolean" } } as const;

/** The flags and checks every command shares. */
export function common(command: string, values: { "database-url"?: string; "data-dir"?: string; schema?: string; json?: boolean }): Common {
  return { command, target: connectionTarget(command, values), schema: schemaOption(command, values.schema), json: values.json === true };
}
