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
