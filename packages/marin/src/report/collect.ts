/**
 * @module Gathering a report's data from the prefix: the experiment record, each step's status,
 * resolved config, logs and output files (`artifacts.json`, levanter `metrics.jsonl`, eval JSON,
 * sample generations), the runs that made skipped steps, and the finestore manifests of the
 * artifacts the steps committed (with the first rows of each dataset and the eval samples).
 */
import {
  MARIN_LAYOUT,
  isSecretFingerprints,
  openStorage,
  scrubFingerprinted,
  type SecretFingerprints,
  type Storage,
} from '@marin/rigging'
import { openStore, storeUrl, type Store } from '@marin/finestore'
import { parseStepArtifacts } from '../executor/artifacts.js'
import { readInfo, readStatus } from '../executor/status-files.js'
import type { ExperimentRecord } from '../executor/executor.js'
import { ROWS_MAX_BYTES, datasetRows, linesOf } from './first-rows.js'
import { mixtureOf, type MixtureShown } from './mixture.js'
import { artifactFile } from './site-parts.js'
import { movePaths } from './source.js'
import type {
  BackendShown,
  DatasetRows,
  EvalRow,
  MetricRow,
  ReportArtifact,
  ReportData,
  ReportStep,
  RunRef,
  SampleRow,
  StepLogFile,
} from './types.js'

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

// Per-sample score fields of marin's eval records, by the metric name the eval table uses.
const SCORE_FIELDS: Readonly<Record<string, string>> = {
  exactMatch: 'exact_match',
  acc: 'acc',
  accNorm: 'acc_norm',
  bitsPerByte: 'bits_per_byte',
  score: 'score',
}

/**
 * `{prompt, completion}` lines, or marin eval records: generation `{context, generated, answer, exactMatch}`,
 * multiple choice `{context, choices, gold, pred, acc, accNorm}` (the chosen continuation as the completion).
 */
export function parseSamples(text: string, source: string, limit = Infinity): SampleRow[] {
  const rows: SampleRow[] = []
  for (const line of text.split('\n')) {
    if (rows.length >= limit) break
    if (!line.trim()) continue
    const o = JSON.parse(line) as Record<string, unknown>
    const choices = Array.isArray(o.choices) ? (o.choices as unknown[]) : undefined
    const pick = (i: unknown) => (choices && typeof i === 'number' ? choices[i] : undefined)
    const completion = o.completion ?? o.generated ?? o.output ?? pick(o.pred)
    if (completion === undefined) continue
    const prompt = o.prompt ?? o.context ?? o.input ?? ''
    const expected = o.answer ?? pick(o.gold)
    const scores: Record<string, number> = {}
    for (const [field, metric] of Object.entries(SCORE_FIELDS))
      if (typeof o[field] === 'number') scores[metric] = o[field] as number
    rows.push({
      source,
      prompt: String(prompt),
      completion: String(completion),
      ...(expected !== undefined ? { expected: String(expected) } : {}),
      scores,
    })
  }
  return rows
}

/** The backend levanter chose, from a training step's `artifacts.json` (`backend`) or its log line. */
function backendOf(step: string, o: unknown): BackendShown | undefined {
  const b = (o ?? {}) as Record<string, unknown>
  if (typeof b.name !== 'string') return undefined
  return {
    step,
    name: b.name,
    ...(typeof b.threads === 'number' ? { threads: b.threads } : {}),
    ...(typeof b.simd === 'boolean' ? { simd: b.simd } : {}),
    ...(typeof b.gemm === 'string' ? { gemm: b.gemm } : {}),
    ...(nativeText(b.native) ? { native: nativeText(b.native)! } : {}),
    ...(adapterText(b.adapter) ? { adapter: adapterText(b.adapter)! } : {}),
  }
}

/** The native kernels as levanter records them (`{isa, threads}`), as text. */
function nativeText(o: unknown): string | undefined {
  const n = (o ?? {}) as Record<string, unknown>
  if (typeof n.isa !== 'string') return undefined
  const threads = typeof n.threads === 'number' ? `, ${n.threads} thread${n.threads === 1 ? '' : 's'}` : ''
  return `${n.isa === 'avx512' ? 'AVX-512' : 'AVX2/FMA'}${threads}`
}

/** A GPU adapter as levanter records it (`{vendor, architecture, device, description, software}`), as text. */
function adapterText(a: unknown): string | undefined {
  if (typeof a === 'string') return a
  if (!a || typeof a !== 'object') return undefined
  const o = a as Record<string, unknown>
  const parts = ['vendor', 'architecture', 'device', 'description']
    .map((k) => o[k])
    .filter((v): v is string => typeof v === 'string' && v !== '')
  const text = [...new Set(parts)].join(' ')
  return text ? `${text}${o.software === true ? ' (software)' : ''}` : undefined
}

/** levanter's `tensor backend selected` line in a log, if any. */
function backendInLog(step: string, text: string): BackendShown | undefined {
  for (const line of text.split('\n')) {
    if (!line.includes('tensor backend selected')) continue
    try {
      const found = backendOf(step, JSON.parse(line))
      if (found) return found
    } catch {
      // not a JSON line
    }
  }
  return undefined
}

/** Tokens per optimizer step from a resolved training config: `trainer.batchSize` × `model.seqLen`. */
export function tokensPerStepOf(config: unknown): number | undefined {
  const c = (config ?? {}) as { trainer?: { batchSize?: unknown }; model?: { seqLen?: unknown } }
  const batch = c.trainer?.batchSize
  const seq = c.model?.seqLen
  return typeof batch === 'number' && typeof seq === 'number' && batch > 0 && seq > 0 ? batch * seq : undefined
}

/** For each step of `record` that did not run in it, the newest other run (by id) in which that step succeeded. */
async function producers(storage: Storage, record: ExperimentRecord): Promise<Map<string, RunRef>> {
  const wanted = new Set(record.steps.filter((s) => s.action !== 'run').map((s) => s.nameHash))
  const found = new Map<string, RunRef>()
  if (wanted.size === 0) return found
  const files: string[] = []
  for await (const o of storage.list(`${MARIN_LAYOUT.experiments}/`)) if (o.path.endsWith('.json')) files.push(o.path)
  const runOf = (f: string) => f.split('/').at(-1)!.slice(0, -'.json'.length)
  // Newest first: run ids start with their start time.
  files.sort((a, b) => runOf(b).localeCompare(runOf(a)))
  for (const f of files) {
    if (found.size === wanted.size) break
    if (runOf(f) === record.run) continue
    let other: ExperimentRecord
    try {
      other = JSON.parse(await storage.readText(f)) as ExperimentRecord
    } catch {
      continue
    }
    if (!Array.isArray(other.steps) || other.run >= record.run) continue
    for (const s of other.steps)
      if (wanted.has(s.nameHash) && !found.has(s.nameHash) && s.status === 'SUCCESS')
        found.set(s.nameHash, { experiment: other.experiment, run: other.run })
  }
  return found
}

async function tail(storage: Storage, path: string, size: number): Promise<string> {
  if (size <= LOG_TAIL_BYTES) return storage.readText(path)
  const s = await storage.readStream(path, { start: size - LOG_TAIL_BYTES })
  const chunks: Buffer[] = []
  for await (const c of s) chunks.push(c as Buffer)
  const text = Buffer.concat(chunks).toString('utf8')
  return text.slice(text.indexOf('\n') + 1)
}

/**
 * Where the store keeps a blob's bytes (`blobs/sha256/ab/abcd…`, the layout ARCHITECTURE.md documents): Parquet
 * rows are read from there by range, so a large shard costs its footer and the columns shown, not a full copy.
 */
function blobUrl(prefixUrl: string, hash: string): string {
  if (!/^[0-9a-f]{64}$/.test(hash)) throw new Error(`blob ${JSON.stringify(hash)} is not a sha256`)
  return `${storeUrl(prefixUrl).replace(/\/+$/, '')}/blobs/sha256/${hash.slice(0, 2)}/${hash}`
}

/** Reads everything a report shows about `record` from its prefix, every secret its steps registered scrubbed. */
export async function collectReport(record: ExperimentRecord, recordUrl: string): Promise<ReportData> {
  return (await gatherReport(record, recordUrl)).data
}

/**
 * `collectReport`, and the fingerprints of the secrets the run's steps registered (kept in their `.executor_info`
 * by the processes that read them), for scrubbing whatever else is made from the data (see `buildReport`).
 */
export async function gatherReport(
  record: ExperimentRecord,
  recordUrl: string,
): Promise<{ data: ReportData; secrets: readonly SecretFingerprints[] }> {
  const storage = await openStorage(record.prefix)
  const secrets: SecretFingerprints[] = []
  // A step writes a secret it read into its dataset or samples as readily as into its log: the values were
  // registered in its process, not in this one, so they are scrubbed by the fingerprints it left.
  const scrub = (s: string) => (secrets.length > 0 ? scrubFingerprinted(s, secrets) : s)
  const warnings: string[] = []
  const warn = (w: string) => warnings.push(w)
  const steps: ReportStep[] = []
  const refs: { artifact: string; version: number; step: string }[] = []
  const metrics: MetricRow[] = []
  const evals: EvalRow[] = []
  const samples: SampleRow[] = []
  const backends: BackendShown[] = []
  const tokensPerStep: Record<string, number> = {}
  const mixtures: MixtureShown[] = []
  const madeBy = await producers(storage, record)
  for (const s of record.steps) {
    const logs: StepLogFile[] = []
    const status = await readStatus(storage, s.nameHash)
    const info = await readInfo(storage, s.nameHash).catch(() => undefined)
    if (isSecretFingerprints(info?.secrets)) secrets.push(info.secrets)
    let backend: BackendShown | undefined
    let hasMetrics = false
    for await (const o of storage.list(`${s.nameHash}/`)) {
      const rel = o.path.slice(s.nameHash.length + 1)
      try {
        if (rel.startsWith('logs/')) {
          const text = await tail(storage, o.path, o.size)
          logs.push({ path: rel, bytes: o.size, tail: text })
          backend ??= backendInLog(s.name, text)
        } else if (rel === 'artifacts.json') {
          const listed = parseStepArtifacts(await storage.readText(o.path), o.path)
          refs.push(...listed.artifacts.map((r) => ({ artifact: r.name, version: r.version, step: s.name })))
          const recorded = backendOf(s.name, listed.backend)
          if (recorded) backend = recorded
          if (listed.mixture !== undefined) {
            const shown = mixtureOf(s.name, listed.mixture)
            if (shown) mixtures.push(shown)
            else warn(`${s.name}: artifacts.json has a mixture the report cannot read (no sources or stages)`)
          }
        } else if (METRICS_FILE.test(rel)) {
          metrics.push(...parseMetrics(await storage.readText(o.path), s.name, warn))
          hasMetrics = true
        } else if (SAMPLES_FILE.test(rel)) samples.push(...parseSamples(await storage.readText(o.path), s.name))
        else if (EVAL_FILE.test(rel)) evals.push(...parseEvals(await storage.readText(o.path), s.name))
      } catch (err) {
        warn(`${s.name}: ${rel} skipped (${(err as Error).message})`)
      }
    }
    if (backend) backends.push(backend)
    const perStep = hasMetrics ? tokensPerStepOf(info?.config) : undefined
    if (perStep) tokensPerStep[s.name] = perStep
    logs.sort((a, b) => a.path.localeCompare(b.path))
    const by = madeBy.get(s.nameHash)
    steps.push({
      ...s,
      ...(status ? { diskStatus: status.status } : {}),
      logs,
      ...(info?.config !== undefined ? { config: movePaths(info.config, record) } : {}),
      ...(by ? { madeBy: by } : {}),
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
          // Eval artifacts keep per-sample records: the samples with their scores.
          for (const f of view.files().filter((f) => /^samples\/[^/]+\.jsonl$/.test(f))) {
            // Only the first lines are read: a task's records may be far larger than what is shown.
            const lines: string[] = []
            for await (const line of linesOf(await view.readStream(f), ROWS_MAX_BYTES)) {
              if (line.trim()) lines.push(line)
              if (lines.length >= SAMPLES_PER_TASK * 4) break
            }
            samples.push(
              ...parseSamples(
                lines.join('\n'),
                `${r.step}: ${f.slice('samples/'.length, -'.jsonl'.length)}`,
                SAMPLES_PER_TASK,
              ),
            )
          }
          let rows: DatasetRows | undefined
          if (m.kind === 'datasets') {
            try {
              rows = await datasetRows(view, (f) => blobUrl(storage.url, view.entry(f).blob), scrub)
            } catch (err) {
              warn(`${r.step}: first rows of ${m.artifact}@${m.version} not readable (${(err as Error).message})`)
            }
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
            url: artifactFile(m.artifact, m.version),
            manifest: m,
            ...(rows ? { rows } : {}),
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
  const data = {
    record,
    recordUrl,
    steps,
    artifacts,
    metrics,
    evals,
    samples,
    backends,
    tokensPerStep,
    ...(mixtures.length > 0 ? { mixtures } : {}),
    warnings,
  }
  return { data: secrets.length > 0 ? scrubDeep(data, scrub, 0) : data, secrets }
}

/** `v` with `scrub` applied to every string in it, keys too, at any depth (plain data only). */
function scrubDeep<T>(v: T, scrub: (s: string) => string, depth: number): T {
  if (typeof v === 'string') return scrub(v) as T
  if (v === null || typeof v !== 'object' || depth > 1000) return v
  if (Array.isArray(v)) return v.map((x) => scrubDeep(x, scrub, depth + 1)) as T
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [scrub(k), scrubDeep(x, scrub, depth + 1)])) as T
}
