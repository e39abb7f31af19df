/**
 * Each project's share of the cluster: its guaranteed cards (per pool, where set), the cards it
 * holds and how many of them are borrowed, what it has queued, its recent usage and fair-share
 * factor (GET /quotas; the rule is docs/architecture.md's). Updated live: any job or node change
 * may move these numbers.
 */
import { api } from '../api.ts';
import { ErrorBox, Loading, Section } from '../components.tsx';
import { useResource } from '../live.ts';
import type { QuotaLine } from '../types.ts';

/** Where the project stands against its quota, in a word: the order the scheduler serves it in. */
function standing(l: QuotaLine): { word: string; title: string } {
  const quota = l.gpus ?? 0;
  if (l.borrowed > 0) return { word: 'borrowing', title: `holds ${l.borrowed} card${l.borrowed === 1 ? '' : 's'} beyond its quota: idle cards lent by other projects, the first taken back` };
  if (l.in_use < quota) return { word: 'within quota', title: 'its jobs within the quota are served before those of any project over its own' };
  return { word: 'at quota', title: 'more of its jobs wait behind projects within their quota, then by fair share' };
}

export function QuotasPage() {
  const quotas = useResource(() => api.quotas(), [], { topics: ['jobs', 'nodes'] });
  if (quotas.error) return <ErrorBox error={quotas.error} />;
  if (!quotas.data) return <Loading what="quotas" />;
  const { quotas: lines, half_life_h } = quotas.data;
  return (
    <Section title="Quotas and fair share">
      <p class="muted">
        A project within its quota is served before any project over its own; idle cards are lent beyond a quota. Between projects on the same side, the higher fair-share factor goes first (recent card-hours, halved every {half_life_h} h). <code>gpuctl quota set PROJECT --gpus N</code> sets one (admins).
      </p>
      {lines.length === 0 ? (
        <p class="muted" data-empty>
          No quotas set and no project holds or wants cards.
        </p>
      ) : (
        <table class="jobs quotas">
          <thead>
            <tr>
              <th>project</th>
              <th>pool</th>
              <th title="guaranteed cards">quota</th>
              <th>in use</th>
              <th title="cards in use beyond the quota">borrowed</th>
              <th>queued</th>
              <th title={`card-hours, each weighed by 2^(-age / ${half_life_h} h)`}>recent usage</th>
              <th title="2^(-U), U its part of all recent usage: 1 none, 0.5 all of it">fair share</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {lines.map((l) => {
              const s = standing(l);
              return (
                <tr key={`${l.project}/${l.pool ?? ''}`} data-quota={l.project} data-pool={l.pool ?? ''}>
                  <td>{l.project}</td>
                  <td>{l.pool ?? <span class="muted">whole cluster</span>}</td>
                  <td data-col="gpus">{l.gpus ?? <span class="muted">none</span>}</td>
                  <td data-col="in_use">{l.in_use}</td>
                  <td data-col="borrowed">{l.borrowed}</td>
                  <td data-col="queued">
                    {l.queued_jobs} job{l.queued_jobs === 1 ? '' : 's'} · {l.queued_cards} card{l.queued_cards === 1 ? '' : 's'}
                  </td>
                  <td data-col="usage">{l.usage_card_hours.toFixed(2)} card-h</td>
                  <td data-col="fair_share">{l.fair_share.toFixed(3)}</td>
                  <td>
                    <span class={`badge standing-${s.word.replace(/ /g, '-')}`} title={s.title}>
                      {s.word}
                    </span>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </Section>
  );
}
