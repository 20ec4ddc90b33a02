/**
 * Search filters, compiled into SQL over the item's JSONB value: a top-level
 * field equal to a JSON value (`{ status: "active" }`), or operators
 * `$eq $ne $gt $gte $lt $lte $in $nin $exists`. Equality is JSON equality
 * (the number 1 is not the string "1", 1.50 equals 1.5); `$gt`... compare
 * numbers as numbers and strings as strings (byte-wise), and match only
 * values of the filter's type. A missing field is not equal to anything, so
 * `$ne` and `$nin` match it. An unknown operator is refused, not ignored, and
 * so is a field name or an operand Postgres would not hold as given (NUL, a
 * lone surrogate), as every other input is.
 *
 * The one part of a search's statement (search.ts, vector-search.ts) built from the caller's
 * input: a condition text over the value, its operands parameters added to the statement's
 * `params` (params.ts), never spliced into the text.
 */
import { InvalidInputError } from "../../errors.js";
import { checkText } from "../../validate.js";
import { checkJsonText } from "../input.js";
import type { Params } from "./params.js";

const OPERATORS = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"] as const;
type Operator = (typeof OPERATORS)[number];
const COMPARE: Record<"$gt" | "$gte" | "$lt" | "$lte", string> = { $gt: ">", $gte: ">=", $lt: "<", $lte: "<=" };

function isOperatorObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).some((k) => k.startsWith("$"));
}

/** An operand as JSONB text; any string in it, at any depth, Postgres must hold as given. */
function json(field: string, value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) throw new InvalidInputError(field, "expected a JSON value");
  return checkJsonText(field, text);
}

/**
 * The conditions a filter makes, ANDed, over `value` (the item's JSONB
 * column, qualified as the caller needs); undefined for no filter.
 *
 * @example
 * ```ts
 * compileFilter({ score: { $gt: 4.5 }, color: "red" }, "it.value", params, "search filter");
 * ```
 */
export function compileFilter(filter: unknown, value: string, params: Params, field: string): string | undefined {
  if (filter === undefined || filter === null) return undefined;
  if (typeof filter !== "object" || Array.isArray(filter)) throw new InvalidInputError(field, "expected an object of field conditions");
  const parts: string[] = [];
  for (const [key, condition] of Object.entries(filter)) {
    // Named as JSON: the name of a field that cannot be used is shown escaped, never as its raw characters.
    checkText(`${field} key ${JSON.stringify(key)}`, key);
    const at = `${field}.${key}`;
    const item = `(${value} -> ${params.add(key, "text")})`;
    if (!isOperatorObject(condition)) {
      parts.push(`${item} = ${params.add(json(at, condition), "jsonb")}`);
      continue;
    }
    for (const [op, operand] of Object.entries(condition)) {
      if (!(OPERATORS as readonly string[]).includes(op)) {
        throw new InvalidInputError(`${at}.${op}`, `is not a filter operator (${OPERATORS.join(", ")})`);
      }
      parts.push(operatorCondition(op as Operator, item, operand, params, `${at}.${op}`));
    }
  }
  return parts.length > 0 ? parts.join(" AND ") : undefined;
}

function operatorCondition(op: Operator, item: string, operand: unknown, params: Params, field: string): string {
  switch (op) {
    case "$eq":
      return `${item} = ${params.add(json(field, operand), "jsonb")}`;
    case "$ne":
      return `${item} IS DISTINCT FROM ${params.add(json(field, operand), "jsonb")}`;
    case "$gt":
    case "$gte":
    case "$lt":
    case "$lte": {
      if (typeof operand === "number" && Number.isFinite(operand)) {
        // CASE, not AND: SQL does not promise to test the type before casting.
        return `CASE WHEN pg_catalog.jsonb_typeof(${item}) = 'number' THEN ${item}::numeric ${COMPARE[op]} ${params.add(operand, "numeric")} ELSE false END`;
      }
      if (typeof operand === "string") {
        checkText(field, operand);
        return `(pg_catalog.jsonb_typeof(${item}) = 'string' AND (${item} #>> '{}') COLLATE "C" ${COMPARE[op]} ${params.add(operand, "text")})`;
      }
      throw new InvalidInputError(field, "expected a finite number or a string");
    }
    case "$in":
    case "$nin": {
      if (!Array.isArray(operand)) throw new InvalidInputError(field, "expected an array of values");
      const any = `coalesce(${item} = ANY (ARRAY(SELECT pg_catalog.jsonb_array_elements(${params.add(json(field, operand), "jsonb")}))), false)`;
      return op === "$in" ? any : `NOT ${any}`;
    }
    case "$exists": {
      if (typeof operand !== "boolean") throw new InvalidInputError(field, "expected true or false");
      return `${item} IS ${operand ? "NOT " : ""}NULL`;
    }
  }
}
