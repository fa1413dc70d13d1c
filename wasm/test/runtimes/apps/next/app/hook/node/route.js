// A Next.js App Router route handler on the Node runtime: what a user writes.
import { Receiver, webhookHandler } from 'callpost/verify';

export const runtime = 'nodejs';
export const POST = webhookHandler(new Receiver('whsec-runtimes'), (hook) => Response.json({ processed: hook.ids }));
