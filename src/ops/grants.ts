/**
 * Least privilege: migrations run as the schema owner; the application runs as
 * a role that can only read and write rows of the saver's tables, and of the
 * store's (PostgresStore) where it is migrated. These are the GRANT statements
 * that give such a role exactly what the saver and the store need.
 */
import { InvalidOptionsError } from "../errors.js";
import { MIGRATIONS_TABLE } from "../db/migrate.js";
import { checkSchemaName, quoteIdent } from "../validate.js";
import { CHECKPOINT_BLOBS, CHECKPOINT_HEADS, CHECKPOINT_TOMBSTONES, CHECKPOINT_WRITES, CHECKPOINTER_RETENTION, CHECKPOINTS } from "../db/names.js";
import { GATE_SIGNATURES } from "../saver/sql/gate.js";
import { ITEMS, STORE_MIGRATIONS_TABLE } from "../store/migrations.js";
import { VECTOR_TABLE } from "../store/vector.js";

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
  /** The schema of the saver (and of the store). Default `public`. */
  schema?: string;
  /**
   * Also revoke `TEMPORARY` on the current database from `PUBLIC`. Every role
   * holds it through `PUBLIC` by default, so revoking it from the role alone
   * changes nothing until this is done; it affects every role that has no
   * grant of its own (grant it back to those that need temporary tables).
   * Needs the database owner or a superuser. Default false.
   */
  revokePublicTemp?: boolean;
  /**
   * The store's tables (PostgresStore). `true` (default): also the store's,
   * where it is migrated in the schema: the statements find out when they run
   * (they are written without a connection), and without it they grant
   * nothing of it and say so in a NOTICE; run them again once it is migrated.
   * `"only"`: a schema holding the store alone (`migrate --store-only`): the
   * store's grants and none of the checkpointer's; they fail if the store is
   * not migrated. `false`: the checkpointer's alone (a role that does not use
   * the store gets nothing of it).
   */
  store?: boolean | "only";
}

/**
 * The statements that let `role` run every saver operation (`put`,
 * `putWrites`, `getTuple`, `list`, `deleteThread`, `getDeltaChannelHistory`,
 * pruning, retention) and nothing more: `USAGE` on the schema, `SELECT,
 * INSERT, UPDATE, DELETE` on its tables, `EXECUTE` on the write gate (the
 * tombstone check of every write), and `SELECT` on `checkpointer_migrations`
 * (the saver checks the schema version once). Where the store is migrated in
 * the schema, every store operation too (opening it, `setup()` included when
 * nothing is pending; `put`, `get`, `search`, `listNamespaces`, `delete`,
 * batches, the TTL sweep, `getStats`): the same on `store_items` and, once a
 * store with `index` created it, `store_item_vectors`, and `SELECT` on
 * `checkpointer_store_migrations` (see `store`). It then revokes what the role does
 * not need and may hold from an earlier grant: `CREATE` on the schema,
 * `TRUNCATE`, `REFERENCES` and `TRIGGER` on the tables, and `TEMPORARY` on
 * the database (also from `PUBLIC` with `revokePublicTemp`). The role cannot
 * change the schema, so it cannot migrate either - run migrations as the
 * owner, then run these as the owner. What stays (docs/reliability.md, "Least privilege"):
 * `LOCK TABLE` in any mode on the tables, which Postgres allows to any role
 * that may UPDATE or DELETE them. Idempotent. Run them again after a release
 * whose migrations add a table, and after the store is first migrated or
 * gets its vector table.
 *
 * @example
 * ```ts
 * import { grantStatements, migrate } from "langgraph-checkpoint-pg";
 * await migrate({ pool: ownerPool, schema: "agents" });
 * for (const sql of grantStatements({ schema: "agents", role: "agents_app" })) await ownerPool.query(sql);
 * // The application connects as agents_app: new PostgresSaver(appPool, { schema: "agents" })
 * // A schema holding the store alone (migrateStore only):
 * for (const sql of grantStatements({ schema: "memory", role: "memory_app", store: "only" })) await ownerPool.query(sql);
 * ```
 */
export function grantStatements(options: GrantOptions): string[] {
  if (options === null || typeof options !== "object") throw new InvalidOptionsError("options", "expected { role, schema? }");
  if (options.revokePublicTemp !== undefined && typeof options.revokePublicTemp !== "boolean") {
    throw new InvalidOptionsError("revokePublicTemp", "expected true or false");
  }
  const store = options.store ?? true;
  if (typeof store !== "boolean" && store !== "only") throw new InvalidOptionsError("store", 'expected true, false or "only"');
  const schemaName = checkSchemaName(options.schema ?? "public");
  // The schema is written into a DO block (the store's): it must not end it.
  if (schemaName.includes(TAG)) throw new InvalidOptionsError("schema", `must not contain ${TAG}`);
  const schema = quoteIdent(schemaName);
  const name = checkRoleName(options.role);
  const role = quoteIdent(name);
  const tables = DATA_TABLES.map((t) => `${schema}.${t}`).join(", ");
  // The database has no name in these statements (they run wherever they are piped): format() finds it.
  const revokeTemp = (from: string | undefined) =>
    `DO ${TAG} BEGIN EXECUTE pg_catalog.format('REVOKE TEMPORARY ON DATABASE %I FROM ${from === undefined ? "PUBLIC" : "%I"}', ` +
    `pg_catalog.current_database()${from === undefined ? "" : `, ${literal(from)}`}); END ${TAG}`;
  const checkpointer = store !== "only";
  return [
    `GRANT USAGE ON SCHEMA ${schema} TO ${role}`,
    ...(checkpointer
      ? [
          `GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE ${tables} TO ${role}`,
          `GRANT SELECT ON TABLE ${schema}.${MIGRATIONS_TABLE} TO ${role}`,
          `GRANT EXECUTE ON FUNCTION ${GATE_SIGNATURES.map((f) => `${schema}.${f}`).join(", ")} TO ${role}`,
        ]
      : []),
    ...(store ? [storeGrants(schemaName, role, store === "only")] : []),
    `REVOKE CREATE ON SCHEMA ${schema} FROM ${role}`,
    ...(checkpointer ? [`REVOKE TRUNCATE, REFERENCES, TRIGGER ON TABLE ${tables} FROM ${role}`] : []),
    revokeTemp(name),
    ...(options.revokePublicTemp ? [revokeTemp(undefined)] : []),
  ];
}

/** A SQL string literal (standard_conforming_strings: only quotes are doubled). */
const literal = (text: string): string => `'${text.replace(/'/g, "''")}'`;

/**
 * The store's grants, as one block: what the store reads and writes of its
 * tables (the items; their vectors, a table a store with `index` creates at
 * setup), and `SELECT` on its migrations table, which it reads at open. The
 * statements are written without a connection, so the block finds out when it
 * runs whether the store is migrated in the schema: without it, it says so (a
 * NOTICE; psql prints it) or, when the store is all that was asked for, fails.
 */
function storeGrants(schemaName: string, role: string, required: boolean): string {
  const schema = quoteIdent(schemaName);
  const missing = required
    ? `RAISE EXCEPTION '%', ${literal(`schema ${schema} holds no store (PostgresStore): run migrate --store-only first`)}`
    : `RAISE NOTICE '%', ${literal(`schema ${schema} holds no store (PostgresStore): nothing of it was granted; run these again once it is migrated (migrate --store)`)}`;
  const items = `${schema}.${ITEMS.table}`;
  const vectors = `${schema}.${VECTOR_TABLE}`;
  return `DO ${TAG} BEGIN
  IF pg_catalog.to_regclass(${literal(`${schema}.${STORE_MIGRATIONS_TABLE}`)}) IS NULL THEN
    ${missing};
  ELSE
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE ${items} TO ${role};
    GRANT SELECT ON TABLE ${schema}.${STORE_MIGRATIONS_TABLE} TO ${role};
    REVOKE TRUNCATE, REFERENCES, TRIGGER ON TABLE ${items} FROM ${role};
    IF pg_catalog.to_regclass(${literal(vectors)}) IS NOT NULL THEN
      GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE ${vectors} TO ${role};
      REVOKE TRUNCATE, REFERENCES, TRIGGER ON TABLE ${vectors} FROM ${role};
    END IF;
  END IF;
END ${TAG}`;
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
