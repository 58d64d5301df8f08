/**
 * @module Gathering a report's data from the prefix: the experiment record, each step's status,
 * logs and output files (`artifacts.json`, levanter `metrics.jsonl`, eval JSON, sample
 * generations) and the finestore manifests of the artifacts the steps committed.
 */
import { pathToFileURL } from 'node:url'
import { openStorage, type Storage } from '@marin/rigging'
import { openStore, storeUrl, type Store } from '@marin/finestore'
import { parseStepArtifacts } from '../executor/artifacts.js'
import { readStatus } from '../executor/status-files.js'
import type { ExperimentRecord } from '../executor/executor.js'
import type { EvalRow, MetricRow, ReportArtifact, ReportData, ReportStep, SampleRow, StepLogFile } from './types.js'

/** How much of each log file the report keeps (its end). */
export const LOG_TAIL_BYTES = 64 * 1024

const EVAL_FILE = /(^|\/)([^/]*eval[^/]*|results)\.json$/i
/** Sample generations kept per eval task read from an eval artifact. */
export const SAMPLES_PER_TASK = 5
const SAMPLES_FILE = /(^|\/)(samples|generations)\.jsonl$/i
const METRICS_FILE = /(^|\/)metrics\.jsonl$/

/** `artifacts.json`: `{artifacts: [{kind: 'artifact', name, version}]}`, or the older `["name@3"]`, `[{artifact,
 * version}]`. */
export function parseArtifactList(text: string, file = 'artifacts.json'): { artifact: string; version: number }[] {
  return parseStepArtifacts(text, file).artifacts.map((r) => ({ artifact: r.name, version: r.version }))
}

/** Lines of a levanter JSONL tracker file; bad lines are reported, not fatal. */
export function parseMetrics(text: string, source: string, warn: (w: string) => void): MetricRow[] {
  const rows: MetricRow[] = []
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return
    try {
      const o = JSON.parse(line) as Record<string, unknown>
      if (typeof o.step !== 'number') throw new Error('no numeric "step"')
      const values: Record<string, number> = {}
      for (const [k, v] of Object.entries(o))
        if (k !== 'step' && typeof v === 'number' && Number.isFinite(v)) values[k] = v
      rows.push({ source, step: o.step, values })
    } catch (err) {
      warn(`${source}: line ${i + 1} of metrics.jsonl skipped (${(err as Error).message})`)
    }
  })
  return rows
}

/**
 * Eval results: `[{task, metric, value}]`, or `{task: {metric: number}}` optionally under
 * `results` or `tasks` (the lm-eval-harness shape).
 */
export function parseEvals(text: string, source: string): EvalRow[] {
  const parsed = JSON.parse(text) as unknown
  const rows: EvalRow[] = []
  if (Array.isArray(parsed)) {
    for (const e of parsed as { task?: unknown; metric?: unknown; value?: unknown }[]) {
      if (typeof e?.task === 'string' && typeof e.value === 'number')
        rows.push({ source, task: e.task, metric: typeof e.metric === 'string' ? e.metric : 'score', value: e.value })
    }
    return rows
  }
  const obj = parsed as Record<string, unknown>
  const tasks = (obj.results ?? obj.tasks ?? obj) as Record<string, unknown>
  for (const [task, entry] of Object.entries(tasks)) {
    if (typeof entry === 'number') rows.push({ source, task, metric: 'score', value: entry })
    else if (entry && typeof entry === 'object') {
      // marin's eval summary nests `{kind, samples, metrics: {name: {value, stderr}}}` per task.
      const inner = (entry as { metrics?: unknown }).metrics
      const metrics = (inner && typeof inner === 'object' ? inner : entry) as Record<string, unknown>
      for (const [metric, v] of Object.entries(metrics)) {
        if (typeof v === 'number') rows.push({ source, task, metric, value: v })
        else if (v && typeof (v as { value?: unknown }).value === 'number') {
          const { value, stderr } = v as { value: number; stderr?: unknown }
          rows.push({ source, task, metric, value, ...(typeof stderr === 'number' ? { stderr } : {}) })
        }
      }
    }
  }
  return rows
}

/** `{prompt, completion}` lines, or marin eval generation records `{context, generated, answer}`. */
export function parseSamples(text: string, source: string, limit = Infinity): SampleRow[] {
  const rows: SampleRow[] = []
  for (const line of text.split('\n')) {
    if (rows.length >= limit) break
    if (!line.trim()) continue
    const o = JSON.parse(line) as Record<string, unknown>
    const completion = o.completion ?? o.generated ?? o.output
    if (completion === undefined) continue
    const prompt = o.prompt ?? o.context ?? o.input ?? ''
    rows.push({
      source,
      prompt: String(prompt),
      completion: String(completion),
      ...(o.answer !== undefined ? { expected: String(o.answer) } : {}),
    })
  }
  return rows
}

async function tail(storage: Storage, path: string, size: number): Promise<string> {
  if (size <= LOG_TAIL_BYTES) return storage.readText(path)
  const s = await storage.readStream(path, { start: size - LOG_TAIL_BYTES })
  const chunks: Buffer[] = []
  for await (const c of s) chunks.push(c as Buffer)
  const text = Buffer.concat(chunks).toString('utf8')
  return text.slice(text.indexOf('\n') + 1)
}

function linkTo(storage: Storage, path: string): string {
  const local = storage.localPath(path)
  return local ? pathToFileURL(local).href : `${storage.url.replace(/\/+$/, '')}/${path}`
}

const outputUrl = (storage: Storage, nameHash: string) => `${linkTo(storage, nameHash)}/`

/** Reads everything a report shows about `record` from its prefix. */
export async function collectReport(record: ExperimentRecord, recordUrl: string): Promise<ReportData> {
  const storage = await openStorage(record.prefix)
  const warnings: string[] = []
  const warn = (w: string) => warnings.push(w)
  const steps: ReportStep[] = []
  const refs: { artifact: string; version: number; step: string }[] = []
  const metrics: MetricRow[] = []
  const evals: EvalRow[] = []
  const samples: SampleRow[] = []
  for (const s of record.steps) {
    const logs: StepLogFile[] = []
    const status = await readStatus(storage, s.nameHash)
    for await (const o of storage.list(`${s.nameHash}/`)) {
      const rel = o.path.slice(s.nameHash.length + 1)
      try {
        if (rel.startsWith('logs/')) logs.push({ path: rel, bytes: o.size, tail: await tail(storage, o.path, o.size) })
        else if (rel === 'artifacts.json')
          refs.push(...parseArtifactList(await storage.readText(o.path), o.path).map((r) => ({ ...r, step: s.name })))
        else if (METRICS_FILE.test(rel)) metrics.push(...parseMetrics(await storage.readText(o.path), s.name, warn))
        else if (SAMPLES_FILE.test(rel)) samples.push(...parseSamples(await storage.readText(o.path), s.name))
        else if (EVAL_FILE.test(rel)) evals.push(...parseEvals(await storage.readText(o.path), s.name))
      } catch (err) {
        warn(`${s.name}: ${rel} skipped (${(err as Error).message})`)
      }
    }
    logs.sort((a, b) => a.path.localeCompare(b.path))
    steps.push({
      ...s,
      ...(status ? { diskStatus: status.status } : {}),
      logs,
      outputUrl: outputUrl(storage, s.nameHash),
    })
  }
  const artifacts: ReportArtifact[] = []
  if (refs.length > 0) {
    let store: Store | undefined
    try {
      store = await openStore({ url: storeUrl(storage.url) })
      for (const r of refs) {
        try {
          const view = await store.open(`${r.artifact}@${r.version}`)
          const m = view.manifest
          // Eval artifacts keep per-sample records; generation tasks give the sample generations.
          for (const f of view.files().filter((f) => /^samples\/[^/]+\.jsonl$/.test(f))) {
            samples.push(
              ...parseSamples(
                await view.readText(f),
                `${r.step}: ${f.slice('samples/'.length, -'.jsonl'.length)}`,
                SAMPLES_PER_TASK,
              ),
            )
          }
          artifacts.push({
            ref: `${m.artifact}@${m.version}`,
            artifact: m.artifact,
            version: m.version,
            kind: m.kind,
            createdAt: m.createdAt,
            files: Object.keys(m.files).length,
            bytes: Object.values(m.files).reduce((n, f) => n + f.size, 0),
            metadata: m.metadata,
            lineage: m.lineage.map((l) => `${l.artifact}@${l.version}`),
            step: r.step,
            url: linkTo(storage, `store/artifacts/${m.artifact}/versions/${m.version}.json`),
          })
        } catch (err) {
          warn(`${r.step}: artifact ${r.artifact}@${r.version} not readable (${(err as Error).message})`)
        }
      }
    } finally {
      store?.close()
    }
  }
  metrics.sort((a, b) => a.source.localeCompare(b.source) || a.step - b.step)
  return { record, recordUrl, steps, artifacts, metrics, evals, samples, warnings }
}
