// Browsers and bundlers (no "node" or "workerd" condition): init() first,
// as the types for those conditions say.
import init from 'callpost/verify';
import initFull from 'callpost';

const { receive, webhookHandler } = await init();
const full = await initFull();
const call: unknown = receive('{}', new Headers(), 'whsec');
void webhookHandler; void full.Webhooks; void call;
export {};
