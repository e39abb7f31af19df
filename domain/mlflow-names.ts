/**
 * MLflow's experiment names for GPUPlane's projects and experiments: `project/experiment`; a name
 * without `/` is an experiment of project `default`. MLflow's default experiment, id "0", is
 * project `default`'s experiment `Default`. (api/mlflow/ serves them; an attempt's
 * MLFLOW_EXPERIMENT_NAME is one.)
 */
export const DEFAULT_PROJECT = 'default';
/** MLflow's default experiment: its id and name. */
export const DEFAULT_EXPERIMENT_ID = '0';
export const DEFAULT_EXPERIMENT_NAME = 'Default';

/** The project and experiment an MLflow experiment name stands for. */
export function namesOf(mlflowName: string): { project: string; experiment: string } {
  const slash = mlflowName.indexOf('/');
  if (slash <= 0) return { project: DEFAULT_PROJECT, experiment: mlflowName };
  return { project: mlflowName.slice(0, slash), experiment: mlflowName.slice(slash + 1) };
}

/** The MLflow name of a project's experiment (namesOf's inverse). */
export function mlflowName(project: string, experiment: string): string {
  return project === DEFAULT_PROJECT ? experiment : `${project}/${experiment}`;
}

/** Whether a project's experiment is MLflow's default experiment (id "0"). */
export const isDefaultExperiment = (project: string | null, experiment: string | null) => project === DEFAULT_PROJECT && experiment === DEFAULT_EXPERIMENT_NAME;

/** MLflow's id of an experiment: "0" for project default's `Default`, else its GPUPlane id ('' for none). */
export const mlflowExperimentId = (id: string | null, project: string | null, experiment: string | null) => (isDefaultExperiment(project, experiment) ? DEFAULT_EXPERIMENT_ID : (id ?? ''));
