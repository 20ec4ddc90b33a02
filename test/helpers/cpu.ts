/**
 * CPU time spent by `fn`, for tests that bound the cost of pure computation (a decoder that must
 * fail fast on hostile input). Unlike wall time, it does not grow when other processes compete for
 * the cores, so a bound on it holds on a busy CI machine. It counts this whole process (vitest's
 * default `forks` pool runs one test file per process), garbage collection included.
 *
 * @example
 * ```ts
 * const { ms } = await cpuTime(() => serde.loadsTyped("msgpack", hostile).catch(() => {}));
 * expect(ms).toBeLessThan(100);
 * ```
 */
export async function cpuTime<T>(fn: () => Promise<T> | T): Promise<{ result: T; ms: number }> {
  const before = process.cpuUsage();
  const result = await fn();
  const { user, system } = process.cpuUsage(before);
  return { result, ms: (user + system) / 1000 };
}
