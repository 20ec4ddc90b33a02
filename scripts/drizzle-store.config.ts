import { defineConfig } from "drizzle-kit";

// The store's migrations (`npm run generate` runs this after drizzle.config.ts): its own
// numbered files in migrations/store/, from src/store/schema.ts alone, so saver and store
// migrations never share numbers (see src/store/migrations.ts).
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/store/schema.ts",
  out: "./migrations/store",
});
