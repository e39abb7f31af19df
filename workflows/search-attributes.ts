import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Search attributes on job workflows, so the Temporal Web UI can filter by them. */
export const SA_JOB_ID = defineSearchAttributeKey('GpuplaneJobId', SearchAttributeType.KEYWORD);
export const SA_JOB_STATE = defineSearchAttributeKey('GpuplaneJobState', SearchAttributeType.KEYWORD);
export const SA_JOB_TYPE = defineSearchAttributeKey('GpuplaneJobType', SearchAttributeType.KEYWORD);
export const SA_PROJECT = defineSearchAttributeKey('GpuplaneProject', SearchAttributeType.KEYWORD);
export const SA_NODE = defineSearchAttributeKey('GpuplaneNode', SearchAttributeType.KEYWORD);

export const SEARCH_ATTRIBUTES = [SA_JOB_ID, SA_JOB_STATE, SA_JOB_TYPE, SA_PROJECT, SA_NODE];
