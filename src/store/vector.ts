/**
 * Vector search with pgvector: the index configuration (the official store's
 * `index` option), the texts a put embeds, calling the embedder, and the
 * table that stores the vectors (the statements that write and rank them are
 * in sql/write.ts and sql/vector-search.ts). The table
 * `store_item_vectors` holds one row per embedded text of an item (its
 * namespace key and key, its field path, its text, its embedding), deleted with the item. Its column type
 * depends on `dims`, so it is made here, when a store with `index` is set up,
 * not by a numbered migration; changing `dims`, the metric or the index type
 * is a migration of its own (see migrate.ts), never done silently.
 */
import { InvalidInputError, InvalidOptionsError, type VectorIndexShape } from "../errors.js";
import { partitionedCreate, type Partitioning } from "../db/partitions.js";
import { quoteIdent } from "../validate.js";
import { STORE_LIMITS } from "./input.js";

/** A LangChain `Embeddings` (anything with `embedDocuments`, and preferably `embedQuery`). */
export interface Embeddings {
  embedDocuments(texts: string[]): Promise<number[][]>;
  embedQuery?(text: string): Promise<number[]>;
}
/** Or a function from texts to their embeddings. */
export type EmbeddingsFunc = (texts: string[]) => Promise<number[][]>;
export type DistanceMetric = "cosine" | "l2" | "inner_product";
export type VectorIndexType = "hnsw" | "ivfflat";

/**
 * The official store's `index` option: what to embed, with what, and the
 * pgvector index over the embeddings.
 *
 * @example
 * ```ts
 * const index: IndexConfig = { dims: 1536, embed: new OpenAIEmbeddings(), fields: ["text"], distanceMetric: "cosine" };
 * ```
 */
export interface IndexConfig {
  dims: number;
  embed: Embeddings | EmbeddingsFunc;
  /** JSON paths of the texts to embed (`"title"`, `"chapters[*].text"`, `"authors[0].name"`, `"items[-1]"`); default `["$"]`, the whole value. */
  fields?: string[];
  /** Default `"hnsw"`. */
  indexType?: VectorIndexType;
  /** Default `"cosine"`. */
  distanceMetric?: DistanceMetric;
  /** `ef`: the HNSW search's candidate list (`hnsw.ef_search`), set for each search; default: the server's (40). */
  hnsw?: { m?: number; efConstruction?: number; ef?: number };
  /** `probes`: the IVFFlat lists a search visits (`ivfflat.probes`), set for each search; default: the server's (1). */
  ivfflat?: { lists?: number; probes?: number };
  /** Accepted for the official shape; one index, for `distanceMetric`, is made. */
  createAllMetricIndexes?: boolean;
}

/** A checked index configuration. */
export interface VectorIndex extends VectorIndexShape {
  embed: Embeddings | EmbeddingsFunc;
  fields: string[];
  m: number;
  efConstruction: number;
  lists: number;
  /** Search-time settings, applied to each search's statement; undefined: the server's. */
  ef: number | undefined;
  probes: number | undefined;
}

const METRICS: readonly DistanceMetric[] = ["cosine", "l2", "inner_product"];
/** pgvector supports at most 2,000 dimensions in an HNSW or IVFFlat index. */
const MAX_DIMS = 2000;

function positiveInt(option: string, v: unknown, fallback: number, max?: number): number;
function positiveInt(option: string, v: unknown, fallback: undefined, max?: number): number | undefined;
function positiveInt(option: string, v: unknown, fallback: number | undefined, max = 1_000_000): number | undefined {
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > max) throw new InvalidOptionsError(option, `expected an integer from 1 to ${max}`);
  return v;
}

/** Check the `index` option (before any SQL). */
export function checkIndexConfig(index: unknown): VectorIndex | undefined {
  if (index === undefined || index === null) return undefined;
  if (typeof index !== "object") throw new InvalidOptionsError("index", "expected { dims, embed, fields?, indexType?, distanceMetric? }");
  const c = index as IndexConfig;
  const dims = positiveInt("index.dims", c.dims, Number.NaN, MAX_DIMS);
  const embed = c.embed ?? (c as { embeddings?: unknown }).embeddings;
  if (typeof embed !== "function" && !(embed && typeof embed === "object" && typeof (embed as Embeddings).embedDocuments === "function")) {
    throw new InvalidOptionsError("index.embed", "expected a LangChain Embeddings (with embedDocuments) or a function (texts: string[]) => Promise<number[][]>");
  }
  const fields = c.fields ?? ["$"];
  if (!Array.isArray(fields) || fields.some((f) => typeof f !== "string" || f === "")) throw new InvalidOptionsError("index.fields", "expected an array of JSON paths");
  const indexType = c.indexType ?? "hnsw";
  if (indexType !== "hnsw" && indexType !== "ivfflat") throw new InvalidOptionsError("index.indexType", 'expected "hnsw" or "ivfflat"');
  const distanceMetric = c.distanceMetric ?? "cosine";
  if (!METRICS.includes(distanceMetric)) throw new InvalidOptionsError("index.distanceMetric", `expected one of ${METRICS.join(", ")}`);
  return {
    dims,
    embed: embed as VectorIndex["embed"],
    fields,
    indexType,
    distanceMetric,
    m: positiveInt("index.hnsw.m", c.hnsw?.m, 16, 100),
    efConstruction: positiveInt("index.hnsw.efConstruction", c.hnsw?.efConstruction, 200, 1000),
    lists: positiveInt("index.ivfflat.lists", c.ivfflat?.lists, 100, 32768),
    // pgvector's own bounds of hnsw.ef_search and ivfflat.probes.
    ef: positiveInt("index.hnsw.ef", c.hnsw?.ef, undefined, 1000),
    probes: positiveInt("index.ivfflat.probes", c.ivfflat?.probes, undefined, 32768),
  };
}

/**
 * The texts at a JSON path of a value: `$` the whole value (as JSON), `a.b`
 * nested fields, `a[*]` every element (the rest of the path applied to
 * each), `a[0]` / `a[-1]` one element. Strings as they are; other values as
 * JSON (objects, arrays) or their string form (numbers, booleans).
 */
export function textsAt(value: unknown, path: string): string[] {
  if (path === "$") return [JSON.stringify(value)];
  const leaf = (v: unknown): string[] =>
    v === undefined || v === null ? [] : typeof v === "string" ? [v] : typeof v === "object" ? [JSON.stringify(v)] : [String(v)];
  const walk = (v: unknown, parts: string[]): string[] => {
    if (parts.length === 0) return leaf(v);
    const [part, ...rest] = parts as [string, ...string[]];
    const bracket = /^([^[]*)\[(\*|-?\d+)\]$/.exec(part);
    const field = bracket ? bracket[1]! : part;
    let current: unknown = v;
    if (field !== "") current = current !== null && typeof current === "object" ? (current as Record<string, unknown>)[field] : undefined;
    if (!bracket) return walk(current, rest);
    if (!Array.isArray(current)) return [];
    if (bracket[2] === "*") return current.flatMap((element) => walk(element, rest));
    const i = Number(bracket[2]);
    const element = current[i < 0 ? current.length + i : i];
    return element === undefined ? [] : walk(element, rest);
  };
  return walk(value, path.split("."));
}

/** The (field path, text) pairs to embed for a value; a path yielding several texts names each `path[i]`. */
export function textsToEmbed(value: Record<string, unknown>, fields: readonly string[]): { field: string; text: string }[] {
  const out: { field: string; text: string }[] = [];
  const seen = new Set<string>();
  for (const path of fields) {
    const texts = textsAt(value, path);
    texts.forEach((text, i) => {
      const trimmed = text.trim();
      const field = texts.length > 1 ? `${path}[${i}]` : path;
      if (trimmed === "" || seen.has(field)) return;
      if (new TextEncoder().encode(field).length > STORE_LIMITS.fieldPath) throw new InvalidInputError("put index", `field path ${JSON.stringify(field.slice(0, 40))}... is longer than ${STORE_LIMITS.fieldPath} bytes`);
      seen.add(field);
      out.push({ field, text: trimmed });
    });
  }
  return out;
}

function checkVectors(vectors: unknown, count: number, dims: number, what: string): number[][] {
  if (!Array.isArray(vectors) || vectors.length !== count) {
    throw new InvalidOptionsError("index.embed", `returned ${Array.isArray(vectors) ? vectors.length : typeof vectors} embeddings for ${count} text(s) (${what})`);
  }
  for (const v of vectors) {
    if (!Array.isArray(v) || v.length !== dims || v.some((x) => typeof x !== "number" || !Number.isFinite(x))) {
      throw new InvalidOptionsError("index.embed", `returned an embedding of ${Array.isArray(v) ? `${v.length} values` : typeof v}; index.dims is ${dims} finite numbers (${what})`);
    }
  }
  return vectors as number[][];
}

/** Embeddings of texts to store, in one call of the embedder. */
export async function embedDocuments(index: VectorIndex, texts: string[]): Promise<number[][]> {
  if (texts.length === 0) return [];
  const { embed } = index;
  const vectors = typeof embed === "function" ? await embed(texts) : await embed.embedDocuments(texts);
  return checkVectors(vectors, texts.length, index.dims, "put");
}

/** The embedding of a search query. */
export async function embedQuery(index: VectorIndex, text: string): Promise<number[]> {
  const { embed } = index;
  const vector = typeof embed === "function" ? (await embed([text]))[0] : embed.embedQuery ? await embed.embedQuery(text) : (await embed.embedDocuments([text]))[0];
  return checkVectors([vector], 1, index.dims, "search query")[0]!;
}

/** pgvector's text form of an embedding. */
export const vectorText = (v: readonly number[]) => `[${v.join(",")}]`;

const OPCLASS: Record<DistanceMetric, string> = { cosine: "vector_cosine_ops", l2: "vector_l2_ops", inner_product: "vector_ip_ops" };

export const VECTOR_TABLE = "store_item_vectors";
export const VECTOR_INDEX = "store_item_vectors_embedding";

/** `schema.name` of a pgvector object, from the extension's schema. */
export const inExtension = (extSchema: string, name: string) => `${quoteIdent(extSchema)}.${name}`;

/**
 * The DDL making the vector table and its index, in the store's schema;
 * hash partitioned on the namespace key as the items are (`layout`, the
 * store's partitioning), so that an item's vectors share its partition.
 */
export function vectorTableDdl(schema: string, extSchema: string, index: VectorIndex, layout?: Partitioning): string[] {
  const s = quoteIdent(schema);
  const create = `CREATE TABLE ${s}.${VECTOR_TABLE} (
       ns_key text COLLATE "C" NOT NULL,
       key text COLLATE "C" NOT NULL,
       field_path text COLLATE "C" NOT NULL,
       text_content text NOT NULL,
       embedding ${inExtension(extSchema, "vector")}(${index.dims}),
       CONSTRAINT ${VECTOR_TABLE}_pkey PRIMARY KEY (ns_key, key, field_path),
       CONSTRAINT ${VECTOR_TABLE}_item_fkey FOREIGN KEY (ns_key, key) REFERENCES ${s}.store_items (ns_key, key) ON DELETE CASCADE
     )`;
  return [...(layout ? partitionedCreate(create, VECTOR_TABLE, `${s}.`, layout) : [create]), vectorIndexDdl(schema, extSchema, index)];
}

/** The DDL of the vector index alone (after a change of metric or index type). */
export function vectorIndexDdl(schema: string, extSchema: string, index: VectorIndex): string {
  const opclass = inExtension(extSchema, OPCLASS[index.distanceMetric]);
  const withs = index.indexType === "hnsw" ? `m = ${index.m}, ef_construction = ${index.efConstruction}` : `lists = ${index.lists}`;
  return `CREATE INDEX ${VECTOR_INDEX} ON ${quoteIdent(schema)}.${VECTOR_TABLE} USING ${index.indexType} (embedding ${opclass}) WITH (${withs})`;
}

/** The metric an index operator class stands for. */
export function metricOfOpclass(opclass: string): DistanceMetric | undefined {
  return (Object.keys(OPCLASS) as DistanceMetric[]).find((m) => OPCLASS[m] === opclass);
}
