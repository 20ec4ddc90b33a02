/**
 * The store's time arithmetic, written with IMMUTABLE functions only: the same instant as
 * `timestamptz + interval` for intervals of seconds (no days or months, which a time zone's change
 * would stretch). Citus refuses a STABLE function over a column in an UPDATE, and any in ON CONFLICT
 * ... DO UPDATE SET (docs/scaling-out.md, "On Citus"); `timestamptz + interval` is STABLE, the same
 * in UTC's `timestamp` is not.
 */

/** SQL: now plus `minutes` (an SQL expression, float8) minutes. */
export const minutesFromNow = (minutes: string): string =>
  `((pg_catalog.now() AT TIME ZONE 'UTC') + pg_catalog.make_interval(secs => ${minutes} * 60)) AT TIME ZONE 'UTC'`;

/** SQL: one millisecond after `at` (an SQL expression, timestamptz). */
export const afterMillisecond = (at: string): string => `((${at} AT TIME ZONE 'UTC') + interval '1 millisecond') AT TIME ZONE 'UTC'`;
