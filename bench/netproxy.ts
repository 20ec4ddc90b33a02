/**
 * The network of the 1 ms sections: a delaying, counting proxy (proxy.ts) in a
 * child process of its own.
 *
 * Why a child process: the delay is a timer per chunk, and in the benchmark's
 * process a timer fires only when the event loop is free, i.e. after whatever
 * LangGraph or the serializer is doing at that moment (a few ms under 32 parallel
 * graph runs). The delay would then grow with the client's own CPU load, and grow
 * more for the saver that does more work per round trip, which is what is being
 * compared. In its own process the proxy only forwards bytes, so the added
 * latency is the one asked for (plus timer granularity: the SELECT 1 reported
 * next to every 1 ms figure shows the real round trip).
 *
 *   parent: const net = await DelayProxy.start(host, port, { requestDelayMs: 1 });
 *           pool = new pg.Pool({ connectionString: net.url(dbUrl) }); ... await net.close();
 */
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { CountingProxy, type ProxyCounts } from "./proxy.js";

export interface DelayOptions {
  /** Added to every client -> server chunk (ms): the "1 ms away". */
  requestDelayMs: number;
  /** Added to every server -> client chunk (ms); 0 unless asked for. */
  responseDelayMs?: number;
}

type ToChild = { id: number; cmd: "snapshot" | "reset" | "close" };
type FromChild = { ready: number } | { id: number; counts?: ProxyCounts };

/** Parent-side handle of the proxy child. */
export class DelayProxy {
  #next = 0;
  readonly #pending = new Map<number, (m: FromChild) => void>();

  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
  ) {
    child.on("message", (m: FromChild) => {
      if ("id" in m) {
        this.#pending.get(m.id)?.(m);
        this.#pending.delete(m.id);
      }
    });
  }

  static async start(targetHost: string, targetPort: number, options: DelayOptions): Promise<DelayProxy> {
    // fork() inherits the parent's execArgv (--import tsx), so the child loads this .ts file itself.
    const child = fork(fileURLToPath(import.meta.url), ["--child", targetHost, String(targetPort), String(options.requestDelayMs), String(options.responseDelayMs ?? 0)], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const port = await new Promise<number>((resolve, reject) => {
      child.once("error", reject);
      child.once("exit", (code) => reject(new Error(`the proxy child exited with code ${String(code)} before listening`)));
      child.once("message", (m: FromChild) => ("ready" in m ? resolve(m.ready) : reject(new Error("unexpected message from the proxy child"))));
    });
    child.removeAllListeners("exit");
    child.removeAllListeners("error");
    child.on("error", () => {});
    return new DelayProxy(child, port);
  }

  #ask(cmd: ToChild["cmd"]): Promise<FromChild> {
    const id = ++this.#next;
    return new Promise((resolve) => {
      this.#pending.set(id, resolve);
      this.child.send({ id, cmd } satisfies ToChild);
    });
  }

  async snapshot(): Promise<ProxyCounts> {
    const m = await this.#ask("snapshot");
    if (!("counts" in m) || !m.counts) throw new Error("the proxy child sent no counts");
    return m.counts;
  }

  async reset(): Promise<void> {
    await this.#ask("reset");
  }

  /** Rewrites a postgres:// URL to go through this proxy. */
  url(databaseUrl: string): string {
    const u = new URL(databaseUrl);
    u.hostname = "127.0.0.1";
    u.port = String(this.port);
    return u.toString();
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    await Promise.race([this.#ask("close"), exited]);
    await exited;
  }
}

async function child(): Promise<void> {
  const [, , , host, port, up, down] = process.argv;
  const proxy = await CountingProxy.start(host!, Number(port), { requestDelayMs: Number(up), responseDelayMs: Number(down) });
  process.on("message", async (m: ToChild) => {
    if (m.cmd === "snapshot") process.send!({ id: m.id, counts: proxy.snapshot() } satisfies FromChild);
    else if (m.cmd === "reset") {
      proxy.reset();
      process.send!({ id: m.id } satisfies FromChild);
    } else if (m.cmd === "close") {
      await proxy.close();
      process.send!({ id: m.id } satisfies FromChild, () => process.exit(0));
    }
  });
  // The parent gone (killed, crashed): do not linger.
  process.on("disconnect", () => process.exit(0));
  process.send!({ ready: proxy.port } satisfies FromChild);
}

if (process.argv[2] === "--child") void child();
