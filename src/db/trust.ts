/**
 * Before a migration runs any SQL in a schema: make sure nothing another role
 * owns, or can create, runs with the migrating role's rights.
 *
 * Migrations are often run by a powerful role (the schema owner, a CI role, a
 * superuser). Any code in the schema they touch runs with that role's rights:
 * a trigger on a table the migration writes, a row-security policy on a table
 * it reads, a function that a name in the migration SQL resolves to. So
 * `migrate` (and `setup()`) refuse, with {@link UnsafeSchemaError}:
 *
 * - always (also when there is nothing to apply): a schema in which a role
 *   other than its owner may CREATE, unless that role is trusted (below); a
 *   `checkpointer_migrations` that is not a plain table, or that has row
 *   security and an untrusted owner (reading it would run the policies);
 * - when migrations would be applied (or adopted): a schema owned by an
 *   untrusted role; tables of ours or of the official saver owned by one;
 *   triggers on those tables whose function one owns; any function,
 *   procedure, aggregate or operator in the schema that one owns.
 *
 * Trusted roles: the migrating role itself, superusers, and, for a migrating
 * role that is not a superuser, the roles whose privileges it already has
 * (membership with INHERIT, including `pg_database_owner` for the database
 * owner). A superuser trusts only itself and other superusers: it would
 * otherwise "inherit" every role.
 *
 * The migration SQL itself runs with `pg_catalog` searched first (see
 * migrate.ts), so a same-named function or operator in the schema never
 * shadows a built-in; an overload that would be a closer match can only come
 * from a trusted role, since nothing else may own code there.
 */
import type { Queryable } from "./db.js";
import { UnsafeSchemaError } from "../errors.js";

/** Our tables that a migration reads before it knows whether it will change anything: plain tables only. */
const READ_FIRST = ["checkpointer_migrations", "checkpointer_adoption", "checkpointer_store_migrations"];
/** Relations a migration reads or writes: ours (the store's too), and the official saver's (same names) when they are in the schema. */
const TOUCHED = [
  ...READ_FIRST,
  "checkpoints",
  "checkpoint_writes",
  "checkpoint_blobs",
  "checkpoint_heads",
  "checkpoint_tombstones",
  "checkpointer_retention",
  "checkpoint_migrations",
  "store_items",
  "store_item_vectors",
];
/** The official saver's tables, in the schema an adoption copies from. */
const OFFICIAL = ["checkpoints", "checkpoint_writes", "checkpoint_blobs", "checkpoint_migrations"];

/** What {@link inspectTrust} found: refusals that always apply, and those that apply when migrations would run. */
export interface TrustReport {
  me: string;
  always: { text: string; role: string }[];
  whenApplying: { text: string; role: string }[];
}

/** The roles whose code may run with the current role's rights (see the top of this file). */
const TRUSTED = `
me AS MATERIALIZED (
  SELECT r.oid, r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER
), trusted AS MATERIALIZED (
  SELECT r.oid FROM pg_catalog.pg_roles r, me
   WHERE r.oid = me.oid OR r.rolsuper
      OR (NOT me.rolsuper AND pg_catalog.pg_has_role(me.oid, r.oid, 'USAGE'))
      OR (r.rolname = 'pg_database_owner'
          AND EXISTS (SELECT 1 FROM pg_catalog.pg_database d JOIN pg_catalog.pg_roles o ON o.oid = d.datdba
                       WHERE d.datname = pg_catalog.current_database() AND (o.oid = me.oid OR o.rolsuper)))
)`;

/** `found (always, what, owner)` as a JSON list of `{ always, what, role }`, with the current role. */
const REPORT = `
SELECT CURRENT_USER::text AS me,
       coalesce((SELECT pg_catalog.json_agg(x ORDER BY x.role, x.what) FROM (
                   SELECT f.always, f.what, CASE WHEN f.owner = 0 THEN 'PUBLIC' ELSE coalesce(r.rolname::text, f.owner::text) END AS role
                     FROM found f LEFT JOIN pg_catalog.pg_roles r ON r.oid = f.owner) x), '[]') AS found`;

const QUERY = `
WITH ${TRUSTED}, ns AS MATERIALIZED (
  SELECT n.oid, n.nspowner, n.nspacl FROM pg_catalog.pg_namespace n WHERE n.nspname = $1
), rel AS MATERIALIZED (
  SELECT c.oid, c.relname, c.relkind, c.relowner, c.relrowsecurity FROM ns JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid
   WHERE c.relname = ANY ($2::text[])
      -- The partitions of a partitioned one (partitions.ts): their owners and triggers run with ours too.
      OR c.oid IN (SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class p ON p.oid = i.inhparent
                    WHERE p.relnamespace = ns.oid AND p.relname = ANY ($2::text[]))
), found (always, what, owner) AS (
  SELECT true, 'may CREATE in it', a.grantee
    FROM ns, pg_catalog.aclexplode(coalesce(ns.nspacl, pg_catalog.acldefault('n', ns.nspowner))) a
   WHERE a.privilege_type = 'CREATE' AND a.grantee <> ns.nspowner AND a.grantee NOT IN (SELECT oid FROM trusted)
  UNION ALL
  SELECT true, pg_catalog.format('owns %I, which is not a plain table (relkind %s)', r.relname, r.relkind), r.relowner
    FROM rel r WHERE r.relname = ANY ($3::text[]) AND r.relkind <> 'r'
  UNION ALL
  SELECT true, pg_catalog.format('owns %I, which has row security', r.relname), r.relowner
    FROM rel r WHERE r.relname = ANY ($3::text[]) AND r.relrowsecurity AND r.relowner NOT IN (SELECT oid FROM trusted)
  UNION ALL
  SELECT false, 'owns the schema', ns.nspowner FROM ns WHERE ns.nspowner NOT IN (SELECT oid FROM trusted)
  UNION ALL
  SELECT false, pg_catalog.format('owns table %I', r.relname), r.relowner FROM rel r WHERE r.relowner NOT IN (SELECT oid FROM trusted)
  UNION ALL
  SELECT false, pg_catalog.format('owns %I.%I(%s), the function of trigger %I on %I', pn.nspname, p.proname,
                                  pg_catalog.pg_get_function_identity_arguments(p.oid), t.tgname, r.relname), p.proowner
    FROM rel r JOIN pg_catalog.pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
    JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
   WHERE p.proowner NOT IN (SELECT oid FROM trusted)
  UNION ALL
  SELECT false, pg_catalog.format('owns function %I.%I(%s)', $1::text, p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)), p.proowner
    FROM ns JOIN pg_catalog.pg_proc p ON p.pronamespace = ns.oid WHERE p.proowner NOT IN (SELECT oid FROM trusted)
  UNION ALL
  SELECT false, pg_catalog.format('owns operator %I.%s(%s, %s)', $1::text, o.oprname, coalesce(pg_catalog.format_type(o.oprleft, NULL), 'NONE'),
                                  pg_catalog.format_type(o.oprright, NULL)), o.oprowner
    FROM ns JOIN pg_catalog.pg_operator o ON o.oprnamespace = ns.oid WHERE o.oprowner NOT IN (SELECT oid FROM trusted)
)${REPORT}`;

/**
 * The official tables in the schema an adoption copies from: it reads them
 * and puts triggers on them. Their owner, their triggers' functions and their
 * row security are checked as for our own tables.
 */
const SOURCE_QUERY = `
WITH ${TRUSTED}, rel AS MATERIALIZED (
  SELECT c.oid, c.relname, c.relowner, c.relrowsecurity FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = $1 AND c.relname = ANY ($2::text[])
), found (always, what, owner) AS (
  SELECT false, pg_catalog.format('owns table %I.%I', $1::text, r.relname), r.relowner FROM rel r WHERE r.relowner NOT IN (SELECT oid FROM trusted)
  UNION ALL
  SELECT false, pg_catalog.format('owns %I.%I(%s), the function of trigger %I on %I.%I', pn.nspname, p.proname,
                                  pg_catalog.pg_get_function_identity_arguments(p.oid), t.tgname, $1::text, r.relname), p.proowner
    FROM rel r JOIN pg_catalog.pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid
    JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
   WHERE p.proowner NOT IN (SELECT oid FROM trusted)
)${REPORT}`;

/**
 * Read (never change) what in `schema` another role owns or may create. Run
 * inside the migration transaction, under its lock, after `search_path` is set.
 *
 * @example
 * ```ts
 * const report = await inspectTrust(tx, "agents");
 * refuse(report, "agents", report.always);
 * ```
 */
export async function inspectTrust(tx: Queryable, schema: string): Promise<TrustReport> {
  type Found = { always: boolean; what: string; role: string };
  const { me, found } = (await tx.query<{ me: string; found: Found[] }>(QUERY, [schema, TOUCHED, READ_FIRST])).rows[0]!;
  const finding = (r: Found) => ({ text: `role ${JSON.stringify(r.role)} ${r.what}`, role: r.role });
  return { me, always: found.filter((r) => r.always).map(finding), whenApplying: found.filter((r) => !r.always).map(finding) };
}

/**
 * What another role owns among the official tables of `from` (the schema an
 * adoption copies from, and puts triggers on): findings to refuse with.
 *
 * @example
 * ```ts
 * refuse(report, "langgraph", await inspectAdoptionSource(tx, "public"));
 * ```
 */
export async function inspectAdoptionSource(tx: Queryable, from: string): Promise<TrustReport["always"]> {
  type Found = { always: boolean; what: string; role: string };
  const { found } = (await tx.query<{ found: Found[] }>(SOURCE_QUERY, [from, OFFICIAL])).rows[0]!;
  return found.map((r) => ({ text: `role ${JSON.stringify(r.role)} ${r.what}`, role: r.role }));
}

/** Throw {@link UnsafeSchemaError} if there are findings. */
export function refuse(report: TrustReport, schema: string, findings: TrustReport["always"]): void {
  if (findings.length > 0) throw new UnsafeSchemaError(schema, report.me, findings);
}
