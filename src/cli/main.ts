#!/usr/bin/env node
/**
 * The `langgraph-checkpoint-pg` command: migrate a schema (CI, deploy steps),
 * check its status, and inspect, export and import threads. Every command
 * takes `--help`; output goes to stdout, errors to stderr as one line.
 *
 * This file parses and checks arguments (nothing is opened before they are
 * valid) and prints help; src/cli/commands.ts, loaded only then, does the work.
 *
 * Exit codes: 0 ok, 1 the operation failed, 2 bad usage, 3 schema not
 * migrated / newer than this code, 4 embedded data folder held by another process.
 */
import { readFileSync } from "node:fs";
import {
  BIN,
  CONNECTION_OPTIONS,
  UsageError,
  connectionTarget,
  durationArg,
  keyArg,
  parse,
  positionals,
  positiveInt,
  schemaOption,
} from "./args.js";
import type { Common, Io } from "./commands.js";
import { MAX_PARTITIONS } from "../db/partitions.js";
import { EXIT, errorText, exitCodeOf } from "./exit.js";
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

interface CommandSpec {
  usage: string;
  summary: string;
  options: string;
  examples: string;
  /** Parse and check `argv` (throwing UsageError), then run. */
  run(argv: string[], io: Io): Promise<number>;
}

const commands = () => import("./commands.js");

const JSON_OPTION = { json: { type: "boolean" } } as const;

/** How long `migrate` waits for a server by default: a CI database container takes seconds to start. */
const DEFAULT_MIGRATE_WAIT = "60s";

/** The flags and checks every command shares. */
function common(command: string, values: { "database-url"?: string; "data-dir"?: string; schema?: string; json?: boolean }): Common {
  return { command, target: connectionTarget(command, values), schema: schemaOption(command, values.schema), json: values.json === true };
}

/** migrate's store flags (see src/cli/commands-store.ts). */
const STORE_OPTIONS = {
  store: { type: "boolean" },
  "store-only": { type: "boolean" },
  dims: { type: "string" },
  metric: { type: "string" },
  "index-type": { type: "string" },
  "adopt-store": { type: "string" },
  "no-adopt-store": { type: "boolean" },
} as const;

function storeFlags(values: {
  "dry-run"?: boolean;
  store?: boolean;
  "store-only"?: boolean;
  dims?: string;
  metric?: string;
  "index-type"?: string;
  "adopt-store"?: string;
  "no-adopt-store"?: boolean;
}) {
  const on = values.store === true || values["store-only"] === true;
  if (values.store && values["store-only"]) throw new UsageError("--store and --store-only exclude each other", "migrate");
  const needsStore = (["dims", "metric", "index-type", "adopt-store", "no-adopt-store"] as const).find((k) => values[k] !== undefined);
  if (needsStore && !on) throw new UsageError(`--${needsStore} is a store option: add --store (or --store-only)`, "migrate");
  if ((values.metric !== undefined || values["index-type"] !== undefined) && values.dims === undefined) {
    throw new UsageError("--metric and --index-type go with --dims (the vector index's dimensions)", "migrate");
  }
  if (values["adopt-store"] !== undefined && values["no-adopt-store"]) throw new UsageError("--adopt-store and --no-adopt-store exclude each other", "migrate");
  let index: { dims: number; distanceMetric?: "cosine" | "l2" | "inner_product"; indexType?: "hnsw" | "ivfflat" } | undefined;
  if (values.dims !== undefined) {
    const dims = Number(values.dims);
    if (!Number.isInteger(dims) || dims < 1 || dims > 2000) throw new UsageError(`--dims expects an integer from 1 to 2000, got ${JSON.stringify(values.dims)}`, "migrate");
    const metric = values.metric ?? "cosine";
    if (metric !== "cosine" && metric !== "l2" && metric !== "inner_product") throw new UsageError(`--metric expects cosine, l2 or inner_product, got ${JSON.stringify(metric)}`, "migrate");
    const type = values["index-type"] ?? "hnsw";
    if (type !== "hnsw" && type !== "ivfflat") throw new UsageError(`--index-type expects hnsw or ivfflat, got ${JSON.stringify(type)}`, "migrate");
    index = { dims, distanceMetric: metric, indexType: type };
  }
  const adoptFrom = values["adopt-store"] === undefined ? undefined : schemaOption("migrate", values["adopt-store"]);
  return {
    on,
    only: values["store-only"] === true,
    flags: { dryRun: values["dry-run"] === true, index, adopt: adoptFrom !== undefined ? { from: adoptFrom } : values["no-adopt-store"] ? false : undefined },
  };
}

/** `--partitions N`: an integer from 2 to MAX_PARTITIONS (as `migrate({ partitions })` takes it), else a usage error. */
function partitionsFlag(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!(n >= 2 && n <= MAX_PARTITIONS)) throw new UsageError(`--partitions expects an integer from 2 to ${MAX_PARTITIONS}, got ${JSON.stringify(text)}`, "migrate");
  return n;
}

const COMMANDS: Record<string, CommandSpec> = {
  migrate: {
    usage:
      "migrate [--dry-run] [--wait <duration>] [--partitions N] [--adopt <schema> [--module <file>] | --no-adopt | --finish-adoption | --rollback-adoption] [--json] " +
      "[--store | --store-only [--dims N [--metric M] [--index-type T]] [--adopt-store <schema> | --no-adopt-store]]",
    summary:
      "Apply the pending migrations to the schema, in one transaction under an advisory lock\n" +
      "(safe to run from several deploy steps at once). Creates the schema if missing.\n" +
      "A schema migrated by a newer release is refused (exit 3), unless its newer\n" +
      "migrations say this release keeps working. A schema holding the official LangGraph\n" +
      "saver's tables is refused (exit 3): switching from it (--adopt) takes three steps, see\n" +
      "the README. Official tables in other schemas are said once on stderr and left alone.\n" +
      "A server that is not reachable yet (starting up, restarting) is waited for,\n" +
      "one line on stderr per failed attempt.",
    options: `  --dry-run             print the SQL (or the rollback's counts); change nothing
  --wait <duration>     how long to wait for a server that is not reachable yet (default 60s;
                        0 or 0s: one attempt); a wrong password or a bad URL fails at once
  --partitions N        a new schema's tables hash partitioned by thread_id (the store's:
                        by namespace), N partitions each (2 to ${MAX_PARTITIONS}); a schema
                        migrated before keeps its layout, another N is refused (README
                        "Scaling out")
  --adopt <schema>      switch from the official saver whose tables are in <schema>:
                        copy its threads into --schema and keep copying what its
                        instances still write (its tables stay as they are); then store
                        what it copied by content, as compact does
  --module <file>       with --adopt: a JS/TS module exporting serde, the serializer your
                        saver uses, if not the default (an EncryptedSerializer seals)
  --no-adopt            start empty beside the official saver's tables
  --finish-adoption     all official instances replaced: its tables stop being copied
                        and refuse writes from now on
  --rollback-adoption   back to the official saver: what this package wrote goes back
                        into its tables in its format; this schema refuses writes
  --json                print the result as JSON
  --store               also the store's tables (PostgresStore), after the checkpointer's
  --store-only          only the store's tables
  --dims N              the store's vector index: N dimensions (needs pgvector); with
  --metric M            cosine (default), l2 or inner_product, and
  --index-type T        hnsw (default) or ivfflat; a different existing index is changed
  --adopt-store <schema>  copy the items of the official PostgresStore in <schema>
  --no-adopt-store      start the store empty beside the official store's tables`,
    examples: `  DATABASE_URL=postgres://app@db/app ${BIN} migrate
  ${BIN} migrate --wait 2m     # a database container that is still starting
  ${BIN} migrate --store --dims 1536 --dry-run
  ${BIN} migrate --schema sharded --partitions 16
  ${BIN} migrate --schema agents --dry-run > plan.sql
  ${BIN} migrate --schema langgraph --adopt public --dry-run
  ${BIN} migrate --schema langgraph --finish-adoption`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("migrate", argv, {
        ...CONNECTION_OPTIONS,
        ...JSON_OPTION,
        "dry-run": { type: "boolean" },
        wait: { type: "string" },
        adopt: { type: "string" },
        "no-adopt": { type: "boolean" },
        "finish-adoption": { type: "boolean" },
        "rollback-adoption": { type: "boolean" },
        partitions: { type: "string" },
        module: { type: "string" },
        ...STORE_OPTIONS,
      });
      positionals("migrate", rest, [], 0);
      if (values.module !== undefined && values.adopt === undefined) {
        throw new UsageError("--module goes with --adopt: the serializer that stores what the adoption copies", "migrate");
      }
      if (values.module === "") throw new UsageError("--module: must not be empty", "migrate");
      const store = storeFlags(values);
      const chosen = (["adopt", "no-adopt", "finish-adoption", "rollback-adoption"] as const).filter((k) => values[k] !== undefined);
      if (chosen.length > 1) throw new UsageError(`--${chosen[0]} and --${chosen[1]} exclude each other`, "migrate");
      const from = values.adopt === undefined ? undefined : schemaOption("migrate", values.adopt);
      const wait = durationArg("migrate", "wait", values.wait ?? DEFAULT_MIGRATE_WAIT, { zero: true })!;
      const c = {
        ...common("migrate", values),
        dryRun: values["dry-run"] === true,
        wait,
        adopt: from !== undefined ? { from } : values["no-adopt"] ? false : undefined,
        step: values["finish-adoption"] ? ("finish" as const) : values["rollback-adoption"] ? ("rollback" as const) : undefined,
        partitions: partitionsFlag(values.partitions),
        ...(values.module !== undefined ? { module: values.module } : {}),
      };
      if (c.step && c.partitions !== undefined) {
        throw new UsageError(`--partitions is decided when a schema is first migrated; leave it out of --${c.step === "finish" ? "finish-adoption" : "rollback-adoption"}`, "migrate");
      }
      if (from !== undefined && from === c.schema) {
        throw new UsageError(`--adopt ${from}: the official tables cannot be adopted into their own schema; choose another --schema for this package`, "migrate");
      }
      if (store.only || (store.on && c.step)) {
        if (c.step) throw new UsageError(`--${values["finish-adoption"] ? "finish-adoption" : "rollback-adoption"} is about the checkpointer's tables; leave out --store`, "migrate");
        return (await commands()).storeMigrateCommand({ ...c, ...store.flags }, io);
      }
      const code = await (await commands()).migrateCommand(c, io);
      // The checkpointer's step announced a fallback to the embedded database already.
      return store.on && code === 0 ? (await commands()).storeMigrateCommand({ ...c, ...store.flags }, io, { announced: true }) : code;
    },
  },

  status: {
    usage: "status [--json]",
    summary:
      "Applied and pending migrations, a schema newer than this code, edited migrations,\n" +
      "and row counts per table. Exits 3 unless the schema is exactly up to date\n" +
      "(a readiness check for CI and deploys).",
    options: "  --json                print the status as JSON",
    examples: `  ${BIN} status
  ${BIN} status --schema agents --json`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("status", argv, { ...CONNECTION_OPTIONS, ...JSON_OPTION });
      positionals("status", rest, [], 0);
      return (await commands()).statusCommand(common("status", values), io);
    },
  },

  threads: {
    usage:
      "threads [--limit <n>] [--json]  |  threads delete <thread>... [--dry-run] [--json]  |  " +
      "threads copy <from> <to> [--up-to <checkpoint>] [--overwrite] [--module <file>] [--dry-run] [--json]",
    summary:
      "Recently updated threads: checkpoints, namespaces, writes, blobs, size, last update. SIZE is\n" +
      "what the thread's values take as stored (compressed where Postgres compressed them: checkpoint\n" +
      "and metadata JSON, channel values, pending writes), each element row once however many values\n" +
      "name it; keys, row headers and indexes are not counted, so the tables take more on disk.\n" +
      "`threads delete` deletes threads whole (every namespace: checkpoints, writes, blobs), each in\n" +
      "one transaction, as the saver's deleteThread does; with --dry-run it prints what would go.\n" +
      "A thread that does not exist is an error (exit 1) and nothing is deleted. A deleted thread\n" +
      "stays deleted: a run still going on it cannot write it back (README, \"Deleted threads stay deleted\").\n" +
      "`threads copy` copies a thread's history (every namespace, values, pending writes) to another\n" +
      "thread id in one transaction, as the saver's copyThread does: the copy reads exactly as the\n" +
      "source at every checkpoint. An existing target is refused (exit 1) unless --overwrite.",
    options: `  --limit <n>           at most n threads (default 20)
  --dry-run             (delete, copy) print what would be deleted or copied; change nothing
  --up-to <checkpoint>  (copy) only the history up to this checkpoint of the root namespace,
                        which becomes the copy's head
  --overwrite           (copy) replace a target thread that exists (it is deleted first)
  --module <file>       (copy) a module exporting \`serde\`, the saver's serializer, when it
                        encrypts values (EncryptedSerializer): they are sealed for the copy's rows
  --json                print as JSON`,
    examples: `  ${BIN} threads --limit 5
  ${BIN} threads delete 12345 --dry-run
  ${BIN} threads delete 12345 67890
  ${BIN} threads copy 12345 12345-branch --up-to 1f1ec622-c863-68a0-ffff-83f2a13c33b4`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("threads", argv, {
        ...CONNECTION_OPTIONS,
        ...JSON_OPTION,
        limit: { type: "string" },
        "dry-run": { type: "boolean" },
        "up-to": { type: "string" },
        overwrite: { type: "boolean" },
        module: { type: "string" },
      });
      const copyOnly = (["up-to", "overwrite", "module"] as const).find((k) => values[k] !== undefined);
      if (copyOnly !== undefined && rest[0] !== "copy") throw new UsageError(`--${copyOnly}: only with threads copy`, "threads");
      if (rest[0] === "copy") {
        if (values.limit !== undefined) throw new UsageError("--limit: not an option of threads copy", "threads");
        positionals("threads", rest.slice(1), ["from", "to"], 2);
        const [from, to] = rest.slice(1).map((t, i) => keyArg("threads", { what: i === 0 ? "<from>" : "<to>", value: t, limit: "thread_id" }));
        if (from === to) throw new UsageError("<to>: is the same thread as <from>; copy to another thread id", "threads");
        const c = {
          ...common("threads", values),
          from: from!,
          to: to!,
          upTo: values["up-to"] === undefined ? undefined : keyArg("threads", { what: "--up-to", value: values["up-to"], limit: "checkpoint_id" }),
          overwrite: values.overwrite === true,
          module: values.module,
          dryRun: values["dry-run"] === true,
        };
        return (await commands()).copyThreadCommand(c, io);
      }
      if (rest[0] === "delete") {
        if (rest.length < 2) throw new UsageError("missing argument <thread>", "threads");
        if (values.limit !== undefined) throw new UsageError("--limit: not an option of threads delete", "threads");
        const c = {
          ...common("threads", values),
          threadIds: [...new Set(rest.slice(1).map((t) => keyArg("threads", { what: "<thread>", value: t, limit: "thread_id" })))],
          dryRun: values["dry-run"] === true,
        };
        return (await commands()).deleteThreadsCommand(c, io);
      }
      if (rest.length > 0) {
        throw new UsageError(`unexpected argument ${JSON.stringify(rest[0])} (threads delete <thread>..., or threads copy <from> <to>)`, "threads");
      }
      if (values["dry-run"]) throw new UsageError("--dry-run: only with threads delete or threads copy", "threads");
      const c = { ...common("threads", values), limit: positiveInt("threads", "limit", values.limit, 20) };
      return (await commands()).threadsCommand(c, io);
    },
  },

  history: {
    usage: "history <thread> [--ns <namespace>] [--json]",
    summary:
      "A thread's checkpoints, oldest first, per namespace, following parent links.\n" +
      "The line leading to the head runs straight down; forks hang off their branch point.",
    options: `  --ns <namespace>      only this namespace ("" is the top-level graph)
  --json                print as JSON (each checkpoint with its parent and children)`,
    examples: `  ${BIN} history 12345
  ${BIN} history 12345 --ns "" --json`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("history", argv, { ...CONNECTION_OPTIONS, ...JSON_OPTION, ns: { type: "string" } });
      const [thread] = positionals("history", rest, ["thread"], 1);
      const c = {
        ...common("history", values),
        threadId: keyArg("history", { what: "<thread>", value: thread!, limit: "thread_id" }),
        ns: values.ns === undefined ? undefined : keyArg("history", { what: "--ns", value: values.ns, limit: "checkpoint_ns", allowEmpty: true }),
      };
      return (await commands()).historyCommand(c, io);
    },
  },

  show: {
    usage: "show <thread> [checkpoint] [--ns <namespace>] [--json]",
    summary:
      "One checkpoint (default: the head) as stored, decoded: the checkpoint, its metadata,\n" +
      "each channel's version, type and value, and the pending writes stored under it.",
    options: `  --ns <namespace>      namespace of the checkpoint (default "": the top-level graph)
  --json                print as JSON (values with type tags, nothing cut)`,
    examples: `  ${BIN} show 12345
  ${BIN} show 12345 1f1b054e-b2a6-6294-8000-96e3a3cb81ac --json`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("show", argv, { ...CONNECTION_OPTIONS, ...JSON_OPTION, ns: { type: "string" } });
      const [thread, id] = positionals("show", rest, ["thread", "checkpoint"], 1);
      const c = {
        ...common("show", values),
        threadId: keyArg("show", { what: "<thread>", value: thread!, limit: "thread_id" }),
        checkpointId: id === undefined ? undefined : keyArg("show", { what: "<checkpoint>", value: id, limit: "checkpoint_id" }),
        ns: keyArg("show", { what: "--ns", value: values.ns ?? "", limit: "checkpoint_ns", allowEmpty: true }),
      };
      return (await commands()).showCommand(c, io);
    },
  },

  export: {
    usage: "export (<thread>... | --all) [-o <file>] [--decoded]",
    summary:
      "Every stored row of the threads (all namespaces, every column) as JSON lines: a header,\n" +
      "then per thread its checkpoints, writes and blobs, then an end record with the counts.\n" +
      "Each value carries its exact stored bytes (base64) and type. A value stored by content\n" +
      "comes as its row naming element rows by hash, and each element row comes once, so an\n" +
      "export grows with what a thread holds, not with how many checkpoints repeat it. Each\n" +
      "thread is read in one consistent snapshot. A file whose name ends in .gz is gzipped.\n" +
      "Progress is shown on a terminal.",
    options: `  --all                 every thread in the schema
  -o, --output <file>   write to a file (it appears only once the export is complete; gzipped
                        when the name ends in .gz); default stdout
  --decoded             add a decoded, type-tagged JSON view of each value (\`decoded\`, for
                        reading; ignored by import; about 1.5x the size): element rows
                        decoded, values stored by content as the hashes they name`,
    examples: `  ${BIN} export 12345 > thread.jsonl
  ${BIN} export --all -o backup.jsonl.gz
  ${BIN} export 12345 --decoded | jq 'select(.kind == "blob" and .channel == "__elements__") | .decoded'
  ${BIN} export --all | ${BIN} import --database-url postgres://other/db`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("export", argv, {
        ...CONNECTION_OPTIONS,
        all: { type: "boolean" },
        output: { type: "string", short: "o" },
        decoded: { type: "boolean" },
      });
      if (values.all && rest.length > 0) throw new UsageError("give thread ids or --all, not both", "export");
      if (!values.all && rest.length === 0) throw new UsageError("missing argument <thread> (or --all)", "export");
      if (values.output === "") throw new UsageError("--output: must not be empty", "export");
      const c = {
        ...common("export", values),
        threads: rest.map((t) => keyArg("export", { what: "<thread>", value: t, limit: "thread_id" })),
        all: values.all === true,
        output: values.output,
        decoded: values.decoded === true,
      };
      return (await commands()).exportCommand(c, io);
    },
  },

  import: {
    usage: "import [<file> | -] [--skip-existing] [--keep-whole] [--module <file>] [--json]",
    summary:
      "Load an export (a file, gzipped or not, or stdin) into this database and schema, one\n" +
      "transaction per thread, byte for byte: the same rows (heads, row versions, timestamps,\n" +
      "raw values), so the threads' state and history read exactly as in the source. Then, as\n" +
      "element storage is the default, a thread whose export names no element row (written with\n" +
      "elementStorage: false) is stored by content, as `compact` does; it reads the same.\n" +
      "A thread that already exists in the target is refused (exit 1, nothing written for it)\n" +
      "unless --skip-existing; threads are never merged. A file is checked completely before\n" +
      "anything is written; stdin is checked thread by thread. The target schema must be\n" +
      "migrated first.",
    options: `  --skip-existing       leave threads that already exist untouched and go on
  --keep-whole          import byte for byte only: leave values stored whole as they are
  --module <file>       a JS/TS module exporting serde: the serializer your saver uses, if not
                        the default (to store an encrypting saver's whole values by content)
  --json                print the summary as JSON`,
    examples: `  ${BIN} import thread.jsonl --schema restored
  ${BIN} import backup.jsonl.gz
  ${BIN} export --all | ${BIN} import --database-url postgres://other/db`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("import", argv, {
        ...CONNECTION_OPTIONS,
        ...JSON_OPTION,
        "skip-existing": { type: "boolean" },
        "keep-whole": { type: "boolean" },
        module: { type: "string" },
      });
      const [file] = positionals("import", rest, ["file"], 0);
      if ((file === undefined || file === "-") && process.stdin.isTTY) throw new UsageError("missing argument <file> (or pipe an export into stdin)", "import");
      if (values.module === "") throw new UsageError("--module: must not be empty", "import");
      if (values.module !== undefined && values["keep-whole"]) throw new UsageError("--module: only to store values by content, not with --keep-whole", "import");
      const c = {
        ...common("import", values),
        file,
        skipExisting: values["skip-existing"] === true,
        keepWhole: values["keep-whole"] === true,
        module: values.module,
      };
      return (await commands()).importCommand(c, io);
    },
  },

  prune: {
    usage: "prune [--keep-last <n>] [--older-than <dur>] [--idle-for <dur>] [--ttl | --no-ttl] [--keep-tombstones <dur>] [--dry-run | --yes]",
    summary:
      "Retention. Deletes checkpoints outside the last N of each lineage and/or older than a\n" +
      "duration (the head always stays), whole threads idle for a duration or past the TTL\n" +
      "their saver recorded, the writes and blobs nothing needs any more, and deleted threads'\n" +
      "tombstones older than --keep-tombstones. Safe while\n" +
      "graphs run (short transactions per batch; busy threads are skipped and reported).\n" +
      "A DRY RUN unless --yes: it prints what would be deleted, per thread. Durations: 30d, 12h, 1h30m, 500ms.\n" +
      "Progress is shown on a terminal; Ctrl-C stops after the current batch.",
    options: `  --keep-last <n>       keep the newest n checkpoints of each lineage (n >= 1)
  --older-than <dur>    delete checkpoints older than this (with --keep-last: only beyond the last n)
  --idle-for <dur>      delete whole threads with no activity for this long
  --ttl                 enforce the saver's per-thread ttl (on by default with the rules above;
                        alone, it is the only rule)
  --no-ttl              do not enforce ttls
  --thread <id>         only this thread (repeatable)
  --grace <dur>         leave anything younger alone: a running graph's work (default 15m; 0 = off)
  --keep-tombstones <dur>  keep a deleted thread's tombstone this long: runs still going on it
                        cannot write it back meanwhile (default 7d; 0 = collect them all)
  --dry-run             print what would be deleted, per thread; delete nothing (the default)
  --yes                 delete for real
  --json                print the result as JSON (a dry run: with every thread's counts)`,
    examples: `  ${BIN} prune --keep-last 20 --older-than 30d            # what would go
  ${BIN} prune --keep-last 20 --older-than 30d --yes      # delete it
  ${BIN} prune --idle-for 90d --yes --json                # a nightly job`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("prune", argv, {
        ...CONNECTION_OPTIONS,
        ...JSON_OPTION,
        "keep-last": { type: "string" },
        "older-than": { type: "string" },
        "idle-for": { type: "string" },
        ttl: { type: "boolean" },
        "no-ttl": { type: "boolean" },
        thread: { type: "string", multiple: true },
        grace: { type: "string" },
        "keep-tombstones": { type: "string" },
        yes: { type: "boolean" },
        "dry-run": { type: "boolean" },
      });
      positionals("prune", rest, [], 0);
      if (values.ttl && values["no-ttl"]) throw new UsageError("--ttl and --no-ttl exclude each other", "prune");
      if (values.yes && values["dry-run"]) throw new UsageError("--dry-run and --yes exclude each other", "prune");
      const keepLast = values["keep-last"] === undefined ? undefined : positiveInt("prune", "keep-last", values["keep-last"], 1);
      const olderThan = durationArg("prune", "older-than", values["older-than"])?.text;
      const idleFor = durationArg("prune", "idle-for", values["idle-for"])?.text;
      const grace = durationArg("prune", "grace", values.grace, { zero: true })?.text;
      const keepTombstones = durationArg("prune", "keep-tombstones", values["keep-tombstones"], { zero: true })?.text;
      if (keepLast === undefined && olderThan === undefined && idleFor === undefined && !values.ttl) {
        throw new UsageError("no retention rule: give --keep-last, --older-than, --idle-for, or --ttl", "prune");
      }
      const c = {
        ...common("prune", values),
        keepLast,
        olderThan,
        idleFor,
        threadTtl: values["no-ttl"] ? false : values.ttl ? true : undefined,
        threadIds: values.thread?.map((t) => keyArg("prune", { what: "--thread", value: t, limit: "thread_id" })),
        grace,
        keepTombstones,
        yes: values.yes === true,
      };
      return (await commands()).pruneCommand(c, io);
    },
  },
  "upgrade-state": {
    usage: "upgrade-state --module <file> [--batch-size <n>] [--json]",
    summary:
      "Rewrites every checkpoint written with an older state version into the current one, in\n" +
      "batches (one transaction each): new blobs for upcast channels, the row compare-and-set on\n" +
      "its row_version, renamed pending writes. Nothing is deleted and history is unchanged;\n" +
      "afterwards the saver needs no upcasters. The module exports the same `stateVersion` and\n" +
      "`upcasters` your application's saver uses (and `serde`, if it has its own).",
    options: `  --module <file>       a JS/TS module exporting stateVersion and upcasters (required);
                        TypeScript needs Node 22.6+ or tsx installed in your project
  --batch-size <n>      checkpoints per transaction (default 100)
  --json                print the result as JSON`,
    examples: `  ${BIN} upgrade-state --module ./dist/state-upcasters.js
  ${BIN} upgrade-state --module ./src/state-upcasters.ts --batch-size 500`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("upgrade-state", argv, {
        ...CONNECTION_OPTIONS,
        ...JSON_OPTION,
        module: { type: "string" },
        "batch-size": { type: "string" },
      });
      positionals("upgrade-state", rest, [], 0);
      if (values.module === undefined || values.module === "") throw new UsageError("--module <file> is required", "upgrade-state");
      const batchSize = values["batch-size"] === undefined ? 100 : positiveInt("upgrade-state", "batch-size", values["batch-size"], 1);
      return (await commands()).upgradeStateCommand({ ...common("upgrade-state", values), module: values.module, batchSize }, io);
    },
  },
  reencrypt: {
    usage: "reencrypt --module <file> [--batch-size <n>] [--dry-run] [--json]",
    summary:
      "Rewrites every stored value that is not yet encrypted under the serializer's current key\n" +
      "and bound to its row: rows written before row binding, rows under an older key (after a\n" +
      "rotation, so the old key can go), and, with allowPlaintext, rows written before encryption\n" +
      "was turned on. The inner bytes are kept; only the encryption changes. Values stored by\n" +
      "content (lists by their elements, large values, objects holding lists) are re-keyed:\n" +
      "their elements hashed under the current key, their refs tagged with it. Batches of rows,\n" +
      "one transaction each, safe while graphs run. The module exports `serde`: the same\n" +
      "EncryptedSerializer your application's saver uses.",
    options: `  --module <file>       a JS/TS module exporting serde, an EncryptedSerializer (required)
  --batch-size <n>      rows per transaction (default 200)
  --dry-run             count what would be rewritten, change nothing
  --json                print the result as JSON`,
    examples: `  ${BIN} reencrypt --module ./dist/checkpoint-serde.js --dry-run
  ${BIN} reencrypt --module ./dist/checkpoint-serde.js`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("reencrypt", argv, {
        ...CONNECTION_OPTIONS,
        ...JSON_OPTION,
        module: { type: "string" },
        "batch-size": { type: "string" },
        "dry-run": { type: "boolean" },
      });
      positionals("reencrypt", rest, [], 0);
      if (values.module === undefined || values.module === "") throw new UsageError("--module <file> is required", "reencrypt");
      const batchSize = values["batch-size"] === undefined ? 200 : positiveInt("reencrypt", "batch-size", values["batch-size"], 1);
      return (await commands()).reencryptCommand({ ...common("reencrypt", values), module: values.module, batchSize, dryRun: values["dry-run"] === true }, io);
    },
  },
  compact: {
    usage: "compact [--thread <id>...] [--module <file>] [--batch-size <n>] [--dry-run] [--json]",
    summary:
      "Converts values stored whole (threads written with elementStorage: false, by an earlier\n" +
      "release, or adopted from the official saver) into the forms element storage gives them,\n" +
      "in channel values and pending writes alike: a list (a chat's messages) by its elements,\n" +
      "an object holding lists by its lists' elements, a large value by content; each element\n" +
      "stored once per thread and namespace, each row rewritten in place. Values element\n" +
      "storage keeps whole stay untouched. Reads return the same values. Batches of rows, one\n" +
      "transaction each, safe while graphs and prune run; a second run changes nothing. A\n" +
      "release before element storage cannot read converted threads: run it once no instance\n" +
      "of an earlier release uses the database.",
    options: `  --thread <id>         only this thread (repeatable; default every thread)
  --module <file>       a JS/TS module exporting serde: the serializer your saver uses, if not
                        the default (an EncryptedSerializer seals the elements, as the saver does)
  --batch-size <n>      rows read per batch, rewritten in one transaction (default 100)
  --dry-run             count what would be rewritten and added, change nothing
  --json                print the result as JSON`,
    examples: `  ${BIN} compact --dry-run
  ${BIN} compact
  ${BIN} compact --thread 12345 --json`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("compact", argv, {
        ...CONNECTION_OPTIONS,
        ...JSON_OPTION,
        thread: { type: "string", multiple: true },
        module: { type: "string" },
        "batch-size": { type: "string" },
        "dry-run": { type: "boolean" },
      });
      positionals("compact", rest, [], 0);
      if (values.module === "") throw new UsageError("--module: must not be empty", "compact");
      if (values["batch-size"] !== undefined && positiveInt("compact", "batch-size", values["batch-size"], 1) > 100_000) {
        throw new UsageError("--batch-size: at most 100000", "compact");
      }
      const c = {
        ...common("compact", values),
        threadIds: values.thread?.map((t) => keyArg("compact", { what: "--thread", value: t, limit: "thread_id" })),
        module: values.module,
        batchSize: positiveInt("compact", "batch-size", values["batch-size"], 100),
        dryRun: values["dry-run"] === true,
      };
      return (await commands()).compactCommand(c, io);
    },
  },
  grants: {
    usage: "grants --role <role> [--schema <name>] [--revoke-public-temp]",
    summary:
      "Prints the statements that let an application role run every saver operation and\n" +
      "nothing more (no DDL): USAGE on the schema, SELECT/INSERT/UPDATE/DELETE on the six\n" +
      "tables (checkpoints, checkpoint_writes, checkpoint_blobs, checkpoint_heads, checkpoint_tombstones,\n" +
      "checkpointer_retention), SELECT on checkpointer_migrations, EXECUTE on the write gate\n" +
      "(checkpointer_thread_gate); then it revokes what the role does not need\n" +
      "(CREATE on the schema, TRUNCATE/REFERENCES/TRIGGER, TEMPORARY on the database). Run\n" +
      "migrations as the schema owner, then run these as the owner. Needs no database connection.",
    options: `  --role <role>         the application's role (required)
  --revoke-public-temp  also revoke TEMPORARY on the database from PUBLIC (every role holds it
                        through PUBLIC; affects all roles without a grant of their own; run as
                        the database owner)`,
    examples: `  ${BIN} grants --role agents_app --schema agents | psql "$OWNER_DATABASE_URL"
  ${BIN} grants --role agents_app --schema agents --revoke-public-temp | psql "$DATABASE_OWNER_URL"`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("grants", argv, { ...CONNECTION_OPTIONS, role: { type: "string" }, "revoke-public-temp": { type: "boolean" } });
      positionals("grants", rest, [], 0);
      if (values.role === undefined || values.role === "") throw new UsageError("--role <role> is required", "grants");
      const { grantStatements } = await import("../ops/grants.js");
      let statements: string[];
      try {
        statements = grantStatements({ role: values.role, schema: schemaOption("grants", values.schema), revokePublicTemp: values["revoke-public-temp"] === true });
      } catch (err) {
        throw new UsageError(err instanceof Error ? err.message : String(err), "grants");
      }
      io.out(statements.map((sql) => `${sql};`).join("\n"));
      return 0;
    },
  },
};

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
  const url = resolveUrl({ databaseUrl: flagValue(rest, "--database-url"), dataDir: flagValue(rest, "--data-dir") });
  try {
    if (!command) throw new UsageError(`unknown command ${JSON.stringify(name)} (commands: ${Object.keys(COMMANDS).join(", ")})`);
    if (rest.includes("--help") || rest.includes("-h")) {
      io.out(helpOf(command));
      return EXIT.OK;
    }
    return await command.run(rest, io);
  } catch (err) {
    let message = errorText(err, url);
    if (err instanceof UsageError) {
      const usage = err.command && COMMANDS[err.command] ? `${BIN} ${COMMANDS[err.command]!.usage}` : `${BIN} <command> [options]`;
      message += `\nUsage: ${usage} (see \`${BIN}${err.command ? ` ${err.command}` : ""} --help\`)`;
    }
    io.err(`${BIN}${command ? ` ${name}` : ""}: ${message}`);
    return exitCodeOf(err);
  }
}

/** A flag's value before parsing (only to know which URL to mask in messages). */
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
