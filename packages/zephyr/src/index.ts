/** @module @marin/zephyr: lazy Dataset pipelines: sources, readers and writers (JSONL, Parquet, Arrow, MediaWiki XML), fused transforms, resumable execution. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version
