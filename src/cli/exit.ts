/**
 * Exit codes of the CLI and the demo, the errors only they throw, and the one
 * line printed for an error. Light on purpose: `--help` and usage errors load
 * nothing else.
 */
import { CheckpointerError } from "../errors.js";
import { UsageError } from "./args.js";
import { scrub } from "./mask.js";
import { inContext, suggest, type HintContext, type SuggestedCommand } from "../hint.js";

export const EXIT = {
  /** Success. */
  OK: 0,
  /** The operation failed: database error, thread not found, import conflict, bad export file. */
  FAILED: 1,
  /** Bad usage: unknown command or option, missing or malformed argument (with NODE_ENV=production: no database named). Nothing was done. */
  USAGE: 2,
  /** The schema is not migrated, or was migrated by a newer release, or the official saver's tables wait for a decision (--adopt). */
  SCHEMA: 3,
  /** The embedded data folder is held by another process. */
  LOCKED: 4,
} as const;

/** The export file is malformed (not JSON, not an export, truncated). Exit code 1; names the line. */
export class ExportFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ExportFileError";
  }
}

/** A thread or checkpoint named on the command line does not exist. Exit code 1. */
export class NotFoundError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NotFoundError";
  }
}

/** No embedded database in the folder yet (never migrated). Exit code 3, like an unmigrated schema. */
export class NoEmbeddedDatabaseError extends CheckpointerError {
  /** `where.dataDirGiven`: the folder was named (--data-dir), so the hint's migrate names it too (see errorText). */
  constructor(dataDir: string, where: { schema: string; dataDirGiven: boolean }) {
    const create: SuggestedCommand = { words: ["migrate"], schema: where.schema };
    super(
      "SCHEMA_NOT_MIGRATED",
      `No embedded database in ${dataDir}. Run ${suggest(create)} (or \`npm run demo\`) to create it` +
        (where.dataDirGiven ? ", or leave out --data-dir and set DATABASE_URL to use a Postgres server." : ", pass --data-dir, or set DATABASE_URL."),
      { suggested: [create] },
    );
  }
}

/** The exit code for an error. */
export function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError) return EXIT.USAGE;
  if (err instanceof CheckpointerError) {
    if (err.code === "DATABASE_URL_MISSING") return EXIT.USAGE;
    if (err.code === "SCHEMA_NOT_MIGRATED" || err.code === "SCHEMA_TOO_NEW" || err.code === "ADOPTION_REQUIRED") return EXIT.SCHEMA;
    if (err.code === "DATA_DIR_LOCKED") return EXIT.LOCKED;
  }
  return EXIT.FAILED;
}

/**
 * One line (no stack) for an error, with the database password masked out, and
 * the commands it suggests carrying `context`: the connection flags of the
 * command that failed (src/hint.ts), so that they act on the same database.
 */
export function errorText(err: unknown, url: string | undefined, context: HintContext = {}): string {
  let text: string;
  // The library's errors carry the server's words already (describeFailure, src/errors/database.ts).
  if (err instanceof CheckpointerError) {
    text = inContext(err.message, err.suggested, context);
  } else if (err instanceof UsageError || err instanceof ExportFileError || err instanceof NotFoundError) {
    text = err.message;
  } else {
    text = err instanceof Error ? err.message.split("\n")[0]! : String(err);
  }
  return scrub(text, url);
}
