/**
 * The commands of this package's CLI that messages suggest ("run `npx
 * langgraph-checkpoint-pg migrate --schema agents`"), written by one function
 * (issue 39, seam 5): every hint names the schema it came from (one without
 * it would act on public), quotes what a shell needs quoted, and, printed by
 * the CLI, carries the connection flags the command that failed was given:
 * `--data-dir` as given, `--database-url` by name only (its value holds a
 * password, and is never printed).
 */

/** The command's name, as `npx` runs it. */
export const BIN = "langgraph-checkpoint-pg";

/**
 * A command a message suggests: its words after the program's name (a word
 * written `<like this>` is a placeholder, printed as it is), and the schema
 * it acts on (`--schema`, left out for public, the default).
 *
 * @example
 * ```ts
 * const cmd: SuggestedCommand = { words: ["threads", "delete", "chat-3"], schema: "agents2" };
 * ```
 */
export interface SuggestedCommand {
  readonly words: readonly string[];
  readonly schema?: string;
}

/** Where the CLI command that failed ran: the flags the commands it suggests must carry to act on the same database. */
export interface HintContext {
  /** `--data-dir`, carried as given. */
  dataDir?: string;
  /** `--database-url` was given: the hint asks for the same one, without printing it. */
  databaseUrl?: boolean;
}

/**
 * The context of a CLI command run with these connection flags: `--data-dir`
 * carried as given, `--database-url` by name only.
 *
 * @example
 * ```ts
 * contextOf({ databaseUrl: "postgres://app:secret@db/app" }); // { databaseUrl: true }: the URL itself is never kept
 * ```
 */
export function contextOf(flags: { databaseUrl?: string | undefined; dataDir?: string | undefined }): HintContext {
  return { ...(flags.dataDir !== undefined ? { dataDir: flags.dataDir } : {}), databaseUrl: flags.databaseUrl !== undefined };
}

/** A word as a POSIX shell reads it back: bare when it can be, else in single quotes. */
export function shellWord(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word) || /^<[^<>]+>$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The words after the program's name: the command's own, then `--schema`
 * (unless public) and the context's `--data-dir`, each quoted for a shell.
 *
 * @example
 * ```ts
 * commandWords({ words: ["history", "chat 3"], schema: "agents" }, { dataDir: "./db" }); // ["history", "'chat 3'", "--schema", "agents", "--data-dir", "./db"]
 * ```
 */
export function commandWords(command: SuggestedCommand, context: HintContext = {}): string[] {
  const words = [...command.words];
  if (command.schema !== undefined && command.schema !== "public") words.push("--schema", command.schema);
  if (context.dataDir !== undefined) words.push("--data-dir", context.dataDir);
  return words.map(shellWord);
}

/**
 * A suggested command as messages print it, in backquotes; with a context
 * holding a `--database-url`, followed by "(with the same --database-url)".
 *
 * @example
 * ```ts
 * suggest({ words: ["migrate"], schema: "agents" }); // "`npx langgraph-checkpoint-pg migrate --schema agents`"
 * ```
 */
export function suggest(command: SuggestedCommand, context: HintContext = {}): string {
  return `\`npx ${BIN} ${commandWords(command, context).join(" ")}\`${context.databaseUrl ? " (with the same --database-url)" : ""}`;
}

/**
 * `text`, whose suggested commands were written without a context, with
 * them written for `context`: what the CLI prints for a library error or
 * event that carries its `suggested` commands.
 *
 * @example
 * ```ts
 * inContext(err.message, err.suggested, { dataDir: "./db" });
 * ```
 */
export function inContext(text: string, suggested: readonly SuggestedCommand[], context: HintContext): string {
  const bare = new Map(suggested.map((command) => [suggest(command), suggest(command, context)]));
  return [...bare].reduce((out, [from, to]) => out.split(from).join(to), text);
}
