/** Where the saver's statements run: the quoted names every statement of src/saver/sql/ is written with. */
import { quoteIdent } from "../../validate.js";
import { deleteLockName } from "./gate.js";

/** `s` the quoted schema, `lock` the thread deletion lock's name as an SQL literal (tombstones.ts). */
export interface Place {
  s: string;
  lock: string;
}

/** Where the statements of `schema` run. */
export function placeOf(schema: string): Place {
  return { s: quoteIdent(schema), lock: `'${deleteLockName(schema).replace(/'/g, "''")}'` };
}
