/**
 * Argument parsing on `node:util.parseArgs`, with one-line usage errors that
 * name the offending flag (exit code 2, before anything is opened).
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { CheckpointerError, InvalidInputError, InvalidOptionsError } from "../errors.js";
import { readDuration, type DurationRule } from "../duration.js";
import { LIMITS, checkKey, checkSchemaName } from "../validate.js";

export const BIN = "langgraph-checkpoint-pg";

/** Bad usage: unknown command or flag, missing or malformed argument. Exit code 2. */
export class UsageError extends Error {
  readonly command: string | undefined;
  constructor(message: string, command?: string) {
    super(message);
    this.name = "UsageError";
    this.command = command;
  }
}

type Options = NonNullable<ParseArgsConfig["options"]>;

/** Flags every command that touches a database accepts. */
export const CONNECTION_OPTIONS = {
  "database-url": { type: "string" },
  "data-dir": { type: "string" },
  schema: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies Options;

export interface Parsed<V> {
  values: V;
  positionals: string[];
}

/** parseArgs, strict, with its errors turned into one-line {@link UsageError}s. */
export function parse<O extends Options>(command: string, argv: string[], options: O): Parsed<ReturnType<typeof parseArgs<{ options: O; allowPositionals: true; strict: true }>>["values"]> {
  try {
    const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
    return { values, positionals };
  } catch (err) {
    throw new UsageError(parseArgsMessage(err, options), command);
  }
}

function parseArgsMessage(err: unknown, options: Options): string {
  const e = err as { code?: string; message?: string };
  const flag = /'(-[^' ]+)/.exec(e.message ?? "")?.[1];
  switch (e.code) {
    case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
      return `unknown option ${flag ?? ""}`.trim();
    case "ERR_PARSE_ARGS_INVALID_OPTION_VALUE": {
      const name = /--([a-z-]+)/.exec(e.message ?? "")?.[1];
      const spec = name ? options[name] : undefined;
      return spec?.type === "boolean" ? `option --${name} takes no value` : `option ${name ? `--${name}` : (flag ?? "")} needs a value`;
    }
    default:
      return (e.message ?? String(err)).split("\n")[0]!;
  }
}

/** Exactly `min`..`max` positionals, named for the message. */
export function positionals(command: string, given: string[], names: string[], min: number): string[] {
  if (given.length < min) throw new UsageError(`missing argument <${names[given.length]}>`, command);
  if (given.length > names.length) throw new UsageError(`unexpected argument ${JSON.stringify(given[names.length])}`, command);
  return given;
}

export function schemaOption(command: string, value: string | undefined): string {
  try {
    return checkSchemaName(value ?? "public");
  } catch (err) {
    throw new UsageError(`--schema: ${err instanceof InvalidOptionsError ? err.message.replace(/^Invalid option schema: /, "") : String(err)}`, command);
  }
}

export function positiveInt(command: string, flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^[1-9][0-9]*$/.test(value) || !Number.isSafeInteger(Number(value))) throw new UsageError(`--${flag}: expected a positive integer, got ${JSON.stringify(value)}`, command);
  return Number(value);
}

/** A thread id, checkpoint id or namespace from the command line, checked like the saver checks it. */
export function keyArg(command: string, { what, value, limit, allowEmpty = false }: { what: string; value: string; limit: keyof typeof LIMITS; allowEmpty?: boolean }): string {
  try {
    return checkKey(what, value, LIMITS[limit], { allowEmpty });
  } catch (err) {
    throw new UsageError(err instanceof InvalidInputError ? err.message.replace(/^Invalid /, "") : err instanceof CheckpointerError ? err.message : String(err), command);
  }
}

export function connectionTarget(command: string, values: { "database-url"?: string; "data-dir"?: string }): { databaseUrl?: string; dataDir?: string } {
  const databaseUrl = values["database-url"];
  const dataDir = values["data-dir"];
  if (databaseUrl !== undefined && dataDir !== undefined) {
    throw new UsageError("--database-url and --data-dir exclude each other (a server, or the embedded folder)", command);
  }
  if (databaseUrl === "") throw new UsageError("--database-url: must not be empty", command);
  if (dataDir === "") throw new UsageError("--data-dir: must not be empty", command);
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//i.test(databaseUrl)) {
    throw new UsageError("--database-url: expected a postgres:// or postgresql:// URL", command);
  }
  const out: { databaseUrl?: string; dataDir?: string } = {};
  if (databaseUrl !== undefined) out.databaseUrl = databaseUrl;
  if (dataDir !== undefined) out.dataDir = dataDir;
  return out;
}

/**
 * A duration flag (`30d`, `12h`, `1h30m`, `500ms`; `0`, `0s` where `rule.zero`), checked now by the
 * library's own parser, so a flag means what the option means: its text as given (passed on, and
 * shown in messages) and its milliseconds.
 */
export function durationArg(command: string, flag: string, value: string | undefined, rule: DurationRule = {}): { text: string; ms: number } | undefined {
  if (value === undefined) return undefined;
  const read = readDuration(value, rule);
  if ("problem" in read) throw new UsageError(`--${flag}: ${read.problem}`, command);
  return { text: value, ms: read.ms };
}
