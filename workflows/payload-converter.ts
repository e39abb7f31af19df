/**
 * The workflows' payload converter: the default one, except that a payload it cannot read (an
 * unknown encoding, JSON that does not parse) reads as `undefined` instead of throwing. The SDK
 * decodes a signal's or update's arguments before any handler runs, and a throw there fails
 * every workflow task of the run for good; as `undefined` the handler's own check
 * (message-guards.ts) refuses it. Encoding is the default's, so nothing sent or recorded changes.
 * Bundled into the workflow code (bundleWorkflowCode's payloadConverterPath, workers/control/worker.ts).
 */
import { DefaultPayloadConverter, type Payload, type PayloadConverter } from '@temporalio/common';

class ReadAnythingPayloadConverter implements PayloadConverter {
  private readonly inner = new DefaultPayloadConverter();

  toPayload<T>(value: T): Payload {
    return this.inner.toPayload(value);
  }

  fromPayload<T>(payload: Payload): T {
    try {
      return this.inner.fromPayload<T>(payload);
    } catch {
      return undefined as T;
    }
  }
}

export const payloadConverter = new ReadAnythingPayloadConverter();
