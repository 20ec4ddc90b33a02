/**
 * What the store's operations share below the class: a batch split by kind
 * of operation (gets, searches, listings: one statement each; then all puts
 * and deletes in one), the checks of each kind and the choice of its
 * statement (written in sql/), the embedding of a
 * batch's texts (one call of the embedder) and of its queries, all before
 * any SQL, and the rows turned into LangGraph items.
 */
import type {
  GetOperation,
  Item,
  ListNamespacesOperation,
  Operation,
  OperationResults,
  PutOperation,
  SearchItem,
  SearchOperation,
} from "@langchain/langgraph-checkpoint";
import { InvalidInputError } from "../errors.js";
import { checkText } from "../validate.js";
import { SEPARATOR, checkCount, checkItemKey, checkNamespace, checkTtl, encodeValue, nsKey } from "./input.js";
import type { CheckedStoreOptions, StoreSearchOptions } from "./options.js";
import { compileFilter } from "./sql/filter.js";
import {
  Params,
  filterSearch,
  hybridSearch,
  listNamespaces,
  listingsOfBatch,
  refreshFound,
  searchesOfBatch,
  textSearch,
  vectorSearch,
  writeWithVectors,
  type ItemRow,
  type MatchCondition,
  type StoreStatements,
  type VectorPlace,
  type VectorRow,
  type WriteRow,
} from "./sql/index.js";
import { embedDocuments, embedQuery, textsToEmbed, vectorText, type DistanceMetric } from "./vector.js";

/** What the class hands the functions here. */
export interface StoreContext {
  readonly opts: CheckedStoreOptions;
  readonly q: StoreStatements;
  /** One statement (after the schema check); `plan: "each"` plans it for its values every time (see store.ts). */
  run<R extends object>(text: string, values: unknown[], what: string, options?: { plan?: "each" }): Promise<{ rows: R[] }>;
  ensureReady(): Promise<void>;
  /** Where the vector statements run: the store's schema and pgvector's (known once ready, with `index`). */
  vectorPlace(): VectorPlace;
  /** Whether the server's pgvector has iterative index scans (0.8 or later; known once ready, with `index`). */
  iterativeScan(): boolean;
}

/** A put or delete of a batch, with the name of its field for messages. */
export type WriteOp = { op: PutOperation & { options?: { ttl?: number } }; field: string };

type Read =
  | { kind: "get"; i: number; namespace: string[]; key: string }
  | { kind: "search"; i: number; sql: (params: Params, op: number) => string; refresh: boolean; scored: boolean; vector: boolean }
  | { kind: "list"; i: number; op: ListNamespacesOperation; conditions: MatchCondition[] };

export async function runBatch<Op extends readonly Operation[]>(ctx: StoreContext, operations: Op): Promise<OperationResults<Op>> {
  if (!Array.isArray(operations)) throw new InvalidInputError("batch operations", "expected an array of operations");
  const results: unknown[] = new Array(operations.length).fill(null);
  const reads: Read[] = [];
  const writes = new Map<string, WriteOp>();
  operations.forEach((op, i) => {
    const field = `batch operations[${i}]`;
    if (op === null || typeof op !== "object") throw new InvalidInputError(field, "expected an operation object");
    if ("namespacePrefix" in op) reads.push(searchRead(ctx, i, op as SearchOperation, {}, field));
    else if ("value" in op) {
      const put = op as PutOperation & { options?: { ttl?: number } };
      const namespace = checkNamespace(`${field}.namespace`, put.namespace, { allowReservedRoot: put.value === null });
      const key = checkItemKey(`${field}.key`, put.key);
      writes.set(JSON.stringify([namespace, key]), { op: put, field });
      results[i] = undefined;
    } else if ("key" in op) {
      const get = op as GetOperation;
      const namespace = checkNamespace(`${field}.namespace`, get.namespace, { allowReservedRoot: true });
      reads.push({ kind: "get", i, namespace, key: checkItemKey(`${field}.key`, get.key) });
    } else if ("matchConditions" in op || "limit" in op) {
      reads.push(listRead(i, op as ListNamespacesOperation, field));
    } else throw new InvalidInputError(field, "is not a get, put, search or listNamespaces operation");
  });
  const write = writes.size > 0 ? await prepareWrite(ctx, [...writes.values()]) : undefined;
  const gets = reads.filter((r): r is Extract<Read, { kind: "get" }> => r.kind === "get");
  if (gets.length > 0) {
    const refresh = ctx.opts.refreshOnRead;
    const res = await ctx.run<ItemRow>(refresh ? ctx.q.getManyRefreshing : ctx.q.getMany, [JSON.stringify(gets.map((g) => [nsKey(g.namespace), g.key]))], "batch get");
    for (const row of res.rows) results[gets[row.op!]!.i] = toItem(row);
  }
  const searches = reads.filter((r): r is Extract<Read, { kind: "search" }> => r.kind === "search");
  if (searches.length > 0) {
    for (const s of searches) results[s.i] = [];
    for (const row of await searchRows(ctx, searches)) (results[searches[row.op!]!.i] as SearchItem[]).push(toSearchItem(row, searches[row.op!]!.scored));
  }
  const lists = reads.filter((r): r is Extract<Read, { kind: "list" }> => r.kind === "list");
  if (lists.length > 0) {
    for (const l of lists) results[l.i] = [];
    const params = new Params();
    const text = listingsOfBatch(lists.map((l, op) => listNamespaces(ctx.q.p, op, { conditions: l.conditions, maxDepth: l.op.maxDepth, limit: l.op.limit, offset: l.op.offset }, params)));
    const res = await ctx.run<{ op: number; ns: string[] | null }>(text, params.values, "batch listNamespaces");
    for (const row of res.rows) results[lists[row.op]!.i] = (row.ns ?? []).map((key) => key.split(SEPARATOR));
  }
  if (write) await ctx.run(write.text, write.values, "batch put");
  return results as OperationResults<Op>;
}

/** The write statement of some puts and deletes (embedded first, before any SQL). */
export async function prepareWrite(ctx: StoreContext, puts: WriteOp[]): Promise<{ text: string; values: unknown[] }> {
  const index = ctx.opts.index;
  const rows: WriteRow[] = [];
  const toEmbed: { ns: string; key: string; field: string; text: string }[] = [];
  for (const { op, field } of puts) {
    const ns = nsKey(op.namespace);
    if (op.value === null) {
      rows.push({ ns, key: op.key });
      continue;
    }
    const value = encodeValue(`${field}.value`, op.value);
    const ttl = checkTtl(`${field}.options.ttl`, op.options?.ttl) ?? ctx.opts.defaultTtl;
    rows.push(ttl === undefined ? { ns, key: op.key, value } : { ns, key: op.key, value, ttl });
    const fields = op.index;
    if (fields !== undefined && fields !== false && (!Array.isArray(fields) || fields.some((f) => typeof f !== "string"))) {
      throw new InvalidInputError(`${field}.index`, "expected false or an array of field paths");
    }
    if (index && fields !== false) {
      for (const t of textsToEmbed(op.value, fields ?? index.fields)) toEmbed.push({ ns, key: op.key, ...t });
    }
  }
  if (!index) return { text: ctx.q.write, values: [JSON.stringify(rows)] };
  const vectors = await embedDocuments(index, toEmbed.map((t) => t.text));
  const vrows: VectorRow[] = toEmbed.map((t, i) => ({ ns: t.ns, key: t.key, field: t.field, text: t.text, embedding: vectorText(vectors[i]!) }));
  await ctx.ensureReady();
  return { text: writeWithVectors(ctx.vectorPlace()), values: [JSON.stringify(rows), JSON.stringify(vrows)] };
}

/** Check a search and say how to build its SQL (the query embedded later, in searchRows). */
export function searchRead(ctx: StoreContext, i: number, op: SearchOperation, extra: StoreSearchOptions, field: string): Extract<Read, { kind: "search" }> & { embedText?: string } {
  const prefix = checkNamespace(`${field} namespacePrefix`, op.namespacePrefix, { allowEmpty: true, allowReservedRoot: true });
  const limit = checkCount(`${field} limit`, op.limit, 10);
  const offset = checkCount(`${field} offset`, op.offset, 0);
  const query = op.query;
  if (query !== undefined && query !== null && typeof query !== "string") throw new InvalidInputError(`${field} query`, "expected a string");
  // In every mode: the text search and hybrid send it to Postgres, and one query should not work in one mode only.
  if (typeof query === "string") checkText(`${field} query`, query);
  const mode = extra.mode ?? "auto";
  if (!["auto", "text", "vector", "hybrid"].includes(mode)) throw new InvalidInputError(`${field} options.mode`, `Unknown search mode: ${String(mode)} (auto, text, vector, hybrid)`);
  const index = ctx.opts.index;
  if (mode === "vector" && !index) throw new InvalidInputError(`${field} options.mode`, "Vector search requested but not configured: give the store an index ({ dims, embed })");
  if (mode === "hybrid" && !index) throw new InvalidInputError(`${field} options.mode`, "Hybrid search requested but vector search not configured: give the store an index ({ dims, embed })");
  const refresh = extra.refreshTtl ?? ctx.opts.refreshOnRead;
  if (typeof refresh !== "boolean") throw new InvalidInputError(`${field} options.refreshTtl`, "expected true or false");
  const threshold = extra.similarityThreshold;
  if (threshold !== undefined && (typeof threshold !== "number" || !Number.isFinite(threshold))) throw new InvalidInputError(`${field} options.similarityThreshold`, "expected a number");
  const weight = extra.vectorWeight ?? 0.7;
  if (typeof weight !== "number" || !(weight >= 0 && weight <= 1)) throw new InvalidInputError(`${field} options.vectorWeight`, "expected a number from 0 to 1");
  const metric = extra.distanceMetric ?? index?.distanceMetric ?? "cosine";
  if (!["cosine", "l2", "inner_product"].includes(metric)) throw new InvalidInputError(`${field} options.distanceMetric`, "expected cosine, l2 or inner_product");
  // Compiled once now, to refuse a bad filter before any SQL; compiled again into the statement's numbering.
  compileFilter(op.filter, "it.value", new Params(), `${field} filter`);
  const text = query ? query : undefined;
  const vector = text !== undefined && index !== undefined && (mode === "vector" || mode === "hybrid" || mode === "auto");
  const language = ctx.opts.language;
  const read: Extract<Read, { kind: "search" }> & { embedText?: string; embedding?: number[] } = {
    kind: "search",
    i,
    refresh,
    scored: text !== undefined,
    vector,
    sql: (params, n) => {
      const filter = compileFilter(op.filter, "it.value", params, `${field} filter`);
      if (!vector) {
        if (text === undefined) return filterSearch(ctx.q.p, n, { prefix, filter, limit, offset }, params);
        return textSearch(ctx.q.p, n, { prefix, filter, text: { query: text, language }, limit, offset }, params);
      }
      const tuning = { indexType: index!.indexType, ef: index!.ef, probes: index!.probes, iterativeScan: ctx.iterativeScan(), fanout: index!.fields.length };
      const search = { prefix, filter, query: read.embedding!, metric: metric as DistanceMetric, threshold, limit, offset };
      if (mode === "hybrid") return hybridSearch(ctx.vectorPlace(), n, { ...search, text: text!, language, weight }, tuning, params);
      return vectorSearch(ctx.vectorPlace(), n, search, tuning, params);
    },
  };
  if (vector) read.embedText = text;
  return read;
}

/** One statement for all the searches (query embeddings made first). */
export async function searchRows(ctx: StoreContext, searches: (Extract<Read, { kind: "search" }> & { embedText?: string; embedding?: number[] })[]): Promise<ItemRow[]> {
  const index = ctx.opts.index;
  for (const s of searches) if (s.embedText !== undefined) s.embedding = await embedQuery(index!, s.embedText);
  await ctx.ensureReady();
  const params = new Params();
  let text = searchesOfBatch(searches.map((s, n) => s.sql(params, n)));
  const refreshing = searches.map((s, n) => (s.refresh ? n : -1)).filter((n) => n >= 0);
  if (refreshing.length > 0) text = refreshFound(ctx.q.p, text, params.add(refreshing, "int[]"));
  // A vector search is planned for its values (see store.ts #run): whether the index or the namespace's key range is
  // cheaper depends on how many vectors the range holds, which a generic plan guesses.
  const res = await ctx.run<ItemRow>(text, params.values, "search", { plan: searches.some((s) => s.vector) ? "each" : undefined });
  return res.rows;
}

function listRead(i: number, op: ListNamespacesOperation, field: string): Extract<Read, { kind: "list" }> {
  const conditions = (op.matchConditions ?? []).map((c, j) => {
    if (c === null || typeof c !== "object" || (c.matchType !== "prefix" && c.matchType !== "suffix")) {
      throw new InvalidInputError(`${field}.matchConditions[${j}]`, 'expected { matchType: "prefix" | "suffix", path }');
    }
    return { matchType: c.matchType, path: checkNamespace(`${field}.matchConditions[${j}].path`, c.path, { allowEmpty: true, allowReservedRoot: true }) };
  });
  if (op.maxDepth !== undefined && op.maxDepth !== null && (!Number.isInteger(op.maxDepth) || op.maxDepth < 1)) {
    throw new InvalidInputError(`${field}.maxDepth`, "expected a positive integer");
  }
  return {
    kind: "list",
    i,
    op: { ...op, maxDepth: op.maxDepth ?? undefined, limit: checkCount(`${field}.limit`, op.limit, 100), offset: checkCount(`${field}.offset`, op.offset, 0) },
    conditions,
  };
}

export function toItem(row: ItemRow): Item {
  return { namespace: row.ns_key.split(SEPARATOR), key: row.key, value: row.value, createdAt: row.created_at, updatedAt: row.updated_at };
}

export function toSearchItem(row: ItemRow, scored: boolean): SearchItem {
  const item: SearchItem = toItem(row);
  if (scored) item.score = row.score === null || row.score === undefined ? undefined : Number(row.score);
  return item;
}
