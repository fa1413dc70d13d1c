// The web-standard receiver (Workers, Deno, Bun, Hono): what a user writes.
import { Receiver, webhookHandler } from 'callpost/verify';

export const SECRET = 'whsec-runtimes';
const receiver = new Receiver(SECRET);

export default webhookHandler(receiver, (hook) => Response.json({ processed: hook.ids }));
