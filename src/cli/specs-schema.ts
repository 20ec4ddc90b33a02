/**
 * The schema commands' help and arguments: migrate (with the store's flags
 * and the adoption steps), status, upgrade-state, reencrypt, grants.
 */
import { BIN, CONNECTION_OPTIONS, UsageError, durationArg, parse, positionals, positiveInt, schemaOption } from "./args.js";
import { MAX_PARTITIONS } from "../db/partitions.js";
import { JSON_OPTION, common, load, type CommandSpec } from "./spec.js";

/** How long `migrate` waits for a server by default: a CI database container takes seconds to start. */
const DEFAULT_MIGRATE_WAIT = "60s";

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

export const SCHEMA_COMMANDS: Record<string, CommandSpec> = {
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
      "docs/adoption.md. Official tables in other schemas are said once on stderr and left alone.\n" +
      "A server that is not reachable yet (starting up, restarting) is waited for,\n" +
      "one line on stderr per failed attempt.",
    options: `  --dry-run             print the SQL (or the rollback's counts); change nothing
  --wait <duration>     how long to wait for a server that is not reachable yet (default 60s;
                        0 or 0s: one attempt); a wrong password or a bad URL fails at once
  --partitions N        a new schema's tables hash partitioned by thread_id (the store's:
                        by namespace), N partitions each (2 to ${MAX_PARTITIONS}); a schema
                        migrated before keeps its layout, another N is refused
                        (docs/scaling-out.md)
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
        return (await load.store()).storeMigrateCommand({ ...c, ...store.flags }, io);
      }
      const code = await (await load.migrate()).migrateCommand(c, io);
      // The checkpointer's step announced a fallback to the embedded database already.
      return store.on && code === 0 ? (await load.store()).storeMigrateCommand({ ...c, ...store.flags }, io, { announced: true }) : code;
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
      return (await load.migrate()).statusCommand(common("status", values), io);
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
      return (await load.state()).upgradeStateCommand({ ...common("upgrade-state", values), module: values.module, batchSize }, io);
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
      return (await load.state()).reencryptCommand({ ...common("reencrypt", values), module: values.module, batchSize, dryRun: values["dry-run"] === true }, io);
    },
  },
  grants: {
    usage: "grants --role <role> [--schema <name>] [--revoke-public-temp] [--no-store | --store-only]",
    summary:
      "Prints the statements that let an application role run every saver operation and\n" +
      "nothing more (no DDL): USAGE on the schema, SELECT/INSERT/UPDATE/DELETE on the six\n" +
      "tables (checkpoints, checkpoint_writes, checkpoint_blobs, checkpoint_heads, checkpoint_tombstones,\n" +
      "checkpointer_retention), SELECT on checkpointer_migrations, EXECUTE on the write gates\n" +
      "(checkpointer_thread_gate, checkpointer_put_gate); and, where the store (PostgresStore) is\n" +
      "migrated in the schema, every store operation: the same on store_items (and\n" +
      "store_item_vectors, once a store with an index made it), SELECT on\n" +
      "checkpointer_store_migrations; a schema without it gets a NOTICE instead (run them again\n" +
      "once it is migrated). Then it revokes what the role does not need (CREATE on the schema,\n" +
      "TRUNCATE/REFERENCES/TRIGGER, TEMPORARY on the database). Run migrations as the schema\n" +
      "owner, then run these as the owner. Needs no database connection.",
    options: `  --role <role>         the application's role (required)
  --revoke-public-temp  also revoke TEMPORARY on the database from PUBLIC (every role holds it
                        through PUBLIC; affects all roles without a grant of their own; run as
                        the database owner)
  --no-store            nothing of the store (a role that does not use it)
  --store-only          the store's alone, for a schema holding only the store (migrate
                        --store-only); fails when it is not migrated`,
    examples: `  ${BIN} grants --role agents_app --schema agents | psql "$OWNER_DATABASE_URL"
  ${BIN} grants --role agents_app --schema agents --revoke-public-temp | psql "$DATABASE_OWNER_URL"
  ${BIN} grants --role memory_app --schema memory --store-only | psql -v ON_ERROR_STOP=1 "$OWNER_DATABASE_URL"`,
    async run(argv, io) {
      const { values, positionals: rest } = parse("grants", argv, {
        ...CONNECTION_OPTIONS,
        role: { type: "string" },
        "revoke-public-temp": { type: "boolean" },
        "no-store": { type: "boolean" },
        "store-only": { type: "boolean" },
      });
      positionals("grants", rest, [], 0);
      if (values.role === undefined || values.role === "") throw new UsageError("--role <role> is required", "grants");
      if (values["no-store"] && values["store-only"]) throw new UsageError("--no-store and --store-only exclude each other", "grants");
      const store = values["no-store"] ? false : values["store-only"] ? ("only" as const) : true;
      const { grantStatements } = await import("../ops/grants.js");
      let statements: string[];
      try {
        statements = grantStatements({ role: values.role, schema: schemaOption("grants", values.schema), revokePublicTemp: values["revoke-public-temp"] === true, store });
      } catch (err) {
        throw new UsageError(err instanceof Error ? err.message : String(err), "grants");
      }
      io.out(statements.map((sql) => `${sql};`).join("\n"));
      return 0;
    },
  },
};
