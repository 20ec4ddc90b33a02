/**
 * External programs some test files need (pgbouncer, openssl). When one is missing the file's
 * tests skip and say why: the reason goes into the suite's name, which the skip summary at the end
 * of the run prints (test/setup/skip-reporter.ts). Under `CI=true` a missing program fails the
 * file instead: CI installs them (.ci/run), so a skip there would hide a broken setup.
 *
 * @example
 * ```ts
 * const missing = missingProgram("openssl", hasOpenssl(), "apt-get install openssl");
 * describe.skipIf(missing)(skippable("TLS", missing), () => { ... });
 * ```
 */

/** Undefined when `found`; otherwise why the tests skip. Throws under CI=true. */
export function missingProgram(program: string, found: boolean, install: string): string | undefined {
  if (found) return undefined;
  const why = `${program} is not installed (${install}; .ci/run installs it)`;
  if (onCi()) throw new Error(`CI=true: ${why}. CI must run these tests, not skip them.`);
  console.warn(`[skip] ${why}`);
  return why;
}

/** A suite name that carries the skip reason, when there is one. */
export const skippable = (name: string, missing: string | undefined): string => (missing ? `${name} [skipped: ${missing}]` : name);

/** CI=true (or 1, as some CI services set it). */
const onCi = () => !["", "0", "false"].includes((process.env.CI ?? "").toLowerCase());
