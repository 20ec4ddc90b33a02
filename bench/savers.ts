/**
 * The savers under test, each on its own fresh database: ours (src/), the
 * official @langchain/langgraph-checkpoint-postgres 1.0.5, the in-memory saver,
 * and a raw-pg "floor" (SELECT 1, a single-row autocommit INSERT).
 */
import { MemorySaver, uuid6, type BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { PostgresSaver as OfficialSaver } from "@langchain/langgraph-checkpoint-postgres";
import type pg from "pg";
import { createDatabase, type Database } from "./db.js";

export type SaverName = "ours" | "official" | "memory";
export type PgSaverName = Exclude<SaverName, "memory">;

type OursModule = typeof import("../src/index.js");
let oursModule: OursModule | undefined;
let oursError: string | undefined;

/** Imports src/ (fails cleanly while a part of it, e.g. serde.ts, is still being written). */
export async function loadOurs(): Promise<OursModule | undefined> {
  if (oursModule) return oursModule;
  try {
    oursModule = await import("../src/index.js");
  } catch (err) {
    oursError = err instanceof Error ? err.message : String(err);
  }
  return oursModule;
}

export function oursLoadError(): string | undefined {
  return oursError;
}

export interface PgSaverHandle {
  name: PgSaverName;
  db: Database;
  pool: pg.Pool;
  saver: BaseCheckpointSaver;
}

/** A saver of kind `name` on a pool (already migrated database). */
export function saverOn(name: PgSaverName, pool: pg.Pool): BaseCheckpointSaver {
  if (name === "official") return new OfficialSaver(pool);
  if (!oursModule) throw new Error(`our saver is unavailable: ${oursError ?? "not loaded"}`);
  return new oursModule.PostgresSaver(pool, { schema: "public" });
}

/** A fresh database `bench_<label>_<rand>` with the saver's tables. */
export async function createPgSaver(name: PgSaverName, adminUrl: string, label: string): Promise<PgSaverHandle> {
  const db = await createDatabase(adminUrl, label);
  const pool = db.pool({ max: 10 });
  if (name === "official") {
    const saver = new OfficialSaver(pool);
    await saver.setup();
    return { name, db, pool, saver };
  }
  if (!oursModule) throw new Error(`our saver is unavailable: ${oursError ?? "not loaded"}`);
  await oursModule.migrate({ pool, schema: "public" });
  return { name, db, pool, saver: saverOn(name, pool) };
}

export function memorySaver(): BaseCheckpointSaver {
  return new MemorySaver();
}

/** The raw floors: named prepared statements, like our saver uses. */
export interface RawFloor {
  db: Database;
  pool: pg.Pool;
  select1(): Promise<unknown>;
  insert(i: number): Promise<unknown>;
}

export async function createRawFloor(adminUrl: string): Promise<RawFloor> {
  const db = await createDatabase(adminUrl, "raw");
  const pool = db.pool({ max: 10 });
  await pool.query("CREATE TABLE floor_insert (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, k text NOT NULL, v bytea)");
  const payload = Buffer.alloc(200, 7);
  return {
    db,
    pool,
    select1: () => pool.query({ name: "floor_select1", text: "SELECT 1" }),
    insert: (i) => pool.query({ name: "floor_insert", text: "INSERT INTO floor_insert (k, v) VALUES ($1, $2)", values: [`row-${i}`, payload] }),
  };
}

/**
 * The values to send a captured put statement (src/saver/sql/put.ts's $1-$21) again, one call a new checkpoint
 * (bench/cost.ts, bench/profile.ts): on a thread of its own (`replay-<label>`), a fresh id whose parent is the
 * previous call's (none the first time), and fresh versions for every blob row, element rows' included, so each
 * call's rows are all new.
 */
export function putReplayValues(captured: readonly unknown[], label: string): () => unknown[] {
  let parent: string | null = null;
  let version = 0;
  return () => {
    const values = [...captured];
    const id = uuid6(-1);
    values[0] = `replay-${label}`;
    values[2] = id;
    values[3] = parent;
    values[9] = (values[9] as string[]).map(() => String(++version).padStart(12, "0"));
    parent = id;
    return values;
  };
}
