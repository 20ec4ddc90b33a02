/**
 * Strict mode (`new MsgpackSerializer({ strict: true })`): besides refusing
 * every value the extension table does not cover (the codec does that), a
 * subclass of a supported class, or a Buffer, is refused rather than written
 * as its base class, since it would not come back as it went in.
 */
import { ERROR_CTORS, EncodeFailure, TYPED_CTORS, TYPED_KINDS, describe, typedKind, type InstanceKind } from "./ext.js";

/** Strict mode: refuse a subclass (or a Buffer) that would come back as its base class. */
export function checkExact(object: object, kind: InstanceKind): void {
  const proto = Object.getPrototypeOf(object) as unknown;
  let expected: unknown;
  switch (kind) {
    case "date":
      expected = Date.prototype;
      break;
    case "bytes":
      expected = Uint8Array.prototype;
      break;
    case "typed": {
      const code = typedKind(object as ArrayBufferView | ArrayBuffer)!;
      expected = code === TYPED_KINDS.ArrayBuffer ? ArrayBuffer.prototype : TYPED_CTORS[code]?.prototype;
      break;
    }
    case "map":
      expected = Map.prototype;
      break;
    case "set":
      expected = Set.prototype;
      break;
    case "regexp":
      expected = RegExp.prototype;
      break;
    case "error": {
      const name = (object as { constructor?: { name?: unknown } }).constructor?.name;
      expected = typeof name === "string" && Object.prototype.hasOwnProperty.call(ERROR_CTORS, name) ? ERROR_CTORS[name]?.prototype : undefined;
      break;
    }
    default:
      return; // LangGraph and LangChain objects, DeltaSnapshot, Document: checked by their own rules.
  }
  if (proto !== expected) {
    throw new EncodeFailure(object, `${describe(object)}, which would come back as its base class (strict mode)`, false, false);
  }
}
