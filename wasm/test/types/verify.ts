// The `callpost/verify` entry, typed: a receiver's whole use of it.
import verifyApi, { init, verifyRequest, Signer, type Secret } from 'callpost/verify';

const secrets: Secret[] = ['new-secret', new Uint8Array([1, 2])];
const body = '{"type":"track"}';
const signature: string = new Signer('new-secret').signString(body);
const fromHeaders: boolean = verifyRequest(body, { 'x-signature': signature }, secrets);

async function main(): Promise<void> {
  const api = await init();
  const same: boolean = api.verify(body, signature, secrets) === verifyApi.verify(body, signature, secrets);
  console.log(fromHeaders, same, api.sign('s', body).length);
}
void main();

// The Standard Webhooks scheme, from the same entry.
import { signStandard, verifyStandard, Receiver, STANDARD_TOLERANCE_MS, type StandardHeaders } from 'callpost/verify';

const whsec = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const headers: StandardHeaders = signStandard('msg-1', body, [whsec], new Date());
const verified: { id: string; timestamp: number } = verifyStandard(body, headers, whsec, {
  toleranceMs: STANDARD_TOLERANCE_MS,
});
const standardOnly = new Receiver(null, { standardSecrets: [whsec], toleranceMs: 60_000 });
console.log(verified.id, standardOnly.toleranceMs);
