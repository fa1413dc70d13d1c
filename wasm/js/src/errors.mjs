// The errors every part of the API throws: a JS error for a core error
// code, named and typed as the core's registry says (CallpostError and its
// subclasses; the misuse classes are TypeErrors).

// `error(code, message)` for one wasm module.
export function makeError(wasm) {
  return function error(code, message) {
    const [name, isTypeError] = wasm.errorClass(code) ?? ['CallpostError', false];
    const err = isTypeError ? new TypeError(message) : new Error(message);
    err.name = name;
    err.code = code;
    return err;
  };
}
