/**
 * @module The per-shard functions of the web steps, module exports reached by reference so
 * zephyr's worker processes import them: `warcDocuments` turns one WARC file's pages into
 * language-tagged documents, `languageFilter` keeps a dataset's documents in given languages.
 * Each counts what it saw (pages, kept, no main text, skipped by reason with file and offset,
 * by language) into a stats file beside its shard, as ingest's tally is, so the step sums them
 * into the version's metadata without reading the shards back.
 */
import type { ShardInfo, WarcPage, WarcSkip } from '@marin/zephyr'
import { fnRef, formatPattern } from '@marin/zephyr'
import { atomicWrite } from '../internal/atomic-write.js'
import { contentId, type DatakitRecord } from '../dataset/record.js'
import { Tally } from '../dataset/shard-tally.js'
import { extractMainText, loadHtmlParser } from './extract.js'
import { keepLanguage, languageIdentifier } from './language.js'

/** What one shard of a web step counted. */
export type WebStats = {
  pagesRead: number
  kept: number
  noMainText: number
  /**
   * Records or pages not made into documents, by reason: the WARC reader's `corrupt`, `tooLarge`, `truncated`;
   * extraction's `htmlTooLarge`, `unparseable`, `undecodable` (main text more than 1 % U+FFFD).
   */
  skipped: Record<string, number>
  /** Documents dropped by the language filter. */
  droppedLanguage: number
  /** Kept documents by language. */
  byLanguage: Record<string, number>
  /** The first skipped records, with file and byte offset. */
  skips: { reason: string; file: string; offset: number; url?: string }[]
}

export const MAX_LISTED_SKIPS = 100

export function emptyStats(): WebStats {
  return { pagesRead: 0, kept: 0, noMainText: 0, skipped: {}, droppedLanguage: 0, byLanguage: {}, skips: [] }
}

export function addStats(into: WebStats, s: WebStats): void {
  into.pagesRead += s.pagesRead
  into.kept += s.kept
  into.noMainText += s.noMainText
  into.droppedLanguage += s.droppedLanguage
  for (const [k, v] of Object.entries(s.skipped)) into.skipped[k] = (into.skipped[k] ?? 0) + v
  for (const [k, v] of Object.entries(s.byLanguage)) into.byLanguage[k] = (into.byLanguage[k] ?? 0) + v
  for (const x of s.skips) if (into.skips.length < MAX_LISTED_SKIPS) into.skips.push(x)
}

export function statsPath(shardPath: string): string {
  return `${shardPath}.web-stats.json`
}

function skip(stats: WebStats, reason: string, file: string, offset: number, url?: string): void {
  stats.skipped[reason] = (stats.skipped[reason] ?? 0) + 1
  if (stats.skips.length < MAX_LISTED_SKIPS) stats.skips.push({ reason, file, offset, ...(url ? { url } : {}) })
}

export type WarcDocumentsArgs = {
  readonly files: readonly string[]
  readonly maxHtmlBytes: number
  readonly minChars: number
  /** Keep only these languages (none: keep all, tagged). */
  readonly languages?: readonly string[]
  readonly threshold: number
  readonly output: string
}

export async function* warcDocuments(
  records: AsyncIterable<WarcPage | WarcSkip>,
  shard: ShardInfo,
  a: WarcDocumentsArgs,
): AsyncGenerator<DatakitRecord> {
  const file = a.files[shard.shard]!
  const stats = emptyStats()
  const tally = new Tally()
  const lid = await languageIdentifier()
  await loadHtmlParser()
  for await (const r of records) {
    if ('skipped' in r) {
      skip(stats, r.skipped, r.file, r.offset, r.url)
      continue
    }
    stats.pagesRead++
    const got = extractMainText(r.html, { maxHtmlBytes: a.maxHtmlBytes, minChars: a.minChars })
    if (got === 'noMainText') {
      stats.noMainText++
      continue
    }
    if (typeof got === 'string') {
      skip(stats, got === 'tooLarge' ? 'htmlTooLarge' : got, file, r.offset, r.url)
      continue
    }
    const guess = lid.identify(got.text)
    if (a.languages && !keepLanguage(guess, { languages: a.languages, threshold: a.threshold })) {
      stats.droppedLanguage++
      continue
    }
    const meta = {
      url: r.url,
      date: r.date,
      warcRecordId: r.recordId,
      title: got.title,
      ...(r.charset ? { charset: r.charset } : {}),
      language: guess.language,
      languageScore: guess.score,
      languageReliable: guess.reliable,
    }
    const record = { id: contentId(got.text), text: got.text, source: r.url, meta: JSON.stringify(meta) }
    stats.kept++
    stats.byLanguage[guess.language] = (stats.byLanguage[guess.language] ?? 0) + 1
    tally.add(record)
    yield record
  }
  const path = formatPattern(a.output, shard.shard, shard.total)
  await tally.save(path)
  await atomicWrite(statsPath(path), JSON.stringify(stats))
}

export type LanguageFilterArgs = {
  readonly languages: readonly string[]
  readonly threshold: number
  readonly output: string
}

export async function* languageFilter(
  records: AsyncIterable<DatakitRecord>,
  shard: ShardInfo,
  a: LanguageFilterArgs,
): AsyncGenerator<DatakitRecord> {
  const stats = emptyStats()
  const tally = new Tally()
  let lid: Awaited<ReturnType<typeof languageIdentifier>> | undefined
  for await (const r of records) {
    stats.pagesRead++
    let meta: Record<string, unknown> = {}
    try {
      const m = r.meta === '' ? {} : JSON.parse(r.meta)
      if (m && typeof m === 'object' && !Array.isArray(m)) meta = m
    } catch {
      // meta that is not a JSON object is kept under `value`, as decontamination does
      meta = { value: r.meta }
    }
    let out = r
    if (typeof meta.language !== 'string' || typeof meta.languageScore !== 'number') {
      lid ??= await languageIdentifier()
      const g = lid.identify(r.text)
      meta = { ...meta, language: g.language, languageScore: g.score, languageReliable: g.reliable }
      out = { ...r, meta: JSON.stringify(meta) }
    }
    const guess = { language: meta.language as string, score: meta.languageScore as number, reliable: true }
    if (!keepLanguage(guess, a)) {
      stats.droppedLanguage++
      continue
    }
    stats.kept++
    stats.byLanguage[guess.language] = (stats.byLanguage[guess.language] ?? 0) + 1
    tally.add(out)
    yield out
  }
  const path = formatPattern(a.output, shard.shard, shard.total)
  await tally.save(path)
  await atomicWrite(statsPath(path), JSON.stringify(stats))
}

export const WARC_DOCUMENTS = fnRef<typeof warcDocuments>(import.meta.url, 'warcDocuments')
export const LANGUAGE_FILTER = fnRef<typeof languageFilter>(import.meta.url, 'languageFilter')
