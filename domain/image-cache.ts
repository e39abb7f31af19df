/**
 * The bound of the images a node's agent pulled for image jobs (issue 45, docs/environments.md):
 * how much they may take (`gpuctl agent --image-cache-size`, GPUPLANE_IMAGE_CACHE_SIZE, read as
 * domain/env-cache.ts parseEnvCacheSize reads a size). Past it the least recently used go first
 * (domain/env-cache.ts envsToEvict makes the choice), never one a live attempt uses; the agent
 * (activities/gpu-host/image-cache-book.ts) records, counts uses and removes.
 */

const GIB = 1024 ** 3;

/**
 * The bound when none is given: 100 GiB, a handful of CUDA images (a PyTorch runtime image is
 * 7-20 GiB unpacked). Bounded rather than unbounded, as the Python environments are: a node's disk
 * that jobs' images fill stops every job on it, while an image evicted by a bound nobody chose
 * costs one pull the next time a job needs it.
 */
export const DEFAULT_IMAGE_CACHE_BYTES = 100 * GIB;
