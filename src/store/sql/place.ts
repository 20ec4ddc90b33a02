/** Where the store's statements run: the quoted names every statement of src/store/sql/ is written with. */
import { quoteIdent } from "../../validate.js";

/** Where the statements run: `s`, the store's schema, quoted. */
export interface Place {
  s: string;
}

/** And `ext`, the schema of pgvector's type and operators, quoted (known once the store is ready). */
export interface VectorPlace extends Place {
  ext: string;
}

export const placeOf = (schema: string): Place => ({ s: quoteIdent(schema) });
export const vectorPlaceOf = (schema: string, extSchema: string): VectorPlace => ({ s: quoteIdent(schema), ext: quoteIdent(extSchema) });
