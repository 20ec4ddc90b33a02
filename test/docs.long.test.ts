/**
 * Every page of docs/: its programs (ts) and SQL run as written, in the page's order, on a database of its own
 * (test/helpers/doc-programs.ts). In \`npm run test:long\`: a node process per program, minutes of CPU
 * together; README.md's run in test/readme.test.ts, with the checks of every page's blocks and links.
 */
import { describe, it } from "vitest";
import { pageTitle, runnableBlocks, runPage } from "./helpers/doc-programs.js";
import { docFiles } from "./helpers/readme.js";

describe.concurrent("each page's programs and SQL run as written, in order, on a database of its own", () => {
  for (const file of docFiles().filter((f) => f !== "README.md" && runnableBlocks(f).length > 0)) {
    it(pageTitle(file), () => runPage(file), 600_000);
  }
});
