/** @module @marin/datakit: versioned datasets: ingestion, sampling, dedup passes, byte-level BPE tokenizers and token caches. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version
