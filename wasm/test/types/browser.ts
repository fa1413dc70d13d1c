// Browsers and bundlers (no "node" or "workerd" condition): init() first,
// as the types for those conditions say.
import init from 'callpost/verify';
import initFull from 'callpost';

const { receive, webhookHandler } = await init();
const full = await initFull();
const call: unknown = receive('{}', new Headers(), 'whsec');
void webhookHandler; void full.Webhooks; void call;
export {};

import initSegment, { type Context } from 'callpost/segment';
const { Analytics } = await initSegment();
new Analytics({ writeKey: 'wk', disable: true }).track({ userId: 'u', event: 'E' }, (err: unknown, ctx: Context) => void [err, ctx.id]);
