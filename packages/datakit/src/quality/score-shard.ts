/**
 * @module The per-shard functions of quality scoring, module exports reached by reference so that
 * zephyr's worker processes import them. The model travels by path, not by value: each worker
 * process loads it once (the path names the model file's content hash, so a cached load is never
 * stale) and scores every record of every shard it runs with it.
 */
import { fnRef, type ShardInfo } from '@marin/zephyr'
import type { DatakitRecord } from '../dataset/record.js'
import { DatakitError } from '../errors.js'
import type { Classifier } from './classifier.js'
import { loadClassifier } from './model-file.js'

const loaded = new Map<string, Promise<Classifier>>()

/** The classifier at `path`, loaded once per process. */
export function classifierAt(path: string): Promise<Classifier> {
  let c = loaded.get(path)
  if (c === undefined) {
    c = loadClassifier(path)
    loaded.set(path, c)
    c.catch(() => loaded.delete(path))
  }
  return c
}

export type ScoreArgs = { readonly model: string; readonly label: string }

/**
 * What scoring found in one shard: a score per record in order (NaN: skipped, its text not a
 * string), the skipped records, and how many records had no known word (score 0).
 */
export type ShardScores = {
  readonly shard: number
  readonly scores: Float64Array
  readonly skipped: { pos: number; id: string; reason: string }[]
  readonly unscorable: number
}

export async function* scoreShard(
  records: AsyncIterable<DatakitRecord>,
  info: ShardInfo,
  a: ScoreArgs,
): AsyncGenerator<ShardScores> {
  const clf = await classifierAt(a.model)
  if (clf.labelId(a.label) < 0)
    throw new DatakitError(
      'INVALID_ARGUMENT',
      `scoreQuality: the classifier has no label "${a.label}"; its labels: ${clf.labels.join(', ')}`,
    )
  let scores = new Float64Array(1024)
  let n = 0
  let unscorable = 0
  const skipped: ShardScores['skipped'] = []
  for await (const r of records) {
    if (n === scores.length) {
      const s = new Float64Array(n * 2)
      s.set(scores)
      scores = s
    }
    const text = (r as { text?: unknown }).text
    if (typeof text !== 'string') {
      skipped.push({ pos: n, id: String(r.id), reason: `text is ${text === null ? 'null' : typeof text}` })
      scores[n++] = Number.NaN
      continue
    }
    const p = clf.probability(text, a.label)
    if (p === undefined) unscorable++
    scores[n++] = p ?? 0
  }
  yield { shard: info.shard, scores: scores.slice(0, n), skipped, unscorable }
}

export type ApplyArgs = {
  /** Scores by shard, in record order (NaN: skip the record). */
  readonly scores: ReadonlyMap<number, Float64Array>
  /** Records scoring below this are dropped (`filter`) or kept marked (`annotate`). */
  readonly threshold: number
  readonly mode: 'filter' | 'annotate'
  /** The key under `meta` that receives the score. */
  readonly field: string
  readonly label: string
}

export async function* applyScores(
  records: AsyncIterable<DatakitRecord>,
  info: ShardInfo,
  a: ApplyArgs,
): AsyncGenerator<DatakitRecord> {
  const scores = a.scores.get(info.shard)
  let pos = 0
  for await (const r of records) {
    const s = scores?.[pos++]
    if (s === undefined || Number.isNaN(s)) continue
    const keep = s >= a.threshold
    if (!keep && a.mode === 'filter') continue
    yield { ...r, meta: withScore(r, a.field, { label: a.label, score: s, kept: keep }) }
  }
}

function withScore(r: DatakitRecord, field: string, value: object): string {
  let meta: unknown
  try {
    meta = r.meta === '' || r.meta === undefined || r.meta === null ? {} : JSON.parse(r.meta)
  } catch (err) {
    throw new DatakitError('INVALID_ARGUMENT', `scoreQuality: record ${r.id} has meta that is not JSON`, {
      cause: err,
    })
  }
  const obj = typeof meta === 'object' && meta !== null && !Array.isArray(meta) ? meta : { value: meta }
  return JSON.stringify({ ...obj, [field]: value })
}

export const SCORE_SHARD = fnRef<typeof scoreShard>(import.meta.url, 'scoreShard')
export const APPLY_SCORES = fnRef<typeof applyScores>(import.meta.url, 'applyScores')
