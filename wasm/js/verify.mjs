// Node (import 'callpost/verify'): the same module as require('callpost/verify').
import api from './verify.cjs';

export const {
  sign, verify, verifyRequest, verifyParsed, receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal, Signer,
  signStandard, verifyStandard, STANDARD_TOLERANCE_MS, init,
} = api;
export default api;
