import { useEffect, useState } from 'preact/hooks';

/** A hash route: `#/jobs/job-1?attempt=2` is path ['jobs', 'job-1'] and its query. */
export interface Route {
  path: string[];
  query: URLSearchParams;
}

export function parseHash(hash: string): Route {
  const [p, q] = hash.replace(/^#\/?/, '').split('?', 2);
  return { path: p.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(q ?? '') };
}

/** The link to a page: `href(['jobs', id])`, `href(['experiments'], { project: 'p' })`. */
export function href(path: string[], query: Record<string, string | undefined> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') q.set(k, v);
  const s = q.toString();
  return `#/${path.map(encodeURIComponent).join('/')}${s ? `?${s}` : ''}`;
}

/** The current route; re-renders on every hash change (the server serves one index.html for all). */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(location.hash));
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}
