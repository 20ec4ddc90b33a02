import { configDefaults, defineConfig } from "vitest/config";
import base from "../vitest.config.js";

// The first half of `npm run test:long` (README "Tests"; the second is the partitioned re-run): the files
// named *.long.test.ts, which `npm test` leaves out because each takes minutes for what it adds (a packed
// and installed package, thousand-step threads, a race left to scheduling). Name a new file so to put it here.
export default defineConfig({ ...base, test: { ...base.test, include: ["test/**/*.long.test.ts"], exclude: configDefaults.exclude } });
