/**
 * A tiny TCP proxy (node:net) between a pg pool and Postgres that counts round trips.
 *
 * What is counted, and why it is deterministic: the proxy parses the frontend
 * (client -> server) side of the Postgres wire protocol and counts the messages
 * that make the server answer and wait for the client:
 *   - `S` Sync: ends one extended-protocol exchange (Parse/Bind/Describe/Execute/Sync;
 *     node-postgres sends one Sync per parameterized `query()`), answered by ReadyForQuery;
 *   - `Q` Query: one simple-protocol query (e.g. `BEGIN`, `COMMIT`), answered by ReadyForQuery.
 * Each of these is one request/response round trip when the client waits for the
 * answer before sending the next one (node-postgres always does). The number
 * depends only on which statements the code issues, not on timing or on how
 * TCP splits the bytes: noise cannot fake it.
 *
 * As a cross-check it also counts "turns" (bursts of client bytes after the server
 * last spoke). For sequential operations turns == Sync + Query; under concurrency
 * (several connections) turns are per connection and still add up, but pipelined
 * clients would show fewer turns than messages.
 *
 * With `requestDelayMs` / `responseDelayMs` it also plays a network: every chunk
 * the client sends (resp. the server sends) is passed on that much later, in
 * order, so each round trip costs at least that much more, as between an
 * application and a database in another host or zone. (A timer per chunk: the
 * added delay is at least the value given, typically 0.1-0.5 ms more; the
 * benchmark reports the SELECT 1 it measures.) The benchmark runs a delaying
 * proxy in a child process (netproxy.ts), so its timers are not held up by the
 * benchmark's own event loop.
 */
import net from "node:net";

export interface ProxyCounts {
  /** Sync + Query messages: the round-trip count reported. */
  roundTrips: number;
  syncs: number;
  queries: number;
  /** Parse messages (statement (re)preparations). */
  parses: number;
  turns: number;
  connections: number;
  bytesUp: number;
  bytesDown: number;
}

const zero = (): ProxyCounts => ({ roundTrips: 0, syncs: 0, queries: 0, parses: 0, turns: 0, connections: 0, bytesUp: 0, bytesDown: 0 });

/** Incremental parser of the client side of the protocol: reports each message type. */
class FrontendParser {
  #startup = true;
  #skip = 0;
  #header: Buffer = Buffer.alloc(0);

  constructor(private readonly onMessage: (type: string) => void) {}

  feed(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length) {
      if (this.#skip > 0) {
        const n = Math.min(this.#skip, chunk.length - off);
        this.#skip -= n;
        off += n;
        continue;
      }
      // Startup-phase messages have no type byte: Int32 length, Int32 code.
      const need = this.#startup ? 8 : 5;
      const take = Math.min(need - this.#header.length, chunk.length - off);
      this.#header = Buffer.concat([this.#header, chunk.subarray(off, off + take)]);
      off += take;
      if (this.#header.length < need) break;
      if (this.#startup) {
        const len = this.#header.readInt32BE(0);
        const code = this.#header.readInt32BE(4);
        this.#skip = len - 8;
        // SSLRequest / GSSENCRequest are followed by the real StartupMessage.
        if (code !== 80877103 && code !== 80877104) this.#startup = false;
        this.onMessage(code === 80877102 ? "<cancel>" : "<startup>");
      } else {
        const type = String.fromCharCode(this.#header[0]!);
        this.#skip = this.#header.readInt32BE(1) - 4;
        this.onMessage(type);
      }
      this.#header = Buffer.alloc(0);
    }
  }
}

export class CountingProxy {
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  #counts: ProxyCounts = zero();
  port = 0;

  private constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
    private readonly responseDelayMs: number,
    private readonly requestDelayMs: number,
  ) {
    this.#server = net.createServer((client) => this.#handle(client));
  }

  static async start(targetHost: string, targetPort: number, options: { responseDelayMs?: number; requestDelayMs?: number } = {}): Promise<CountingProxy> {
    const p = new CountingProxy(targetHost, targetPort, options.responseDelayMs ?? 0, options.requestDelayMs ?? 0);
    await new Promise<void>((resolve, reject) => {
      p.#server.once("error", reject);
      p.#server.listen(0, "127.0.0.1", () => resolve());
    });
    p.port = (p.#server.address() as net.AddressInfo).port;
    return p;
  }

  /** A copy of the counters since the last reset. */
  snapshot(): ProxyCounts {
    return { ...this.#counts };
  }

  reset(): void {
    this.#counts = zero();
  }

  /** Rewrites a postgres:// URL to go through this proxy. */
  url(databaseUrl: string): string {
    const u = new URL(databaseUrl);
    u.hostname = "127.0.0.1";
    u.port = String(this.port);
    return u.toString();
  }

  #handle(client: net.Socket): void {
    const upstream = net.connect(this.targetPort, this.targetHost);
    this.#sockets.add(client);
    this.#sockets.add(upstream);
    this.#counts.connections++;
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    let serverSpoke = true;
    const parser = new FrontendParser((type) => {
      const c = this.#counts;
      if (type === "S") c.syncs++;
      else if (type === "Q") c.queries++;
      else if (type === "P") c.parses++;
      if (type === "S" || type === "Q") c.roundTrips++;
    });
    const up = this.requestDelayMs;
    client.on("data", (chunk: Buffer) => {
      this.#counts.bytesUp += chunk.length;
      if (serverSpoke) {
        this.#counts.turns++;
        serverSpoke = false;
      }
      parser.feed(chunk);
      if (up > 0) setTimeout(() => upstream.writable && upstream.write(chunk), up);
      else upstream.write(chunk);
    });
    const delay = this.responseDelayMs;
    upstream.on("data", (chunk: Buffer) => {
      this.#counts.bytesDown += chunk.length;
      serverSpoke = true;
      // Timers of equal duration fire in the order they were set: chunks stay in order.
      if (delay > 0) setTimeout(() => client.writable && client.write(chunk), delay);
      else client.write(chunk);
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.#sockets.delete(client);
      this.#sockets.delete(upstream);
    };
    client.on("close", close);
    upstream.on("close", close);
    client.on("error", close);
    upstream.on("error", close);
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
