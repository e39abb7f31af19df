/**
 * What a Run holds until the API takes it: log() and event() append raw slots (three a point
 * group or an event) at no cost; cut() turns them into batches and events, in the order they
 * were logged, each with the Idempotency-Key it keeps across retries.
 */
import { FLUSH_AT_POINTS, type Batch, type Encoder } from './encode.ts';

export interface EventItem {
  kind: 'event';
  body: string;
  key: string;
  /** Epoch ms of the event() call: kept in the offline file. */
  ts?: number;
}
export type Item = Batch | EventItem;

export class Outbox {
  /** Points logged and not yet stored or refused, cut or not. */
  pending = 0;
  pendingEvents = 0;
  /** Cut and waiting to be sent, oldest first. */
  items: Item[] = [];

  private raw: unknown[] = []; // data, step, ts, ...; an event fills three slots at an eventAt index
  private eventAt: number[] = [];
  private kickAt = FLUSH_AT_POINTS;

  constructor(private readonly encoder: Encoder) {}

  /** Appends n points of data at step; true when so many wait that a send should start now. */
  addPoints(data: Record<string, unknown>, n: number, step: number): boolean {
    this.pending += n;
    this.raw.push({ ...data }, step, Date.now());
    if (this.pending < this.kickAt) return false;
    this.kickAt = Infinity;
    return true;
  }

  addEvent(item: EventItem): void {
    this.pendingEvents++;
    this.eventAt.push(this.raw.length);
    this.raw.push(item, null, null);
  }

  /** Cuts the raw slots into items; returns how many points the encoder refused (no longer pending). */
  cut(): number {
    if (this.raw.length === 0) return 0;
    const raw = this.raw;
    const at = this.eventAt;
    this.raw = [];
    this.eventAt = [];
    this.kickAt = this.pending + FLUSH_AT_POINTS;
    let invalid = 0;
    let start = 0;
    for (const i of at) {
      if (i > start) invalid += this.encoder.encode(raw.slice(start, i), this.items);
      this.items.push(raw[i] as EventItem);
      start = i + 3;
    }
    if (start < raw.length) invalid += this.encoder.encode(start === 0 ? raw : raw.slice(start), this.items);
    this.pending -= invalid;
    return invalid;
  }

  /** The oldest item was stored, or refused for good: it leaves. */
  shift(): void {
    const item = this.items.shift();
    if (item?.kind === 'metrics') this.pending -= item.points;
    else if (item) this.pendingEvents--;
  }

  /** Nothing logged waits, cut or not. */
  get empty(): boolean {
    return this.raw.length === 0 && this.items.length === 0;
  }

  /** Drops every point and event that waits; returns how many points were pending. */
  clear(): number {
    const lost = this.pending;
    this.raw = [];
    this.eventAt = [];
    this.items = [];
    this.pending = 0;
    return lost;
  }
}
