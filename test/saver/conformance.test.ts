/**
 * The official conformance suite, in full, plus its opt-in delta-channel suite,
 * with the default options (lists stored by their elements, stored.ts).
 */
import { conformance } from "../helpers/conformance.js";

conformance("langgraph-checkpoint-pg", "conformance");
