/**
 * Terminal output for the CLI and the demo: aligned tables, colour only on a
 * TTY (and never with NO_COLOR), progress lines only on a TTY.
 */
import { toJsonSafe } from "../ops/json-safe.js";

export interface Style {
  bold(s: string): string;
  dim(s: string): string;
  green(s: string): string;
  yellow(s: string): string;
  red(s: string): string;
  cyan(s: string): string;
}

const ansi = (open: number, close: number) => (s: string) => `\u001b[${open}m${s}\u001b[${close}m`;
const plain = (s: string) => s;

/** Colours for a stream: real ones on a TTY without NO_COLOR, identity functions otherwise. */
export function styleFor(stream: NodeJS.WriteStream): Style {
  const on = stream.isTTY === true && !process.env.NO_COLOR && process.env.TERM !== "dumb";
  if (!on) return { bold: plain, dim: plain, green: plain, yellow: plain, red: plain, cyan: plain };
  return { bold: ansi(1, 22), dim: ansi(2, 22), green: ansi(32, 39), yellow: ansi(33, 39), red: ansi(31, 39), cyan: ansi(36, 39) };
}

// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;
const width = (s: string) => [...s.replace(ANSI, "")].length;

export interface Column {
  header: string;
  align?: "left" | "right";
}

/**
 * Rows under headers, columns padded to the widest cell, two spaces apart.
 * Cells may carry colour codes (they do not count towards the width).
 */
export function table(columns: (string | Column)[], rows: string[][], style: Style, indent = ""): string {
  const cols = columns.map((c) => (typeof c === "string" ? { header: c } : c));
  const widths = cols.map((c, i) => Math.max(width(c.header), ...rows.map((r) => width(r[i] ?? ""))));
  const line = (cells: string[], header: boolean) =>
    indent +
    cells
      .map((cell, i) => {
        const pad = " ".repeat(widths[i]! - width(cell));
        const last = i === cells.length - 1;
        if (cols[i]!.align === "right") return pad + cell;
        return last ? cell : cell + pad;
      })
      .map((c) => (header ? style.dim(c) : c))
      .join("  ")
      .replace(/\s+$/, "");
  return [line(cols.map((c) => c.header), true), ...rows.map((r) => line(r, false))].join("\n");
}

/** Two aligned columns: `label  value`. */
export function fields(pairs: [string, string][], style: Style, indent = ""): string {
  const w = Math.max(...pairs.map(([k]) => width(k)));
  return pairs.map(([k, v]) => `${indent}${style.dim(k.padEnd(w))}  ${v}`).join("\n");
}

/** A decoded value as one line of JSON (tagged for what JSON cannot say), cut at `max` characters. */
export function valueText(value: unknown, max = Number.POSITIVE_INFINITY): string {
  const text = value === undefined ? "" : JSON.stringify(toJsonSafe(value)) ?? "";
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export function formatBytes(n: number): string {
  if (n < 1000) return `${n} B`;
  const units = ["kB", "MB", "GB", "TB"];
  let v = n;
  let u = -1;
  do {
    v /= 1000;
    u++;
  } while (v >= 1000 && u < units.length - 1);
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[u]}`;
}

/** `2026-09-14T15:56:59.435773+00:00` → `2026-09-14 15:56:59` (UTC). */
export function formatTime(iso: string): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toISOString().replace("T", " ").slice(0, 19);
}

/** A progress line on stderr, redrawn at most every 100 ms, only when stderr is a TTY. */
export function progress(stream: NodeJS.WriteStream = process.stderr): { update(text: string): void; done(): void } {
  if (!stream.isTTY) return { update() {}, done() {} };
  let last = 0;
  let shown = false;
  return {
    update(text) {
      const now = Date.now();
      if (now - last < 100) return;
      last = now;
      shown = true;
      stream.write(`\r\u001b[K${text}`);
    },
    done() {
      if (shown) stream.write("\r\u001b[K");
    },
  };
}
