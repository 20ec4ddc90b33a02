/**
 * The store's statements, one room. Each is written whole in the file of its kind, with a comment
 * per CTE saying what it decides:
 *
 *   read.ts           get, getRefreshing, getMany, getManyRefreshing (a batch's gets)
 *   write.ts          put, deleteItem, write and writeWithVectors (a batch's puts and deletes)
 *   search.ts         filterSearch, textSearch, searchesOfBatch, refreshFound
 *   vector-search.ts  vectorSearch, hybridSearch
 *   namespaces.ts     listNamespaces, listingsOfBatch
 *   maintenance.ts    sweep (and its lock), stats, reindexPage, reindexWrite, vectorExtension
 *
 * Tables are named schema-qualified (`"memory".store_items`), columns as the migrations create
 * them (migrations/store/, and vector.ts for the vector table); test/store/statements.test.ts
 * prepares every statement against a migrated schema, so a name the schema does not have fails
 * there. The items' statements with a fixed text are built once per store (below); those on the
 * vector table when used (pgvector's schema is known once the store is ready); searches and
 * listings per call, their parameters numbered by params.ts so that a batch's share one
 * statement, their filters compiled by filter.ts.
 *
 * @example
 * ```ts
 * const q = storeStatements("memory");
 * await pool.query(q.get, [nsKey(["users", "u1"]), "prefs"]);
 * ```
 */
import { sweep, stats } from "./maintenance.js";
import { get, getMany, getManyRefreshing, getRefreshing } from "./read.js";
import { deleteItem, put, write } from "./write.js";

import { placeOf, type Place } from "./place.js";

export { placeOf, vectorPlaceOf, type Place, type VectorPlace } from "./place.js";

export type StoreStatements = ReturnType<typeof storeStatements>;

/** The statements of `schema` on its items whose text is fixed. */
export function storeStatements(schema: string) {
  const p = placeOf(schema);
  return {
    p,
    get: get(p),
    getRefreshing: getRefreshing(p),
    getMany: getMany(p),
    getManyRefreshing: getManyRefreshing(p),
    put: put(p),
    delete: deleteItem(p),
    write: write(p),
    sweep: sweep(p),
    stats: stats(p),
  };
}

export type { ItemRow } from "./read.js";
export type { VectorRow, WriteRow } from "./write.js";
export { writeWithVectors } from "./write.js";
export { filterSearch, refreshFound, searchesOfBatch, textSearch } from "./search.js";
export { hybridSearch, vectorSearch, type VectorTuning } from "./vector-search.js";
export { listNamespaces, listingsOfBatch, type MatchCondition } from "./namespaces.js";
export { SWEEP_LOCK_TIMEOUT, reindexPage, reindexWrite, sweepLock, sweepLockWaiting, vectorExtension } from "./maintenance.js";
export { Params } from "./params.js";
