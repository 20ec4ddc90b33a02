import { defineConfig } from "vitest/config";
import base from "../vitest.config.js";

// Only for the child run started by test/saver/conformance-linear.long.test.ts: the base
// config with just the linear-mode suite (replaced, not merged, so the child
// never runs the file that started it).
export default defineConfig({ ...base, test: { ...base.test, include: ["test/linear/*.suite.ts"] } });
