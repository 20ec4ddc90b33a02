/**
 * A TCP proxy on loopback between a client (a pg pool) and Postgres that can
 * misbehave on demand, to test what the saver does when the network does:
 * - `stall()`: stop forwarding in both directions (bytes and closes are held,
 *   new connections are accepted but go nowhere) - a partition, or a peer that
 *   hangs; `resume()` delivers what was held.
 * - `kill()`: destroy every open connection abruptly (RST to the client, close
 *   to the server) - a dead link or a crashed middlebox.
 * - `switchTo(port)`: send new connections elsewhere (a failover behind a
 *   stable address: a virtual IP, a DNS flip, HAProxy); open ones are left as
 *   they are, held ones stay held.
 * It counts connections, so tests can see reconnects.
 *
 * @example
 * ```ts
 * const proxy = await FaultProxy.start(server.port);
 * const pool = new pg.Pool({ connectionString: proxy.url(server.url) });
 * proxy.stall(); // the next query hangs until a timeout or resume()
 * ```
 */
import net from "node:net";

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  /** Held while stalled: bytes (or end-of-stream) for each direction. */
  toServer: Array<Buffer | null>;
  toClient: Array<Buffer | null>;
  /** Holding this connection's traffic (see `stall()`). */
  stalled: boolean;
  drop(): void;
}

export class FaultProxy {
  readonly #server: net.Server;
  #target: { host: string; port: number };
  readonly #pairs = new Set<Pair>();
  #stalled = false;
  /** Connections accepted since start. */
  connections = 0;

  private constructor(server: net.Server, target: { host: string; port: number }) {
    this.#server = server;
    this.#target = target;
  }

  /** Listen on a free loopback port, forwarding to `port` (on `host`, default 127.0.0.1). */
  static async start(port: number, host = "127.0.0.1"): Promise<FaultProxy> {
    const server = net.createServer();
    const proxy = new FaultProxy(server, { host, port });
    server.on("connection", (socket) => proxy.#accept(socket));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    return proxy;
  }

  get port(): number {
    const address = this.#server.address();
    return typeof address === "object" && address ? address.port : 0;
  }

  /** Connections currently open. */
  get active(): number {
    return this.#pairs.size;
  }

  get stalled(): boolean {
    return this.#stalled;
  }

  /** `url` with its host and port replaced by the proxy's. */
  url(url: string): string {
    const u = new URL(url);
    u.hostname = "127.0.0.1";
    u.port = String(this.port);
    return u.toString();
  }

  /** Stop forwarding anything, in both directions, on every connection (also new ones). */
  stall(): void {
    this.#stalled = true;
    for (const pair of this.#pairs) pair.stalled = true;
  }

  /**
   * Forward new connections to `port` (on `host`, default 127.0.0.1), normally
   * even after `stall()`. Open connections keep their server and their state:
   * stalled ones stay silent until `resume()` or `close()`.
   */
  switchTo(port: number, host = "127.0.0.1"): void {
    this.#target = { host, port };
    this.#stalled = false;
  }

  /** Forward again, delivering everything held while stalled. */
  resume(): void {
    this.#stalled = false;
    for (const pair of this.#pairs) {
      pair.stalled = false;
      flush(pair.toServer, pair.upstream);
      flush(pair.toClient, pair.client);
      // A side that closed while stalled closes the other one now.
      if (pair.client.destroyed || pair.upstream.destroyed) pair.drop();
    }
  }

  /** Destroy every open connection now: the client sees a reset, the server a closed socket. */
  kill(): void {
    for (const pair of this.#pairs) {
      pair.client.resetAndDestroy();
      pair.upstream.destroy();
    }
    this.#pairs.clear();
  }

  /** Kill everything and stop listening. */
  async close(): Promise<void> {
    this.kill();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: net.Socket): void {
    this.connections++;
    const upstream = net.connect(this.#target.port, this.#target.host);
    const drop = () => {
      if (!this.#pairs.delete(pair)) return;
      client.destroy();
      upstream.destroy();
    };
    const pair: Pair = { client, upstream, toServer: [], toClient: [], stalled: this.#stalled, drop };
    this.#pairs.add(pair);
    const forward = (queue: Array<Buffer | null>, to: net.Socket) => (chunk: Buffer | null) => {
      if (pair.stalled || queue.length > 0) queue.push(chunk);
      else if (chunk === null) to.end();
      else to.write(chunk);
    };
    client.on("data", forward(pair.toServer, upstream));
    upstream.on("data", forward(pair.toClient, client));
    client.on("end", () => forward(pair.toServer, upstream)(null));
    upstream.on("end", () => forward(pair.toClient, client)(null));
    // A socket error (reset, refused) closes the pair; nothing else to report.
    client.on("error", drop);
    upstream.on("error", drop);
    client.on("close", () => {
      if (!pair.stalled) drop();
    });
    upstream.on("close", () => {
      if (!pair.stalled) drop();
    });
  }
}

function flush(queue: Array<Buffer | null>, to: net.Socket): void {
  while (queue.length > 0) {
    const chunk = queue.shift()!;
    if (to.destroyed) continue;
    if (chunk === null) to.end();
    else to.write(chunk);
  }
}
