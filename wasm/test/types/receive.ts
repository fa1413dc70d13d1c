// The receiver API type-checks as a user writes it (tsc, node16 and bundler resolution).
import { receive, Receiver, SeenIds, webhookHandler, nodeMiddleware, refusal, type Webhook } from 'callpost/verify';

const secret = 'whsec';
const call: { type: string } = receive('{"type":"track"}', { 'x-signature': 'a'.repeat(40) }, [secret, 'old']);
const receiver = new Receiver(secret, { seen: new SeenIds(100), allowFirstEventSignature: false });
const handle: (r: Request) => Promise<Response> = webhookHandler(receiver, async (hook: Webhook) => {
  for (const c of hook.calls) void c;
  return Response.json({ n: hook.ids.length });
});
const middleware = nodeMiddleware({ secrets: secret, seen: (id: string) => id === 'x' });
const answer: { status: number; body: { error: string } } = refusal(new Error('x'));
void call; void handle; void middleware; void answer;
