// Checks the test infrastructure itself: a real server, one isolated database per caller.
import { afterAll, describe, expect, it } from "vitest";
import { createTestDatabase, withTestDatabase } from "./helpers/db.js";

describe("test harness", () => {
  const db = withTestDatabase("harness");

  it("connects to a real PostgreSQL", async () => {
    const { rows } = await db.pool.query<{ version: string }>("SELECT version()");
    expect(rows[0]?.version).toMatch(/^PostgreSQL \d+/);
  });

  describe("two databases from createTestDatabase", () => {
    const created: Awaited<ReturnType<typeof createTestDatabase>>[] = [];
    afterAll(async () => {
      await Promise.all(created.map((d) => d.drop()));
    });

    it("are distinct and isolated", async () => {
      const [a, b] = await Promise.all([createTestDatabase("iso a"), createTestDatabase("iso b")]);
      created.push(a, b);
      expect(a.url).not.toBe(b.url);

      const names = await Promise.all([a, b].map((d) => d.pool.query<{ db: string }>("SELECT current_database() AS db")));
      expect(names[0]?.rows[0]?.db).not.toBe(names[1]?.rows[0]?.db);

      await a.pool.query("CREATE TABLE only_in_a (id int)");
      const exists = "SELECT to_regclass('public.only_in_a') IS NOT NULL AS present";
      expect((await a.pool.query<{ present: boolean }>(exists)).rows[0]?.present).toBe(true);
      expect((await b.pool.query<{ present: boolean }>(exists)).rows[0]?.present).toBe(false);
    });

    it("drop() removes the database", async () => {
      const d = await createTestDatabase("dropped");
      await d.drop();
      const { rows } = await db.pool.query("SELECT 1 FROM pg_database WHERE datname = $1", [new URL(d.url).pathname.slice(1)]);
      expect(rows).toHaveLength(0);
    });
  });
});
