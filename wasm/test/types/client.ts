// The `callpost/client` entry, typed: an app that only sends calls.
import clientApi, { init, Client, stringify, type ClientOptions, type CallpostError } from 'callpost/client';

const options: ClientOptions = { writeKey: 'wk', flushAt: 10, onError: (err: CallpostError, messages) => console.log(err.code, messages.length) };
const c = new Client(options);
const id: string = c.track({ userId: 'u', event: 'Signed Up', properties: { plan: 'pro' } });
c.alias({ userId: 157963456373623802n, previousId: 42, messageId: 2n ** 64n });

async function main(): Promise<void> {
  const api = await init();
  const same: boolean = api.Client === clientApi.Client;
  await c.close({ timeoutMs: 1000 });
  console.log(id, same, stringify({ a: 1 }), api.MAX_MESSAGE_BYTES);
}
void main();
