// JS values into JSON text and call bytes for the core, for the sending
// side (client.mjs, webhooks.mjs) and the full API's stringify and
// verifyParsed: toJson refuses what JSON.stringify would silently change.

// `error`: errors.mjs's, for the same wasm module. `maxDepth`: the core's
// nesting limit (DEFAULTS.maxDepth).
export function makeJson(wasm, error, maxDepth) {
  const encoder = new TextEncoder();
  const decoder = new TextDecoder('utf-8', { fatal: true });

  // JSON text for a JS value, refusing what JSON.stringify would silently
  // change: NaN/Infinity (→ null), BigInt, functions and symbols (dropped or
  // thrown), undefined in arrays (→ null). An undefined object property is
  // left out, as JSON.stringify does: it is JavaScript's "absent".
  // isPlain is true when JSON.stringify(v) keeps every value as it is: the
  // fast path, a plain walk with no replacer (a replacer makes
  // JSON.stringify several times slower). Anything else takes the replacer
  // path below, which finds the offending value and names its path.
  const MAX_DEPTH = maxDepth;
  function isPlain(v, depth) {
    switch (typeof v) {
      case 'string':
      case 'boolean':
        return true;
      case 'number':
        return Number.isFinite(v);
      case 'object': {
        if (v === null) return true;
        // Cycles end here too, and the replacer path then reports them.
        if (depth >= MAX_DEPTH || typeof v.toJSON === 'function') return false;
        if (Array.isArray(v)) {
          for (let i = 0; i < v.length; i++) {
            if (v[i] === undefined || !isPlain(v[i], depth + 1)) return false;
          }
          return true;
        }
        for (const k in v) {
          if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
          const x = v[k];
          if (x !== undefined && !isPlain(x, depth + 1)) return false;
        }
        return true;
      }
      default:
        return false;
    }
  }

  function toJson(value) {
    if (isPlain(value, 0)) return JSON.stringify(value);
    if (value === undefined) throw error('not_json', 'value at $ is not JSON: undefined');
    const paths = new Map();
    let root = true;
    function replacer(key, v) {
      const base = root ? '$' : paths.get(this) ?? '$';
      const path = root ? '$' : Array.isArray(this) ? `${base}[${key}]` : `${base}.${key}`;
      root = false;
      switch (typeof v) {
        case 'number':
          if (!Number.isFinite(v)) throw error('non_finite_number', `number at ${path} is NaN or infinite, which JSON cannot represent`);
          return v;
        case 'bigint':
        case 'function':
        case 'symbol':
          throw error('not_json', `value at ${path} is not JSON: ${typeof v}`);
        case 'undefined':
          if (Array.isArray(this)) throw error('not_json', `value at ${path} is not JSON: undefined`);
          return v;
        case 'object':
          if (v !== null) paths.set(v, path);
          return v;
        default:
          return v;
      }
    }
    try {
      return JSON.stringify(value, replacer);
    } catch (e) {
      if (e && e.code) throw e;
      if (e instanceof RangeError) throw error('too_deep', `value nests deeper than ${MAX_DEPTH} levels`);
      if (e instanceof TypeError && /circular|cyclic/i.test(e.message)) throw error('cyclic_value', 'value contains itself');
      throw e;
    }
  }

  function textOf(v, what) {
    if (typeof v === 'string') return v;
    if (v instanceof Uint8Array) {
      try {
        return decoder.decode(v);
      } catch {
        // The core's code for the same input (it reads bytes as UTF-8 too).
        throw error('invalid_unicode', `${what} bytes are not valid UTF-8`);
      }
    }
    throw error('invalid_argument', `${what} must be a string or Uint8Array`);
  }

  // A call object's JSON text. A number or bigint in an id field is first
  // the core's id string (wasm.idString): the JSON text would lose a
  // bigint (it has no JSON form) and an unsafe integer's digits
  // (JSON.stringify writes the nearest double's). The caller's object is
  // left as it is.
  const ID_FIELDS = wasm.idFields();
  function callJson(call) {
    let out = call;
    if (call !== null && typeof call === 'object') {
      for (const k of ID_FIELDS) {
        const v = call[k];
        if (typeof v !== 'number' && typeof v !== 'bigint') continue;
        if (out === call) out = { ...call };
        out[k] = wasm.idString(k, v);
      }
    }
    return toJson(out);
  }

  // A call's JSON text, as the caller gave it (string or bytes) or from a
  // JS value.
  function callText(call) {
    if (call instanceof Uint8Array || typeof call === 'string') return call;
    return callJson(call);
  }

  // A call for the core: its UTF-8 JSON bytes (see call.rs for why bytes).
  function callBytes(call) {
    if (call instanceof Uint8Array) return call;
    return encoder.encode(typeof call === 'string' ? call : callJson(call));
  }

  // The canonical JSON text of a value (the core's canonicalize).
  function stringify(value) {
    return wasm.canonicalize(toJson(value));
  }

  return { toJson, textOf, callJson, callText, callBytes, stringify };
}
