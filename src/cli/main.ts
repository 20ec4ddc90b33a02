#!/usr/bin/env node
/**
 * The `langgraph-checkpoint-pg` command: migrate a schema (CI, deploy steps),
 * check its status, and inspect, export and import threads. Every command
 * takes `--help`; output goes to stdout, errors to stderr as one line.
 *
 * This file prints help and dispatches; each command's arguments are parsed
 * and checked (nothing is opened before they are valid) by its spec
 * (specs-schema.ts, specs-threads.ts), which then loads the command's own
 * module (spec.ts, `load`): nothing a command does not need is loaded.
 *
 * Exit codes: 0 ok, 1 the operation failed, 2 bad usage, 3 schema not
 * migrated / newer than this code, 4 embedded data folder held by another process.
 */
import { readFileSync } from "node:fs";
import { BIN, UsageError } from "./args.js";
import type { Io } from "./context.js";
import { EXIT, errorText, exitCodeOf } from "./exit.js";
import { contextOf } from "../hint.js";
import type { CommandSpec } from "./spec.js";
import { SCHEMA_COMMANDS } from "./specs-schema.js";
import { THREAD_COMMANDS } from "./specs-threads.js";
import { resolveUrl } from "./mask.js";

const DATABASE_HELP = `Database (every command):
  --database-url <url>  a Postgres server (default: $DATABASE_URL)
  --data-dir <dir>      the embedded database (PGlite) folder, used when no URL is
                        given (default ./.langgraph-pg); overrides $DATABASE_URL
  --schema <name>       Postgres schema holding the tables (default public)
  -h, --help            this help`;

const EXIT_HELP = `Exit codes:
  0  success
  1  the operation failed (database error, thread not found, import conflict, bad file)
  2  bad usage (unknown command or option, missing or malformed argument); nothing was done
  3  schema not migrated, or migrated by a newer release (status: not up to date),
     or the official saver's tables in the schema to migrate (migrate: another --schema, --adopt)
  4  the embedded data folder is in use by another process`;

const MAIN_HELP = `${BIN}: migrate and inspect the LangGraph.js Postgres checkpointer

Usage: ${BIN} <command> [options]

Commands:
  migrate               apply pending schema migrations (--dry-run prints the SQL)
  status                applied and pending migrations, row counts per table
  threads               recent threads: checkpoints, namespaces, size of values, last update
  threads delete <id>   delete threads whole (--dry-run: what would go)
  threads copy <a> <b>  copy a thread's history to another thread id (--up-to: part of it)
  history <thread>      a thread's checkpoints as a tree, per namespace
  show <thread> [id]    one checkpoint, decoded: metadata, channel values, pending writes
  export [thread...]    threads as JSON lines (--all: every thread)
  import [file]         load an export into this database and schema
  prune                 retention: old checkpoints, idle threads (dry run unless --yes)
  upgrade-state         rewrite old checkpoints into the current state schema (upcasters)
  reencrypt             rewrite encrypted values under the current key, bound to their rows
  compact               store values written whole (e.g. messages) by their elements
  grants --role <role>  print the GRANT statements for a least-privilege application role

${DATABASE_HELP}

Without --database-url or DATABASE_URL, commands use the embedded database in
./.langgraph-pg (one process at a time). Passwords in URLs are never printed.

${EXIT_HELP}

Run \`npx ${BIN} <command> --help\` for a command's options.`;

/** Every command, in the order the main help lists them (so does an unknown command's message). */
const ALL: Record<string, CommandSpec> = { ...SCHEMA_COMMANDS, ...THREAD_COMMANDS };
const COMMANDS: Record<string, CommandSpec> = Object.fromEntries(
  ["migrate", "status", "threads", "history", "show", "export", "import", "prune", "upgrade-state", "reencrypt", "compact", "grants"].map((name) => [name, ALL[name]!]),
);

function helpOf(c: CommandSpec): string {
  return (
    `Usage: ${BIN} ${c.usage}\n\n${c.summary}\n` +
    (c.options ? `\nOptions:\n${c.options}\n` : "") +
    `\n${DATABASE_HELP}\n\n${EXIT_HELP}\n\nExamples:\n${c.examples}`
  );
}

/** Run the CLI on `argv` (without node and the script); returns the exit code. */
async function main(argv: string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    const topic = name === "help" ? rest[0] : undefined;
    io.out(topic !== undefined && COMMANDS[topic] ? helpOf(COMMANDS[topic]) : MAIN_HELP);
    return name === undefined ? EXIT.USAGE : EXIT.OK;
  }
  if (name === "--version" || name === "-v") {
    io.out((JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version);
    return EXIT.OK;
  }
  const command = Object.prototype.hasOwnProperty.call(COMMANDS, name) ? COMMANDS[name] : undefined;
  // Known before parsing, so a message can never leak the password of the URL in use.
  const target = { databaseUrl: flagValue(rest, "--database-url"), dataDir: flagValue(rest, "--data-dir") };
  const url = resolveUrl(target);
  // The commands an error suggests carry these flags, to act on the same database (never the URL's value).
  const context = contextOf(target);
  try {
    if (!command) throw new UsageError(`unknown command ${JSON.stringify(name)} (commands: ${Object.keys(COMMANDS).join(", ")})`);
    if (rest.includes("--help") || rest.includes("-h")) {
      io.out(helpOf(command));
      return EXIT.OK;
    }
    return await command.run(rest, io);
  } catch (err) {
    let message = errorText(err, url, context);
    if (err instanceof UsageError) {
      const usage = err.command && COMMANDS[err.command] ? `${BIN} ${COMMANDS[err.command]!.usage}` : `${BIN} <command> [options]`;
      message += `\nUsage: ${usage} (see \`${BIN}${err.command ? ` ${err.command}` : ""} --help\`)`;
    }
    io.err(`${BIN}${command ? ` ${name}` : ""}: ${message}`);
    return exitCodeOf(err);
  }
}

/** A flag's value before parsing (to know which URL to mask in messages, and what suggested commands carry). */
function flagValue(argv: string[], flag: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === flag) return argv[i + 1];
    if (argv[i]!.startsWith(`${flag}=`)) return argv[i]!.slice(flag.length + 1);
  }
  return undefined;
}

// A closed pipe (`... | head`) ends the output quietly, not with a stack trace.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code !== "EPIPE") throw err;
  process.exit(process.exitCode ?? EXIT.OK);
});

process.exitCode = await main(process.argv.slice(2), {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
});
