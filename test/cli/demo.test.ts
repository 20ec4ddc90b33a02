/**
 * `npm run demo` on Postgres (DATABASE_URL): the article's graph on thread
 * "12345", live. Its output must show the article's three checkpoints (sources,
 * steps, writes, blobs). On the embedded database, the demo's default (a second
 * run continues the thread from the state the first one stored):
 * demo-embedded.long.test.ts (`npm run test:long`).
 */
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { withTestDatabase } from "../helpers/db.js";
import { collect, expectArticle, parseDemo, ROOT } from "../helpers/cli.js";

const db = withTestDatabase("demo");

describe("demo on Postgres (DATABASE_URL), through npm run demo", () => {
  it("stores the article's checkpoints in the given schema", async () => {
    const url = new URL(db.url);
    const r = await collect(
      spawn("npm", ["run", "--silent", "demo", "--", "--json", "--schema", "demo"], { cwd: ROOT, env: { ...process.env, DATABASE_URL: url.toString() } }),
    );
    const d = parseDemo(r);
    expect(d.database).toMatch(/^postgres:\/\//);
    // The password never shows (it may equal the user name, as in a test container: look for it in place).
    if (url.password) {
      expect(r.stdout).not.toContain(`:${url.password}@`);
      expect(d.database).toContain(":***@");
    }
    expect(d.continued).toBe(false);
    expectArticle(d);
    const { rows } = await db.pool.query("SELECT count(*)::int AS n FROM demo.checkpoints WHERE thread_id = '12345'");
    expect(rows[0].n).toBe(3);
  });
});
