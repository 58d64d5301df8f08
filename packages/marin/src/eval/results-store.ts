/** @module Evaluation results in finestore: one artifact version per run, metrics in its metadata. */
import type { CommitResult, JsonObject, Store } from '@marin/finestore'
import type { TaskResult } from './run-task.js'

/** The JSON a run returns and stores: per task, its metrics and sample count (records go to their own files). */
export type EvalSummary = {
  readonly model: string
  readonly tasks: Readonly<
    Record<
      string,
      {
        readonly kind: string
        readonly samples: number
        readonly metrics: Readonly<Record<string, { readonly value: number; readonly stderr: number }>>
      }
    >
  >
}

/** Summarize task results (no per-sample records). */
export function summarize(results: readonly TaskResult[]): EvalSummary {
  const tasks: Record<string, EvalSummary['tasks'][string]> = {}
  for (const r of results) {
    tasks[r.task] = {
      kind: r.kind,
      samples: r.samples,
      metrics: Object.fromEntries(r.metrics.map((m) => [m.metric, { value: m.value, stderr: m.stderr }])),
    }
  }
  return { model: results[0]?.model ?? '', tasks }
}

export type StoreResultsOptions = {
  /** Artifact name. @default 'eval/results' */
  readonly artifact?: string
  /** Refs of the inputs (the checkpoint), recorded as lineage. */
  readonly lineage?: readonly string[]
  readonly config?: JsonObject
}

/**
 * Commit `summary.json` and `samples/<task>.jsonl` (per-sample records) as a new version.
 * @example const { ref } = await storeResults(store, results, { artifact: 'eval/tiny' })
 */
export async function storeResults(
  store: Store,
  results: readonly TaskResult[],
  options: StoreResultsOptions = {},
): Promise<CommitResult> {
  const summary = summarize(results)
  return store.commit(
    options.artifact ?? 'eval/results',
    async (t) => {
      await t.put('summary.json', JSON.stringify(summary, null, 2) + '\n')
      for (const r of results)
        await t.put(`samples/${r.task}.jsonl`, r.records.map((x) => JSON.stringify(x)).join('\n') + '\n')
    },
    { metadata: summary as unknown as JsonObject, config: options.config ?? {}, lineage: options.lineage ?? [] },
  )
}
