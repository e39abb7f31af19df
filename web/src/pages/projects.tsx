/**
 * The projects the token may read, each with the one Unix user its jobs run as on every node and
 * where that came from (GET /projects, as `gpuctl projects` prints it; docs/security.md, "One
 * identity per project on every node"). Reloaded on job changes: a project's first attempt is when
 * it gets a uid of the pool.
 */
import { api } from '../api.ts';
import { ErrorBox, Loading, Section } from '../components.tsx';
import { useResource } from '../live.ts';
import { href } from '../router.ts';
import type { ProjectIdentity } from '../types.ts';

type Identity = NonNullable<ProjectIdentity['identity']>;

const SOURCE: Record<Identity['source'], { word: string; title: string }> = {
  pool: { word: 'pool', title: "given once, on the project's first attempt, from the control plane's pool (GPUPLANE_JOB_USERS)" },
  admin: { word: 'set by an admin', title: 'gpuctl project set-user: an existing account, the same uid on every node' },
};

const NONE_YET = "none yet: its first attempt gets a uid of the plane's pool";

export function ProjectsPage() {
  const projects = useResource(() => api.projects(), [], { topics: ['jobs'] });
  if (projects.error) return <ErrorBox error={projects.error} />;
  if (!projects.data) return <Loading what="projects" />;
  return (
    <Section title="Projects and their job users">
      <p class="muted">
        Each project's jobs run as one Unix user on every node, so its re-queued attempts, a gang's ranks, its evaluations and a sweep's trials read what the others wrote on shared storage. The control plane gives a project a uid of its pool (<code>GPUPLANE_JOB_USERS</code>) once, on its first attempt; an admin may map it to an existing account instead with <code>gpuctl project set-user PROJECT --user NAME | --uid N [--group NAME | --gid N]</code>, and <code>--clear</code> goes back to the pool. A node runs a project only where its <code>--job-users</code> allows that uid.
      </p>
      {projects.data.length === 0 ? (
        <p class="muted" data-empty>
          No projects yet.
        </p>
      ) : (
        <table class="jobs projects">
          <thead>
            <tr>
              <th>project</th>
              <th>job user</th>
              <th>uid</th>
              <th>gid</th>
              <th>from</th>
            </tr>
          </thead>
          <tbody>
            {projects.data.map(({ project, identity }) => (
              <tr key={project} data-project={project}>
                <td>
                  <a href={href(['experiments'], { project })} title="its experiments">
                    {project}
                  </a>
                </td>
                {identity ? (
                  <>
                    <td data-col="user">{identity.user}</td>
                    <td data-col="uid">{identity.uid}</td>
                    <td data-col="gid">{identity.gid}</td>
                    <td data-col="source" title={SOURCE[identity.source].title}>
                      {SOURCE[identity.source].word}
                    </td>
                  </>
                ) : (
                  <td colSpan={4} data-col="source" class="muted">
                    {NONE_YET}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}
