/**
 * Server-sent events read with fetch, not EventSource: EventSource cannot send an Authorization
 * header, and the token must never travel in a URL. The parser follows the HTML spec's event
 * stream format (lines end in CRLF, LF or CR; `:` starts a comment; `data` lines join with LF;
 * a blank line dispatches; an event with no data is not dispatched).
 */

export interface StreamEvent {
  event: string;
  data: string;
}

/** Turns text, in pieces cut anywhere, into events. */
export class EventStreamParser {
  private buf = '';
  private event = '';
  private data: string[] = [];
  /** The last piece ended in CR: an LF starting the next one belongs to that line end. */
  private skipLf = false;

  constructor(
    private readonly onEvent: (e: StreamEvent) => void,
    /** The server's `retry:` (ms): how long to wait before reconnecting. */
    private readonly onRetry: (ms: number) => void = () => undefined,
  ) {}

  push(text: string): void {
    if (this.skipLf && text.startsWith('\n')) text = text.slice(1);
    this.skipLf = false;
    this.buf += text;
    for (;;) {
      const end = this.buf.search(/[\r\n]/);
      if (end < 0) return;
      const line = this.buf.slice(0, end);
      let next = end + 1;
      if (this.buf[end] === '\r') {
        if (next === this.buf.length) this.skipLf = true;
        else if (this.buf[next] === '\n') next++;
      }
      this.buf = this.buf.slice(next);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0) this.onEvent({ event: this.event || 'message', data: this.data.join('\n') });
      this.event = '';
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'retry' && /^\d+$/.test(value)) this.onRetry(Number(value));
  }
}

/** Reads a response body of events until it ends; a network error or an abort rejects. */
export async function readEventStream(body: ReadableStream<Uint8Array>, parser: EventStreamParser): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      parser.push(decoder.decode(value, { stream: true }));
    }
  } finally {
    reader.releaseLock();
  }
}
