/**
 * What every CLI command gets (the target, the schema, JSON or text, where to
 * write) and the connection it runs on, opened and closed around it.
 */
import { BIN } from "./args.js";
import { connect, type Connection, type Target } from "./connect.js";

export interface Io {
  out(text: string): void;
  err(text: string): void;
}

/** What every command gets: where, which schema, JSON or text. */
export interface Common {
  command: string;
  target: Target;
  schema: string;
  json: boolean;
}

export const json = (value: unknown) => JSON.stringify(value, null, 2);


/**
 * Open the target, run `fn`, close what was opened. A fallback to the embedded database is refused in
 * production and announced on stderr (`announced`: it was, by the step before; the rule still holds).
 * `vector`: load pgvector into the embedded database (the store's vector table).
 */
export async function withConnection<T>(
  c: Common,
  create: boolean,
  fn: (conn: Connection) => Promise<T>,
  options: { vector?: boolean; announced?: boolean } = {},
): Promise<T> {
  const notice = options.announced ? () => undefined : (line: string) => process.stderr.write(`${line}\n`);
  const conn = await connect(c.target, { create, applicationName: `${BIN}:${c.command}`, notice, vector: options.vector, schema: c.schema });
  try {
    return await fn(conn);
  } finally {
    await conn.close().catch(() => undefined);
  }
}
