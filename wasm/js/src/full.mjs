// The main entry's API (`callpost`), over the full wasm module: the
// receiver's API (signing.mjs), the batching client (client.mjs) and the
// webhook sender (webhooks.mjs), with the core's stringify, traitName and
// parseTimestamp.
import { makeSigning } from './signing.mjs';
import { makeBatching } from './client.mjs';
import { makeWebhooks } from './webhooks.mjs';

export function makeApi(wasm, platform) {
  const signing = makeSigning(wasm, platform);
  const {
    sign, verify, verifyRequest, Signer, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal,
    signStandard, verifyStandard, STANDARD_TOLERANCE_MS,
  } = signing.api;
  const { Batcher, Client, error, DEFAULTS, json } = makeBatching(wasm, platform);
  const { Webhooks, Delivery } = makeWebhooks(wasm, platform, { error, signing, json });
  const { stringify } = json;

  // toJson first refuses what JSON.stringify would silently change; then
  // the core re-stringifies and verifies (verifyJson, an export of the full
  // module only). The verify-only entry's verifyParsed (receive.mjs)
  // re-stringifies with JSON.stringify.
  function verifyParsed(value, signature, secrets) {
    return wasm.verifyJson(json.toJson(value), signature, secrets);
  }

  const api = {
    stringify, sign, verify, verifyParsed, verifyRequest, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal,
    signStandard, verifyStandard, STANDARD_TOLERANCE_MS,
    traitName: wasm.traitName, parseTimestamp: wasm.parseTimestamp,
    Webhooks, Client, Signer, Delivery, Batcher, DEFAULTS, VERSION: wasm.version(), USER_AGENT: wasm.userAgent(),
    MAX_MESSAGE_BYTES: DEFAULTS.maxMessageBytes, init: async () => api,
  };
  return api;
}
