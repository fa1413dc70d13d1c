// Node (import): the same module as require('callpost').
import api from './index.cjs';

export const {
  stringify, sign, verify, verifyParsed, verifyRequest, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal,
  signStandard, verifyStandard, STANDARD_TOLERANCE_MS,
  traitName, parseTimestamp,
  Webhooks, Client, Signer, Delivery, Batcher, DEFAULTS, VERSION, USER_AGENT, MAX_MESSAGE_BYTES, init,
} = api;
export default api;
