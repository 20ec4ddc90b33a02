/**
 * The store's options: the official store's shape (`PostgresStoreConfig`,
 * honoured as it is) and this package's additions, checked before any SQL.
 */
import type pg from "pg";
import { parseDuration } from "../duration.js";
import { InvalidOptionsError } from "../errors.js";
import type { EventHandler, HandlerErrorHandler } from "../events.js";
import { checkSchemaName } from "../validate.js";
import { checkRetry, type RetryOptions } from "../db/migrate.js";
import { checkPartitions } from "../db/partitions.js";
import { LOCATION_OPTIONS, checkLocation, type Location, type OpenLocationOptions } from "../db/open.js";
import { checkOptionKeys } from "../validate.js";
import { checkStoreAdopt, type StoreAdoptOption } from "./adopt.js";
import { checkIndexConfig, type DistanceMetric, type IndexConfig, type VectorIndex } from "./vector.js";

/**
 * TTL of items, in minutes, as the official store takes it (or a duration
 * string: `"1h"`, `"30d"`, read as every duration option of this package is).
 *
 * @example
 * ```ts
 * const ttl: TTLConfig = { defaultTtl: 60 * 24, refreshOnRead: true, sweepIntervalMinutes: 10 };
 * ```
 */
export interface TTLConfig {
  /** TTL of items put without one. Default: none (items never expire). */
  defaultTtl?: number | string;
  /** Reads (get, search) move an item's expiry to now + its TTL, and return only items whose expiry they moved (not one the sweeper deleted meanwhile). Default true. */
  refreshOnRead?: boolean;
  /** Delete expired items every so many minutes (one process at a time), from `setup()`/`start()` to `stop()`. Default: no sweeper. */
  sweepIntervalMinutes?: number | string;
}

/**
 * Options of a store on a pool you own (`new PostgresStore(pool, options)`),
 * and, with `connectionOptions`, the official store's config.
 *
 * @example
 * ```ts
 * new PostgresStore(pool, { schema: "memory", ttl: { defaultTtl: 60 }, index: { dims: 1536, embed } });
 * ```
 */
export interface PostgresStoreOptions {
  /** Default `public`. */
  schema?: string;
  /** Run `setup()` before the first operation. Default: true for the official shapes (connectionOptions, fromConnString), false on your own pool. */
  ensureTables?: boolean;
  ttl?: TTLConfig;
  /** Vector search (needs pgvector). */
  index?: IndexConfig;
  /** The text search configuration (`to_tsvector`'s). Default `english`. */
  textSearchLanguage?: string;
  /** Receives events (migrate, retry, connectionError). */
  onEvent?: EventHandler;
  onHandlerError?: HandlerErrorHandler;
}

/**
 * The official store's constructor argument.
 *
 * @example
 * ```ts
 * new PostgresStore({ connectionOptions: process.env.DATABASE_URL!, schema: "memory" });
 * ```
 */
export interface PostgresStoreConfig extends PostgresStoreOptions {
  connectionOptions: string | pg.PoolConfig;
}

/** Options of `setup()`. */
export interface StoreSetupOptions {
  /** What to do with the official store's tables (see StoreAdoptOption). */
  adopt?: StoreAdoptOption;
  /** Retrying while the database is not reachable yet, as the saver's `setup()` does. Default: 10 attempts (about 30 s); `false`: one. */
  retry?: RetryOptions | false;
  /** Hash partition the store's tables by namespace key, this many partitions each (2 to 1024), when this call creates them (docs/scaling-out.md). */
  partitions?: number;
}

export interface CheckedStoreOptions {
  schema: string;
  ensureTables: boolean;
  defaultTtl: number | undefined;
  refreshOnRead: boolean;
  sweepMinutes: number | undefined;
  index: VectorIndex | undefined;
  language: string;
}

const KNOWN: readonly string[] = ["schema", "ensureTables", "ttl", "index", "textSearchLanguage", "onEvent", "onHandlerError"];

/** A TTL option in minutes (a number, as LangGraph's store counts them, or a duration string such as "1h"). */
const minutes = (option: string, v: unknown): number | undefined => (v === undefined ? undefined : parseDuration(v, option, { numberUnit: "minutes" }) / 60_000);

export function checkStoreOptions(options: PostgresStoreOptions, ensureDefault: boolean): CheckedStoreOptions {
  if (options === null || typeof options !== "object") throw new InvalidOptionsError("options", "expected an object");
  for (const key of Object.keys(options)) if (!KNOWN.includes(key)) throw new InvalidOptionsError(key, `is not a store option (${KNOWN.join(", ")})`);
  const ttl = options.ttl ?? {};
  if (typeof ttl !== "object" || ttl === null) throw new InvalidOptionsError("ttl", "expected { defaultTtl?, refreshOnRead?, sweepIntervalMinutes? }");
  if (ttl.refreshOnRead !== undefined && typeof ttl.refreshOnRead !== "boolean") throw new InvalidOptionsError("ttl.refreshOnRead", "expected true or false");
  if (options.ensureTables !== undefined && typeof options.ensureTables !== "boolean") throw new InvalidOptionsError("ensureTables", "expected true or false");
  const language = options.textSearchLanguage ?? "english";
  if (typeof language !== "string" || !/^[A-Za-z_][A-Za-z0-9_.]*$/.test(language)) {
    throw new InvalidOptionsError("textSearchLanguage", "expected the name of a text search configuration, e.g. english or simple");
  }
  for (const f of ["onEvent", "onHandlerError"] as const) {
    if (options[f] !== undefined && typeof options[f] !== "function") throw new InvalidOptionsError(f, "expected a function");
  }
  return {
    schema: checkSchemaName(options.schema ?? "public"),
    ensureTables: options.ensureTables ?? ensureDefault,
    defaultTtl: minutes("ttl.defaultTtl", ttl.defaultTtl),
    refreshOnRead: ttl.refreshOnRead ?? true,
    sweepMinutes: minutes("ttl.sweepIntervalMinutes", ttl.sweepIntervalMinutes),
    index: checkIndexConfig(options.index),
    language,
  };
}

/**
 * What `PostgresStore.open()` may be told: the store's options, `setup()`'s,
 * and where the database is, as `PostgresSaver.open()` takes it (the same
 * checks, the same rule in production, the same lines on stderr).
 *
 * @example
 * ```ts
 * await PostgresStore.open({ databaseUrl: process.env.DATABASE_URL, schema: "memory", index: { dims: 1536, embed } });
 * await PostgresStore.open({ embedded: true }); // ./.langgraph-pg, chosen (also with NODE_ENV=production)
 * ```
 */
export interface StoreOpenOptions extends PostgresStoreOptions, StoreSetupOptions, OpenLocationOptions {}

/** Every option of {@link StoreOpenOptions}: anything else is refused, listing these. */
const OPEN_OPTIONS: readonly string[] = [...LOCATION_OPTIONS, ...(["adopt", "retry", "partitions"] satisfies (keyof StoreOpenOptions)[]), ...KNOWN];

/**
 * `PostgresStore.open()`'s options, every one checked before anything is
 * opened or created, split into where the database is, `setup()`'s, and the store's.
 */
export function storeOpenOptions(options: unknown): { location: Location; setup: StoreSetupOptions; store: PostgresStoreOptions } {
  const o = checkOptionKeys(options ?? {}, OPEN_OPTIONS, "PostgresStore.open()") as StoreOpenOptions;
  const { databaseUrl, dataDir, embedded, migrate, pool, adopt, retry, partitions, log, ...store } = o;
  const location = checkLocation({ databaseUrl, dataDir, embedded, migrate, pool, log });
  checkStoreAdopt(adopt);
  checkRetry(retry);
  checkPartitions(partitions);
  checkStoreOptions(store, false);
  return { location, setup: { adopt, retry, partitions }, store };
}

/** Search modes, as the official store names them. */
export type SearchMode = "auto" | "text" | "vector" | "hybrid";

/**
 * Options of {@link PostgresStore.search}: the base class's, and the official store's.
 *
 * @example
 * ```ts
 * await store.search(["docs"], { query: "pasta", mode: "hybrid", vectorWeight: 0.7, filter: { lang: "it" }, limit: 5 });
 * ```
 */
export interface StoreSearchOptions {
  filter?: Record<string, unknown>;
  query?: string;
  limit?: number;
  offset?: number;
  mode?: SearchMode;
  /** Move the returned items' expiry to now + their TTL. Default: the store's `ttl.refreshOnRead`. */
  refreshTtl?: boolean;
  /** Vector and hybrid search: only items scoring at least this (cosine similarity, 1 / (1 + l2 distance), or inner product). */
  similarityThreshold?: number;
  /** Vector search: the metric to rank by (default: the index's). */
  distanceMetric?: DistanceMetric;
  /** Hybrid search: the weight of the vector score against the text rank, 0 to 1. Default 0.7. */
  vectorWeight?: number;
}
