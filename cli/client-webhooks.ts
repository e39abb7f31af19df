/** Client calls for webhooks, over the same request() as the rest of the CLI; the tests use them too. */
import type { Static } from '@sinclair/typebox';
import type { CreateWebhookBody } from '../api/schemas/webhooks.ts';
import type { CreatedWebhookJson, WebhookJson, WebhookTestJson } from './api-types.ts';
import type { GpuplaneClient } from './client.ts';

export function addWebhook(c: GpuplaneClient, body: Static<typeof CreateWebhookBody>): Promise<CreatedWebhookJson> {
  return c.request('POST', '/webhooks', body);
}

export async function listWebhooks(c: GpuplaneClient): Promise<WebhookJson[]> {
  return (await c.request<{ webhooks: WebhookJson[] }>('GET', '/webhooks')).webhooks;
}

export function removeWebhook(c: GpuplaneClient, id: string): Promise<null> {
  return c.request('DELETE', `/webhooks/${encodeURIComponent(id)}`);
}

export function testWebhook(c: GpuplaneClient, id: string): Promise<WebhookTestJson> {
  return c.request('POST', `/webhooks/${encodeURIComponent(id)}/test`, {});
}
