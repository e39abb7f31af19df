/** The seeded PRNG lives in domain/ now (a sweep's random search draws from it); tests and benchmarks import it from here as before. */
export { prng } from '../../domain/prng.ts';
