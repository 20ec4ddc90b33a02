/**
 * Where the store's vector tests run: PGlite with pgvector
 * (@electric-sql/pglite-pgvector) always, and the test server too when it has
 * pgvector (asked once); when it has not, the calling file checks instead what
 * a user of such a server meets: a store with an index refuses to set up,
 * saying the extension is missing, and creates nothing. And a recorder of the
 * statements a store sends, to EXPLAIN the one it ran.
 *
 * @example
 * ```ts
 * const targets = await vectorTargets("vector-index");
 * describe.each(targets)("vector search on %s", (_name, make) => { ... });
 * ```
 */
import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import type { PGliteLike } from "../../src/db/db.js";
import { PostgresStore, VectorExtensionMissingError } from "../../src/index.js";
import { createTestDatabase } from "./db.js";
import { fakeEmbeddings } from "./embeddings.js";
import { recordQuery, recordStatements, type Sent } from "./statements.js";

/** A database for stores (a pool or a PGlite instance), with what it sent, newest last. */
export interface VectorTarget {
  db: pg.Pool | PGliteLike;
  /** Every statement sent through `db`, with its values. */
  sent: Sent[];
  close(): Promise<void>;
}

async function serverHasVector(): Promise<boolean> {
  const client = new pg.Client({ connectionString: inject("pgAdminUrl") });
  await client.connect();
  try {
    return (await client.query("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")).rows.length > 0;
  } finally {
    await client.end();
  }
}


/** PGlite with pgvector, its statements recorded (the instance itself; its query method wrapped). */
function pglite(): VectorTarget {
  const db = new PGlite({ extensions: { vector } });
  const sent: Sent[] = [];
  const query = db.query.bind(db);
  db.query = ((text: string, values?: unknown[], options?: unknown) => {
    recordQuery(sent, text, values);
    return query(text, values, options as never);
  }) as typeof db.query;
  return { db: db as unknown as PGliteLike, sent, close: () => db.close() };
}

/**
 * The targets, named; without pgvector on the server, a skipped suite named
 * with the reason (`label`: the calling file's subject).
 */
export async function vectorTargets(label: string): Promise<[string, () => Promise<VectorTarget>][]> {
  const targets: [string, () => Promise<VectorTarget>][] = [["PGlite", async () => pglite()]];
  if (await serverHasVector()) {
    targets.push([
      "the test server",
      async () => {
        const t = await createTestDatabase(label);
        return { db: t.pool, sent: recordStatements(t.pool), close: () => t.drop() };
      },
    ]);
  } else {
    console.warn(`[pg] ${label} runs on PGlite only: the test server has no pgvector`);
    describe(`${label} on the test server, which has no pgvector`, () => {
      it("a store with an index refuses to set up, saying the extension is missing, and creates nothing", async () => {
        const t = await createTestDatabase(label);
        try {
          const store = new PostgresStore(t.pool, { index: { dims: 3, embed: fakeEmbeddings(3) } });
          await expect(store.setup({ adopt: false })).rejects.toBeInstanceOf(VectorExtensionMissingError);
          expect((await t.pool.query("SELECT count(*)::int AS n FROM pg_tables WHERE tablename LIKE 'store%'")).rows).toEqual([{ n: 0 }]);
        } finally {
          await t.drop();
        }
      });
    });
  }
  return targets;
}
