/**
 * The console's shell: a header, and the page the hash names, or the sign-in form while there
 * is no token. Adding a page is one component in pages/ and one line in `pageFor`.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { initAuth, useAuth } from './auth.ts';
import { useLiveStatus } from './live.ts';
import { CheckpointsPage } from './pages/checkpoints.tsx';
import { ClusterPage } from './pages/cluster.tsx';
import { ExperimentPage } from './pages/experiment.tsx';
import { JobPage } from './pages/job.tsx';
import { MlflowExperimentPage } from './pages/mlflow-experiment.tsx';
import { ModelsPage } from './pages/models.tsx';
import { ProjectsPage } from './pages/projects.tsx';
import { QueuePage } from './pages/queue.tsx';
import { RunPage } from './pages/run.tsx';
import { SweepPage } from './pages/sweep.tsx';
import { SweepsPage } from './pages/sweeps.tsx';
import { QuotasPage } from './pages/quotas.tsx';
import { useRoute, type Route } from './router.ts';
import { SignedInAs, SignIn } from './sign-in.tsx';

const NAV = [
  ['cluster', 'Cluster'],
  ['queue', 'Queue'],
  ['experiments', 'Experiments'],
  ['sweeps', 'Sweeps'],
  ['checkpoints', 'Checkpoints'],
  ['models', 'Models'],
  ['quotas', 'Quotas'],
  ['projects', 'Projects'],
] as const;

function pageFor(r: Route) {
  const [page = 'cluster', id] = r.path;
  switch (page) {
    case 'cluster':
      return <ClusterPage focus={r.query.get('node')} />;
    case 'queue':
      return <QueuePage query={r.query} />;
    case 'jobs':
      return id ? <JobPage id={id} /> : <QueuePage query={r.query} />;
    case 'runs':
      return id ? <RunPage id={id} /> : <ExperimentPage query={r.query} />;
    case 'experiments':
      // MLflow's run links (`/mlflow/#/experiments/<id>/runs/<run>`, which the MLflow client prints,
      // are sent here by the API keeping their fragment): the run's page.
      // Its "View experiment at" link (`#/experiments/<id>`): the experiment's page, by its MLflow id.
      if (r.path[2] === 'runs' && r.path[3]) return <RunPage id={r.path[3]} />;
      return id && !r.query.has('project') ? <MlflowExperimentPage id={id} /> : <ExperimentPage query={r.query} />;
    case 'sweeps':
      return id ? <SweepPage id={id} /> : <SweepsPage query={r.query} />;
    case 'checkpoints':
      return <CheckpointsPage query={r.query} />;
    case 'models':
      return <ModelsPage />;
    case 'quotas':
      return <QuotasPage />;
    case 'projects':
      return <ProjectsPage />;
    default:
      return <p class="error">No page {page}.</p>;
  }
}

function LiveStatus() {
  const live = useLiveStatus();
  return (
    <span class={`live ${live ? 'up' : 'down'}`} data-live={live ? 'up' : 'down'} title="live updates (server-sent events)">
      {live ? '● live' : '○ reconnecting'}
    </span>
  );
}

function App() {
  const auth = useAuth();
  const route = useRoute();
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
          {auth.signedIn &&
            NAV.map(([p, label]) => (
              <a key={p} href={`#/${p}`} class={current === p || (p === 'queue' && current === 'jobs') || (p === 'experiments' && current === 'runs') ? 'active' : ''}>
                {label}
              </a>
            ))}
        </nav>
        {auth.signedIn && <LiveStatus />}
        {auth.signedIn && <SignedInAs key={auth.generation} />}
      </header>
      {/* Keyed by the token too: nothing fetched with the previous one stays on screen. */}
      <main key={`${auth.generation}/${route.path.join('/')}`}>{auth.signedIn ? pageFor(route) : <SignIn notice={auth.notice} />}</main>
    </>
  );
}

// Before anything fetches: a ?token= leaves the address bar here.
initAuth();
render(<App />, document.getElementById('app')!);
