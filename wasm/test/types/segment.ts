// The `callpost/segment` entry, typed as analytics-node code uses it.
import { Analytics, SEGMENT_DEFAULTS, type Context, type AnalyticsSettings } from 'callpost/segment';
import { Client, type CallpostError } from 'callpost/client';

const settings: AnalyticsSettings = { writeKey: 'wk', host: 'https://relay.example', flushAt: SEGMENT_DEFAULTS.flushAt, disable: true };
const analytics = new Analytics(settings);
analytics.on('error', (e) => console.error(e.code, e.ctx.event));
analytics.on('http_response', (r) => console.log(r.status, r.headers['content-type']));
analytics.on('track', (ctx: Context) => console.log(ctx.id, ctx.failedDelivery()?.reason));
analytics.identify({ userId: 'u1', traits: { plan: 'pro' } });
analytics.page({ anonymousId: 'a1', category: 'Docs', name: 'Node' });
analytics.alias({ userId: 'u1', previousId: 'a1' });
// Integer ids: a bigint of any size, or a safe-integer number.
analytics.group({ userId: 157963456373623802n, groupId: 42, messageId: 10n ** 30n });
// @ts-expect-error: a track needs an event name.
analytics.track({ userId: 'u1' });

const client = new Client({ writeKey: 'wk', disable: true });
client.track({ userId: 'u1', event: 'E' }, (err: CallpostError | undefined, message) => console.log(err?.code, message.messageId));

async function main(): Promise<void> {
  await new Promise((resolve) => analytics.track({ userId: 'u1', event: 'Signed Up', timestamp: new Date() }, resolve));
  await analytics.closeAndFlush({ timeout: 1000 });
  await client.close();
}
void main();
