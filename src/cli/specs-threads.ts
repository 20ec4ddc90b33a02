/**
 * The thread commands' help and arguments: threads (list, delete, copy),
 * history, show, export, import, prune, compact.
 */
import { BIN, CONNECTION_OPTIONS, UsageError, durationArg, keyArg, parse, positionals, positiveInt } from "./args.js";
import { JSON_OPTION, common, load, type CommandSpec } from "./spec.js";
import { MAX_EXPORT_LINE_BYTES } from "../ops/transfer-lines.js";
import { MAX_LINE_BYTES_CEILING } from "../errors.js";

export const THREAD_COMMANDS: Record<string, CommandSpec> = {
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
      "stays deleted: a run still going on it cannot write it back (docs/threads.md, \"Deleted threads stay deleted\").\n" +
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
        return (await load.write()).copyThreadCommand(c, io);
      }
      if (rest[0] === "delete") {
        if (rest.length < 2) throw new UsageError("missing argument <thread>", "threads");
        if (values.limit !== undefined) throw new UsageError("--limit: not an option of threads delete", "threads");
        const c = {
          ...common("threads", values),
          threadIds: [...new Set(rest.slice(1).map((t) => keyArg("threads", { what: "<thread>", value: t, limit: "thread_id" })))],
          dryRun: values["dry-run"] === true,
        };
        return (await load.write()).deleteThreadsCommand(c, io);
      }
      if (rest.length > 0) {
        throw new UsageError(`unexpected argument ${JSON.stringify(rest[0])} (threads delete <thread>..., or threads copy <from> <to>)`, "threads");
      }
      if (values["dry-run"]) throw new UsageError("--dry-run: only with threads delete or threads copy", "threads");
      const c = { ...common("threads", values), limit: positiveInt("threads", "limit", values.limit, 20) };
      return (await load.read()).threadsCommand(c, io);
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
      return (await load.read()).historyCommand(c, io);
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
      return (await load.show()).showCommand(c, io);
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
      return (await load.show()).exportCommand(c, io);
    },
  },
  import: {
    usage: "import [<file> | -] [--skip-existing] [--keep-whole] [--module <file>] [--max-line-bytes <n>] [--json]",
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
  --max-line-bytes <n>  the longest line (record) read, in bytes (default ${MAX_EXPORT_LINE_BYTES}: a value
                        of the default maxValueBytes, base64, with its --decoded view); a longer
                        line stops the import there (exit 1); at most ${MAX_LINE_BYTES_CEILING}
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
        "max-line-bytes": { type: "string" },
      });
      const [file] = positionals("import", rest, ["file"], 0);
      const maxLineBytes = positiveInt("import", "max-line-bytes", values["max-line-bytes"], MAX_EXPORT_LINE_BYTES);
      if (maxLineBytes > MAX_LINE_BYTES_CEILING) throw new UsageError(`--max-line-bytes: at most ${MAX_LINE_BYTES_CEILING} (the longest string JavaScript holds)`, "import");
      if ((file === undefined || file === "-") && process.stdin.isTTY) throw new UsageError("missing argument <file> (or pipe an export into stdin)", "import");
      if (values.module === "") throw new UsageError("--module: must not be empty", "import");
      if (values.module !== undefined && values["keep-whole"]) throw new UsageError("--module: only to store values by content, not with --keep-whole", "import");
      const c = {
        ...common("import", values),
        file,
        skipExisting: values["skip-existing"] === true,
        keepWhole: values["keep-whole"] === true,
        module: values.module,
        maxLineBytes,
      };
      return (await load.write()).importCommand(c, io);
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
      return (await load.prune()).pruneCommand(c, io);
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
      return (await load.write()).compactCommand(c, io);
    },
  },
};
