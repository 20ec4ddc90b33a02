/**
 * The official conformance suite's differential (test/helpers/conformance.ts) with lists stored
 * by their elements under an encrypting serializer: each element sealed for its own row, hashes
 * keyed, refs values authenticated (issue 26). What differs from the default is how values are
 * written and read, which the differential's writes and reads cover; metadata stays plaintext, so
 * `list`'s arguments build the same statements (conformance.test.ts runs all of them).
 */
import { randomBytes } from "node:crypto";
import { EncryptedSerializer } from "../../src/index.js";
import { conformanceDifferential } from "../helpers/conformance.js";

const serde = new EncryptedSerializer({ keys: { k1: randomBytes(32) }, current: "k1" });
conformanceDifferential("langgraph-checkpoint-pg (encrypted elements)", "conformance_encrypted_elements", { elementStorage: true, serde });
