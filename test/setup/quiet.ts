/**
 * Vitest setup file (every test file): keeps out of the output the one warning that tests provoke
 * on purpose by the dozen, so that a warning which is printed is worth reading.
 *
 * `LANGGRAPH_CHECKPOINT_PG_ELEMENTS` is the saver's once-per-serializer notice that lists are stored
 * whole (src/saver/elements.ts). Tests use such serializers on purpose (unbound or noisy encryption,
 * hostile serdes); elements.test.ts and elements-trust.test.ts assert the notice through the
 * `'warning'` event, which still fires: only Node's default printing of it is skipped. Every
 * other warning (deprecations, listener leaks, ...) is printed as usual.
 */
const EXPECTED = new Set(["LANGGRAPH_CHECKPOINT_PG_ELEMENTS"]);

const printers = process.listeners("warning");
process.removeAllListeners("warning");
process.on("warning", (warning: Error & { code?: string }) => {
  if (warning.code !== undefined && EXPECTED.has(warning.code)) return;
  for (const print of printers) print.call(process, warning);
});
