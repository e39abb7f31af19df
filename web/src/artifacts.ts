/**
 * Which of a run's artifacts the console shows inline, and how: images by their extension (shown
 * through <img> only, so an SVG's scripts never run), small text files as text. Pure, so the
 * rules are unit tested.
 */
import { DEFAULT_EXPERIMENT_ID, mlflowExperimentId } from '../../domain/mlflow-names.ts';
import type { Run } from './types.ts';

/** Text files up to this size are shown in the page; larger ones are only downloaded. */
export const TEXT_MAX_BYTES = 256 * 1024;
/** Images up to this size are shown in the page. */
export const IMAGE_MAX_BYTES = 8 * 1024 * 1024;
/** The first this many previewable files of a folder are shown at once; the others on a click. */
export const OPEN_PREVIEWS = 20;

const IMAGE_TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  svg: 'image/svg+xml',
};
const TEXT_EXTENSIONS = new Set(['txt', 'json', 'yaml', 'yml', 'md', 'log', 'csv', 'tsv']);

export type Preview = { kind: 'image'; type: string } | { kind: 'text' } | { kind: 'too-large'; max: number } | null;

/** How a file named `name` of `size` bytes is shown: as an image (of that type), as text, too large to show, or not at all. */
export function previewOf(name: string, size: number): Preview {
  const dot = name.lastIndexOf('.');
  const ext = dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
  const type = IMAGE_TYPES[ext];
  if (type) return size <= IMAGE_MAX_BYTES ? { kind: 'image', type } : { kind: 'too-large', max: IMAGE_MAX_BYTES };
  if (TEXT_EXTENSIONS.has(ext)) return size <= TEXT_MAX_BYTES ? { kind: 'text' } : { kind: 'too-large', max: TEXT_MAX_BYTES };
  return null;
}

/**
 * The root of a run's artifacts on MLflow's endpoints: `<experiment id>/<run id>/artifacts`, the
 * experiment's id as MLflow knows it (api/mlflow/wire.ts). Only the run id decides what is read
 * and who may; a run in no experiment takes "0".
 */
export const artifactRoot = (r: Pick<Run, 'id' | 'experiment_id' | 'project' | 'experiment'>) =>
  `${mlflowExperimentId(r.experiment_id, r.project, r.experiment) || DEFAULT_EXPERIMENT_ID}/${r.id}/artifacts`;
