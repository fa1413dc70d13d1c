// A typed usage example; `npm run typecheck` runs tsc --noEmit over it.
import callpost, { Client, Webhooks, Delivery, DEFAULTS, verify, stringify, type DeliveryResult, type CallpostError, type HttpRequest } from 'callpost';

const hooks = new Webhooks({ endpoints: ['https://a.example/', { url: 'https://b.example/', headers: { 'X-Team': '1' } }], sharedSecret: 's' });
const req: HttpRequest = hooks.request({ type: 'track', userId: 'u', event: 'E', properties: { n: 1 } });
const ok: boolean = verify(req.body, req.headers[0][1], ['s', new Uint8Array([1])]);
const text: string = stringify({ a: [1, 'x', null] });

async function main(): Promise<void> {
  try {
    const r: DeliveryResult = await hooks.deliver({ type: 'identify', userId: 'u', traits: { plan: 'pro' } });
    console.log(r.endpoint, r.log.length);
  } catch (e) {
    console.log((e as CallpostError).code);
  }
  const c = new Client({ writeKey: 'wk', flushAt: 10, onError: (err, messages) => console.log(err.code, messages.length) });
  const id: string = c.track({ userId: 'u', event: 'Signed Up', timestamp: new Date() });
  await c.close({ timeoutMs: 1000 });
  const api = await callpost.init();
  const d = api.Webhooks === Webhooks ? hooks.delivery('{"type":"track","userId":"u","event":"e"}', { nowMs: 0, seed: 1 }) : undefined;
  const attempt = d?.pollRequest(0);
  if (d && attempt) d.handleResponse(10, attempt.attempt, { status: 503, retryAfter: '5' });
  const t: number | undefined = attempt ? attempt.deadlineMs : d?.pollTimeout();
  const restored: Delivery | undefined = d ? Delivery.fromJSON(d.toJSON(), hooks) : undefined;
  const sentAt: number | undefined = restored?.log[0]?.sentAt;
  const flushAt: number = DEFAULTS.flushAt;
  console.log(ok, text, id, t, sentAt, flushAt, hooks.mode);
}
void main();

// Filters and batches, typed.
const shaped = new Webhooks({
  endpoints: ['https://a.example/'],
  filters: [
    { action: 'drop', if: { field: 'type', in: ['page', 'screen'] } },
    { action: 'drop_fields', fields: ['traits.email'], if: { not: { field: 'properties.total', gte: 100 } } },
  ],
  batch: { maxCalls: 500 },
  mapping: {
    text: { '@template': '{{userId}} did {{event}}' },
    email: { '@default': [{ '@path': 'traits.email' }, 'unknown'] },
    vip: { '@if': { exists: { '@path': 'traits.plan' }, then: true, else: false } },
    items: { '@arrayPath': ['properties.products', { sku: { '@path': 'sku' } }] },
    raw: { '@literal': { '@path': 'as written' } },
    fixed: [1, 'two', null, { nested: { '@path': '$.messageId' } }],
  },
});
const packed = shaped.pack([{ type: 'track', userId: 'u', event: 'e' }]);
const firstId: string | undefined = packed.batches[0]?.id;
async function batches(): Promise<number | undefined> {
  const results: DeliveryResult[] = await shaped.deliverBatch([{ type: 'track', userId: 'u', event: 'e' }]);
  console.log(firstId);
  return results[0]?.filteredBy;
}
void batches;
