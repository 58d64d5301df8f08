/**
 * The quickstart experiment.
 *
 * The full pipeline (ingest → dedup → tokenize → train → serve + eval → report)
 * arrives as the packages below it land. Until then this experiment does the
 * first real part of it on the Brown corpus: reads the corpus, finds exact and
 * near-duplicate paragraphs with dupekit (MinHash LSH at the Marin defaults),
 * measures the corpus (documents, paragraphs, words, unigram entropy per word
 * and per byte: the bar a trained model's loss must clear), and writes the
 * record to `$MARIN_PREFIX/experiments/quickstart/<run>.json` atomically.
 *
 * `QUICKSTART_SCALE=tiny` uses the first 20 documents.
 */
import { findDuplicateClusters } from '@marin/dupekit'
import { logger, openStorage, provenance } from '@marin/rigging'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { readBrown } from './lib/brown.js'

const log = logger('quickstart')
const scale = process.env.QUICKSTART_SCALE === 'tiny' ? 'tiny' : 'full'
const prefix = process.env.MARIN_PREFIX ?? './.marin'

const t0 = performance.now()
const docs = readBrown(scale === 'tiny' ? 20 : undefined)
const paragraphs = docs.flatMap((d) => d.text.split('\n\n'))
log.info({ scale, documents: docs.length, paragraphs: paragraphs.length }, 'read the Brown corpus')

const { clusters } = findDuplicateClusters(paragraphs)
const duplicates = clusters.reduce((n, c) => n + c.length - 1, 0)

const counts = new Map<string, number>()
let words = 0
let bytes = 0
for (const p of paragraphs) {
  bytes += Buffer.byteLength(p) + 2
  for (const w of p.toLowerCase().split(' ')) {
    counts.set(w, (counts.get(w) ?? 0) + 1)
    words++
  }
}
let entropy = 0
for (const c of counts.values()) entropy -= (c / words) * Math.log2(c / words)

const record = {
  experiment: 'quickstart',
  scale,
  corpus: { documents: docs.length, paragraphs: paragraphs.length, words, bytes, vocabulary: counts.size },
  dedup: { duplicateParagraphs: duplicates, clusters: clusters.length, examples: clusters.slice(0, 3).map((c) => c.map((i) => paragraphs[i]!.slice(0, 80))) },
  unigram: { bitsPerWord: entropy, bitsPerByte: (entropy * words) / bytes },
  seconds: (performance.now() - t0) / 1000,
  provenance: provenance(),
}
const store = await openStorage(pathToFileURL(resolve(prefix)).href)
const run = new Date().toISOString().replace(/[:.]/g, '-')
const path = `experiments/quickstart/${run}.json`
await store.write(path, JSON.stringify(record, null, 2))

console.log(
  `quickstart (${scale}): ${docs.length} documents, ${paragraphs.length} paragraphs, ${words} words; ` +
    `${duplicates} duplicate paragraphs in ${clusters.length} clusters; ` +
    `unigram entropy ${entropy.toFixed(3)} bits/word (${record.unigram.bitsPerByte.toFixed(3)} bits/byte)`,
)
console.log(`record: ${resolve(prefix, path)}`)
