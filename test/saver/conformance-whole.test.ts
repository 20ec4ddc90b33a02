/**
 * The official conformance suite's differential (test/helpers/conformance.ts) with every value
 * stored whole (`elementStorage: false`); conformance.test.ts runs the whole suite with the
 * default, values stored by content (stored.ts). What differs is how values are written and
 * read, which the differential's writes and reads cover; `list`'s arguments build the same
 * statements either way.
 */
import { conformanceDifferential } from "../helpers/conformance.js";

conformanceDifferential("langgraph-checkpoint-pg (whole values)", "conformance_whole", { elementStorage: false });
