/**
 * Least privilege: migrations run as the schema owner; the application runs as
 * a role that can only read and write rows of the saver's tables. These are
 * the GRANT statements that give such a role exactly what the saver needs.
 */
import { InvalidOptionsError } from "../errors.js";
import { MIGRATIONS_TABLE } from "../db/migrate.js";
import { checkSchemaName, quoteIdent } from "../validate.js";
import { CHECKPOINT_BLOBS, CHECKPOINT_HEADS, CHECKPOINT_TOMBSTONES, CHECKPOINT_WRITES, CHECKPOINTER_RETENTION, CHECKPOINTS } from "../db/names.js";
import { GATE_SIGNATURES } from "../saver/tombstones.js";

/** The tables whose rows the saver reads and writes (tombstones: deleteThread and prune; retention: its background runs). */
const DATA_TABLES = [
  CHECKPOINTS.table,
  CHECKPOINT_WRITES.table,
  CHECKPOINT_BLOBS.table,
  CHECKPOINT_HEADS.table,
  CHECKPOINT_TOMBSTONES.table,
  CHECKPOINTER_RETENTION.table,
] as const;

export interface GrantOptions {
  /** The application's role (it must exist). Any identifier: it is quoted. */
  role: string;
  /** The saver's schema. Default `public`. */
  schema?: string;
  /**
   * Also revoke `TEMPORARY` on the current database from `PUBLIC`. Every role
   * holds it through `PUBLIC` by default, so revoking it from the role alone
   * changes nothing until this is done; it affects every role that has no
   * grant of its own (grant it back to those that need temporary tables).
   * Needs the database owner or a superuser. Default false.
   */
  revokePublicTemp?: boolean;
}

/**
 * The statements that let `role` run every saver operation (`put`,
 * `putWrites`, `getTuple`, `list`, `deleteThread`, `getDeltaChannelHistory`,
 * pruning, retention) and nothing more: `USAGE` on the schema, `SELECT,
 * INSERT, UPDATE, DELETE` on its tables, `EXECUTE` on the write gate (the
 * tombstone check of every write), and `SELECT` on `checkpointer_migrations`
 * (the saver checks the schema version once). It then revokes what the role does
 * not need and may hold from an earlier grant: `CREATE` on the schema,
 * `TRUNCATE`, `REFERENCES` and `TRIGGER` on the tables, and `TEMPORARY` on
 * the database (also from `PUBLIC` with `revokePublicTemp`). The role cannot
 * change the schema, so it cannot migrate either - run migrations as the
 * owner, then run these as the owner. What stays (README, "Least privilege"):
 * `LOCK TABLE` in any mode on the tables, which Postgres allows to any role
 * that may UPDATE or DELETE them. Idempotent. Run them again after a release
 * whose migrations add a table.
 *
 * @example
 * ```ts
 * import { grantStatements, migrate } from "langgraph-checkpoint-pg";
 * await migrate({ pool: ownerPool, schema: "agents" });
 * for (const sql of grantStatements({ schema: "agents", role: "agents_app" })) await ownerPool.query(sql);
 * // The application connects as agents_app: new PostgresSaver(appPool, { schema: "agents" })
 * ```
 */
export function grantStatements(options: GrantOptions): string[] {
  if (options === null || typeof options !== "object") throw new InvalidOptionsError("options", "expected { role, schema? }");
  if (options.revokePublicTemp !== undefined && typeof options.revokePublicTemp !== "boolean") {
    throw new InvalidOptionsError("revokePublicTemp", "expected true or false");
  }
  const schema = quoteIdent(checkSchemaName(options.schema ?? "public"));
  const name = checkRoleName(options.role);
  const role = quoteIdent(name);
  const tables = DATA_TABLES.map((t) => `${schema}.${t}`).join(", ");
  // The database has no name in these statements (they run wherever they are piped): format() finds it.
  const revokeTemp = (from: string | undefined) =>
    `DO ${TAG} BEGIN EXECUTE pg_catalog.format('REVOKE TEMPORARY ON DATABASE %I FROM ${from === undefined ? "PUBLIC" : "%I"}', ` +
    `pg_catalog.current_database()${from === undefined ? "" : `, '${from.replace(/'/g, "''")}'`}); END ${TAG}`;
  return [
    `GRANT USAGE ON SCHEMA ${schema} TO ${role}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE ${tables} TO ${role}`,
    `GRANT SELECT ON TABLE ${schema}.${MIGRATIONS_TABLE} TO ${role}`,
    `GRANT EXECUTE ON FUNCTION ${GATE_SIGNATURES.map((f) => `${schema}.${f}`).join(", ")} TO ${role}`,
    `REVOKE CREATE ON SCHEMA ${schema} FROM ${role}`,
    `REVOKE TRUNCATE, REFERENCES, TRIGGER ON TABLE ${tables} FROM ${role}`,
    revokeTemp(name),
    ...(options.revokePublicTemp ? [revokeTemp(undefined)] : []),
  ];
}

/** Dollar-quote tag of the DO blocks; a role name may not contain it. */
const TAG = "$lgcp_grants$";

function checkRoleName(role: unknown): string {
  if (typeof role !== "string" || role === "") throw new InvalidOptionsError("role", "expected a non-empty role name");
  if (role.includes("\u0000")) throw new InvalidOptionsError("role", "must not contain NUL characters");
  const bytes = Buffer.byteLength(role, "utf8");
  if (bytes > 63) throw new InvalidOptionsError("role", `is ${bytes} bytes; Postgres identifiers hold at most 63`);
  // Quoted, "public" would name a (non-existent) role called public, not PUBLIC: refuse the confusion.
  if (role.toLowerCase() === "public") throw new InvalidOptionsError("role", "grant to a dedicated role, not PUBLIC");
  if (role.includes(TAG)) throw new InvalidOptionsError("role", `must not contain ${TAG}`);
  return role;
}
