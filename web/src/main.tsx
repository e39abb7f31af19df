/**
 * The console's shell: a header, and the page the hash names. Adding a page is one component
 * in pages/ and one line in `pageFor`.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { useLiveStatus } from './live.ts';
import { CheckpointsPage } from './pages/checkpoints.tsx';
import { ClusterPage } from './pages/cluster.tsx';
import { ExperimentPage } from './pages/experiment.tsx';
import { JobPage } from './pages/job.tsx';
import { QueuePage } from './pages/queue.tsx';
import { RunPage } from './pages/run.tsx';
import { useRoute, type Route } from './router.ts';

const NAV = [
  ['cluster', 'Cluster'],
  ['queue', 'Queue'],
  ['experiments', 'Experiments'],
  ['checkpoints', 'Checkpoints'],
] as const;

function pageFor(r: Route) {
  const [page = 'cluster', id] = r.path;
  switch (page) {
    case 'cluster':
      return <ClusterPage />;
    case 'queue':
      return <QueuePage query={r.query} />;
    case 'jobs':
      return id ? <JobPage id={id} /> : <QueuePage query={r.query} />;
    case 'runs':
      return id ? <RunPage id={id} /> : <ExperimentPage query={r.query} />;
    case 'experiments':
      return <ExperimentPage query={r.query} />;
    case 'checkpoints':
      return <CheckpointsPage query={r.query} />;
    default:
      return <p class="error">No page {page}.</p>;
  }
}

function App() {
  const route = useRoute();
  const live = useLiveStatus();
  // "12s ago" grows while nothing changes: re-render every 10 s (charts are not redrawn by it).
  const [, setTick] = useState(0);
  useEffect(() => {
    const t = setInterval(() => setTick((n) => n + 1), 10_000);
    return () => clearInterval(t);
  }, []);
  const current = route.path[0] ?? 'cluster';
  return (
    <>
      <header>
        <a class="brand" href="#/cluster">
          GPUPlane
        </a>
        <nav>
          {NAV.map(([p, label]) => (
            <a key={p} href={`#/${p}`} class={current === p || (p === 'queue' && current === 'jobs') || (p === 'experiments' && current === 'runs') ? 'active' : ''}>
              {label}
            </a>
          ))}
        </nav>
        <span class={`live ${live ? 'up' : 'down'}`} data-live={live ? 'up' : 'down'} title="live updates (server-sent events)">
          {live ? '● live' : '○ reconnecting'}
        </span>
      </header>
      <main key={route.path.join('/')}>{pageFor(route)}</main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
