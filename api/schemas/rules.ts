/**
 * Rules between fields, as JSON Schema: the validator refuses by them and the OpenAPI document
 * carries them, so a request the document calls valid is one the API takes. Each rule's
 * description is its 400's message (api/schema-errors.ts), naming the fields; handlers do not
 * check them again. Several rules on one object go in its `allOf`.
 */

/** A rule: its words and its schema. */
export type Rule = Record<string, unknown> & { description: string };

/** notBoth: a and b are never given together. */
export function notBoth(a: string, b: string, description: string): Rule {
  return { description, not: { required: [a, b] } };
}

/**
 * needs: field is given only with other. Said as a `not` (not field without other), whose one
 * error carries this rule and its words; an if/then's would name only other.
 */
export function needs(field: string, other: string, description = `${field} needs ${other}`): Rule {
  return { description, not: { required: [field], not: { required: [other] } } };
}

/** exactlyOne: one of the fields, never none or two. */
export function exactlyOne(fields: string[], description: string): Rule {
  return { description, oneOf: fields.map((f) => ({ required: [f] })) };
}

/** The cards of a job: gpus (on one node) or gpus_per_node, the same number; a retry's or fork's edit takes either. */
export const GPUS_OR_PER_NODE = notBoth('gpus', 'gpus_per_node', 'give gpus (cards on one node) or gpus_per_node (cards on each of nodes), not both');

/** A gang (nodes above 1) counts its cards per node: gpus, the single-node form, is not with it. */
export const GPUS_SINGLE_NODE: Rule = {
  description: 'gpus is the single-node form: with nodes above 1, give gpus_per_node (cards on each node)',
  not: { required: ['nodes', 'gpus'], properties: { nodes: { type: 'integer', minimum: 2 } } },
};

/** An experiment is named within its project. */
export const EXPERIMENT_NEEDS_PROJECT = needs('experiment', 'project', 'experiment needs a project (an experiment is named within its project)');

/** A job runs in its code snapshot's copy, or in a folder of the node: not both. */
export const CODE_OR_WORKING_DIR = notBoth('code', 'working_dir', 'give code (a snapshot every node unpacks into a working dir of the job\'s own) or working_dir (a folder on the node), not both');
