/**
 * TLS: a private server that accepts TLS connections only (`hostssl` lines
 * only in pg_hba.conf, a fresh self-signed certificate). The saver's `ssl`
 * options (pool option or URL parameters) reach `pg`; without TLS, or with a
 * certificate it cannot verify, the connection is refused with a clear error.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DatabaseOperationError, MigrationError, PostgresSaver } from "../../src/index.js";
import { makeCheckpoint, meta } from "../helpers/checkpoints.js";
import { addressGraph, tid } from "../helpers/graphs.js";
import { missingProgram, skippable } from "../helpers/requirements.js";
import { hasOpenssl, PgServer } from "../helpers/server.js";

// Skips, saying why, without openssl; fails instead under CI=true (.ci/run installs it).
const missing = missingProgram("openssl", hasOpenssl(), "apt-get install openssl");

describe.skipIf(missing)(skippable("TLS", missing), () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await PgServer.start({ ssl: true, label: "tls" });
  });
  afterAll(async () => {
    await server?.destroy();
  });

  /** True when the session runs over TLS, as the server sees it. */
  async function sessionIsTls(pool: pg.Pool): Promise<{ ssl: boolean; version: string }> {
    const { rows } = await pool.query("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
    return rows[0];
  }

  it("the server refuses connections without TLS", async () => {
    const client = new pg.Client({ connectionString: server.url, ssl: false });
    const error = await client.connect().then(
      () => undefined,
      (e: { code?: string; message: string }) => e,
    );
    await client.end().catch(() => {});
    expect(error?.code).toBe("28000");
    expect(error?.message).toMatch(/no encryption/);
  });

  it("fromConnString passes the pool's ssl options to pg: setup, put, a graph run, all over TLS with the certificate verified", async () => {
    const saver = PostgresSaver.fromConnString(server.url, { pool: { ssl: { ca: server.ca, rejectUnauthorized: true }, max: 2 } });
    try {
      await saver.setup();
      const cp = makeCheckpoint({ x: "over tls" });
      const config = await saver.put({ configurable: { thread_id: "tls-1", checkpoint_ns: "" } }, cp, meta(-1), cp.channel_versions);
      expect((await saver.getTuple(config))?.checkpoint.channel_values).toEqual({ x: "over tls" });
      expect(await addressGraph(saver).invoke({}, { configurable: { thread_id: tid("tls-graph") } })).toEqual({
        name: "pavaneeshwar",
        address: "Hyderabad residency",
      });
    } finally {
      await saver.end();
    }
    // The same options on a pool the caller owns: every session is TLS.
    const pool = new pg.Pool({ connectionString: server.url, ssl: { ca: server.ca } });
    try {
      const saver2 = new PostgresSaver(pool);
      expect((await saver2.getTuple({ configurable: { thread_id: "tls-1" } }))?.checkpoint.channel_values).toEqual({ x: "over tls" });
      const session = await sessionIsTls(pool);
      expect(session.ssl).toBe(true);
      expect(session.version).toMatch(/^TLSv1\.[23]$/);
    } finally {
      await pool.end();
    }
  });

  it("URL parameters work too: sslmode=verify-full with sslrootcert", async () => {
    const url = `${server.url}?sslmode=verify-full&sslrootcert=${encodeURIComponent(server.caFile!)}`;
    const saver = PostgresSaver.fromConnString(url);
    try {
      expect((await saver.getTuple({ configurable: { thread_id: "tls-1" } }))?.checkpoint.channel_values).toEqual({ x: "over tls" });
    } finally {
      await saver.end();
    }
  });

  it("a certificate that cannot be verified is refused, as a typed error", async () => {
    // Default verification (no CA given): the self-signed certificate is not trusted.
    const saver = PostgresSaver.fromConnString(server.url, { pool: { ssl: true, connectionTimeoutMillis: 5_000 } });
    try {
      const error = await saver.getTuple({ configurable: { thread_id: "tls-1" } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(DatabaseOperationError);
      expect(String((error as Error).message)).toMatch(/self[- ]signed certificate/);
      const setup = await saver.setup().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(setup).toBeInstanceOf(MigrationError);
    } finally {
      await saver.end();
    }
  });
});
