import { defineConfig } from "drizzle-kit";

// `npm run generate` turns src/db/schema.ts into a new numbered SQL file in migrations/.
// Released migration files are never edited; a test checks that generating again yields nothing.
// The SQL is written without a schema prefix: `migrate()` applies it inside the target schema.
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/schema.ts",
  out: "./migrations",
});
