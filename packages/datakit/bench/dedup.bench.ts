/**
 * Out-of-core dedup at scale (`pnpm bench datakit`, topic `dedup`): a generated corpus of
 * `DATAKIT_DEDUP_DOCS` documents (default 10,000,000; 40 random Brown words each, ~1% exact
 * and ~1% near copies planted) in `DATAKIT_DEDUP_SHARDS` shards (default 16) is ingested, then
 * deduplicated out of core on zephyr's worker processes. Reports the time per document and the
 * peak resident memory of the coordinator (this process, generation and ingest included) and
 * of the busiest worker process (read from /proc before the workers stop).
 */
import { createWriteStream, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { once } from 'node:events'
import { emit } from '@marin/rigging/bench'
import { ingest } from '../src/dataset/ingest.js'
import { dedup } from '../src/dedup/dedup.js'
import { brownParagraphs } from '../src/test-support/brown.js'
import { defaultContext } from '../src/zephyr-context.js'

const bench = 'datakit'
const docs = Number(process.env.DATAKIT_DEDUP_DOCS ?? 10_000_000)
const numShards = Number(process.env.DATAKIT_DEDUP_SHARDS ?? 16)
const MiB = 2 ** 20

/** Peak resident memory (VmHWM) of every process below `pid`, by pid. */
function descendantsPeakRss(pid: number): Map<number, number> {
  const parent = new Map<number, number>()
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8')
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]))
    } catch {}
  }
  const out = new Map<number, number>()
  for (const p of parent.keys()) {
    let q: number | undefined = p
    while (q !== undefined && q > 1 && q !== pid) q = parent.get(q)
    if (q !== pid || p === pid) continue
    try {
      const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))
      if (hwm) out.set(p, Number(hwm[1]) * 1024)
    } catch {}
  }
  return out
}

// Documents of random Brown words: unrelated documents share no long passage (documents made of
// whole sentences would, and connected components would chain them into one cluster).
const words = [...new Set(brownParagraphs().flatMap((p) => p.split(' ')))]
let seed = 7
/** A uniform integer below n (mulberry32: 32-bit integer steps, no float rounding). */
const rand = (n: number): number => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n)
}

const root = mkdtempSync(join(tmpdir(), 'datakit-dedup-bench-'))
try {
  // The corpus, streamed to JSONL shards: document i is 40 words and its number, or a copy.
  const t0 = process.hrtime.bigint()
  const recent: string[] = []
  let planted = 0
  for (let s = 0; s < numShards; s++) {
    const out = createWriteStream(join(root, `part-${String(s).padStart(3, '0')}.jsonl`))
    const end = Math.floor(((s + 1) * docs) / numShards)
    for (let i = Math.floor((s * docs) / numShards); i < end; i++) {
      let text: string
      const r = rand(100)
      if (r === 0 && recent.length > 0) {
        text = recent[rand(recent.length)]!.toUpperCase() // an exact copy (after normalization)
        planted++
      } else if (r === 1 && recent.length > 0) {
        const w = recent[rand(recent.length)]!.split(' ')
        w[rand(w.length)] = 'zebra' // a near copy
        text = w.join(' ')
        planted++
      } else {
        text = `${Array.from({ length: 40 }, () => words[rand(words.length)]).join(' ')} (${i})`
        if (rand(8) === 0) recent[recent.length < 1000 ? recent.length : rand(1000)] = text
      }
      if (!out.write(`${JSON.stringify({ text })}\n`)) await once(out, 'drain')
    }
    out.end()
    await once(out, 'finish')
  }
  const prefix = join(root, 'marin')
  await ingest({ name: 'gen', source: join(root, 'part-*.jsonl'), format: 'jsonl', prefix })
  const tIngest = Number(process.hrtime.bigint() - t0) / 1e9
  process.stderr.write(
    `generated and ingested ${docs} documents (${planted} planted copies) in ${tIngest.toFixed(0)} s\n`,
  )

  const t1 = process.hrtime.bigint()
  const r = await dedup('gen', { prefix, outOfCore: true, output: 'gen-dedup' })
  const seconds = Number(process.hrtime.bigint() - t1) / 1e9
  const workers = descendantsPeakRss(process.pid)
  const workerPeak = Math.max(0, ...workers.values())
  const coordinatorPeak = process.resourceUsage().maxRSS * 1024
  process.stderr.write(
    `dedup: ${JSON.stringify({ ...r.report, exampleClusters: undefined })} ${JSON.stringify(r.outOfCore)}; ` +
      `worker peaks (MiB): ${[...workers.values()].map((b) => (b / MiB).toFixed(0)).join(', ')}\n`,
  )
  emit({ bench, metric: 'dedup_ooc_documents', value: docs, unit: 'documents' })
  emit({ bench, metric: 'dedup_ooc_s', value: seconds, unit: 's' })
  emit({ bench, metric: 'dedup_ooc_us_per_doc', value: (seconds * 1e6) / docs, unit: 'µs' })
  emit({ bench, metric: 'dedup_ooc_coordinator_peak_rss_mib', value: coordinatorPeak / MiB, unit: 'MiB' })
  emit({ bench, metric: 'dedup_ooc_worker_peak_rss_mib', value: workerPeak / MiB, unit: 'MiB' })
  emit({ bench, metric: 'dedup_ooc_removed', value: r.report.documentsIn - r.report.kept, unit: 'documents' })
  emit({ bench, metric: 'dedup_ooc_planted', value: planted, unit: 'documents' })
} finally {
  await defaultContext().close()
  rmSync(root, { recursive: true, force: true })
}
