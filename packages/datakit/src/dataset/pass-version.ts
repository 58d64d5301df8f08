/**
 * @module What a datakit pass over a dataset version does before and after its own work: find the version an
 * identical pass made (by its build key), and commit the shards it wrote into a work folder as a new version,
 * its report beside them, lineage and config recorded, the work folder removed.
 */
import { readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import type { JsonObject, Store } from '@marin/finestore'
import { findVersionByKey } from './ingest.js'
import { summarizeShards } from './shard-tally.js'

/** The version an identical pass made, with the report it committed, or undefined. */
export async function reusedPass<R>(
  store: Store,
  artifact: string,
  key: string,
  reportFile: string,
): Promise<{ version: number; ref: string; report: R } | undefined> {
  const found = await findVersionByKey(store, artifact, key)
  if (found === undefined) return undefined
  const view = await store.open(`${artifact}@${found}`)
  return { version: found, ref: view.ref, report: JSON.parse(await view.readText(reportFile)) as R }
}

export type CommitPassOptions = {
  readonly store: Store
  readonly artifact: string
  /** Where the pass wrote its `part-*-of-*.parquet` shards. */
  readonly dir: string
  readonly reportFile: string
  readonly report: unknown
  readonly key: string
  readonly config: object
  /** The pass's own metadata, beside the shards' tally, e.g. `{ decontamination: {…} }`. */
  readonly metadata: JsonObject
  /** Says what made the version (its `source` metadata and commit message). */
  readonly source: string
  readonly lineage: readonly string[]
}

/** Commits the shards in `dir` and the report as a new version, then removes `dir`. */
export async function commitPass(o: CommitPassOptions): Promise<{ version: number; ref: string }> {
  const files = (await readdir(o.dir)).filter((f) => /^part-\d+-of-\d+\.parquet$/.test(f)).sort()
  const summary = await summarizeShards(files.map((f) => join(o.dir, f)))
  const committed = await o.store.commit(
    o.artifact,
    async (txn) => {
      for (const f of files) await txn.put(f, { file: join(o.dir, f) })
      await txn.put(o.reportFile, JSON.stringify(o.report, null, 2))
    },
    {
      kind: 'datasets',
      metadata: { ...summary, shards: files.length, source: o.source, ...o.metadata },
      config: { ...o.config, buildKey: o.key } as JsonObject,
      lineage: [...o.lineage],
      message: o.source,
    },
  )
  await rm(o.dir, { recursive: true, force: true })
  return committed
}
