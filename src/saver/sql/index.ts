/**
 * The saver's statements, one room: each statement is written whole in the file of its kind
 * (put.ts, read.ts, writes.ts, thread.ts), with a comment per step; this file builds them once per
 * schema. Tables are named schema-qualified (`"agents".checkpoints`); columns as the migrations
 * create them (test/saver/statements.test.ts prepares every statement against a migrated schema).
 */
import { placeOf } from "./place.js";
import { put, putChecked, putWithWrites } from "./put.js";
import { deltaHistory, getById, getHead, listOfThread, listPage, type ListWhere } from "./read.js";
import { deleteThread, headId, insertBlobs, lockThreadForDelete, releaseLease, renameWrites, rewriteCheckpoint, staleBatch } from "./thread.js";
import { putWrites, putWritesBatch } from "./writes.js";

export type { ListKey, ListWhere, ReadRow, DeltaRow } from "./read.js";
export { placeOf, type Place } from "./place.js";

export type Statements = ReturnType<typeof saverStatements>;

/** Every statement the saver runs, for `schema`. */
export function saverStatements(schema: string) {
  const p = placeOf(schema);
  return {
    put: put(p),
    putWithWrites: putWithWrites(p),
    putChecked: putChecked(p),
    putWrites: putWrites(p),
    putWritesBatch: putWritesBatch(p),
    getHead: getHead(p),
    getById: getById(p),
    listPage: (where: ListWhere) => listPage(p, where),
    listOfThread: listOfThread(p),
    deltaHistory: deltaHistory(p),
    lockThreadForDelete: lockThreadForDelete(p),
    deleteThread: deleteThread(p),
    releaseLease: releaseLease(p),
    headId: headId(p),
    staleBatch: staleBatch(p),
    rewriteCheckpoint: rewriteCheckpoint(p),
    insertBlobs: insertBlobs(p),
    renameWrites: renameWrites(p),
  };
}
