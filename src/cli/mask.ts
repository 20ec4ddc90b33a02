/**
 * Database URLs in output: which one is in use, and never its password.
 */

/** The URL with any password replaced by `***` (also `password=` in key/value strings). */
export function maskUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    for (const key of [...u.searchParams.keys()]) if (/^password$/i.test(key)) u.searchParams.set(key, "***");
    return u.toString().replace(/%2A%2A%2A/g, "***");
  } catch {
    return url.replace(/(password\s*=\s*)('[^']*'|\S+)/gi, "$1***").replace(/\/\/([^:/@]*):[^@]*@/, "//$1:***@");
  }
}

/** Remove the URL's password from any text we print (a driver may echo its input). */
export function scrub(text: string, url: string | undefined): string {
  if (!url) return text;
  let password: string | undefined;
  try {
    const u = new URL(url);
    password = decodeURIComponent(u.password) || u.searchParams.get("password") || undefined;
  } catch {
    password = /password\s*=\s*(?:'([^']*)'|(\S+))/i.exec(url)?.slice(1).find((x) => x !== undefined);
  }
  const masked = maskUrl(url);
  // The masked URL itself stays readable (a password equal to the user or database name is common).
  const parts = text.split(url).join(masked).split(masked);
  return (password && password.length >= 3 ? parts.map((p) => p.split(password).join("***")) : parts).join(masked);
}

/** The URL that will be used, if any: `--database-url`, else none when `--data-dir` is given, else `DATABASE_URL`. */
export function resolveUrl(target: { databaseUrl?: string | undefined; dataDir?: string | undefined }): string | undefined {
  if (target.databaseUrl !== undefined) return target.databaseUrl;
  if (target.dataDir !== undefined) return undefined;
  return process.env.DATABASE_URL || undefined;
}
