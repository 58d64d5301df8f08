/**
 * Web pages to a weighted mixture, as Marin curates data: a WARC sample through main-text
 * extraction, language ID, a quality classifier, dedup and decontamination against the
 * quickstart's evaluation tasks, tokenized with the Brown corpus's tokenizer and trained as a
 * two-source mixture with Brown; then evaluated and published. Every step is an executor step
 * (content-addressed, skipped when done): a changed threshold or weight is a new version of that
 * step and of those after it, and `marin explain` names the field.
 *
 *   1. warc-sample      the WARC sample: webrecorder's real crawls of example.com and iana.org, and real
 *                       German, Japanese, Chinese and UTF-16 pages in their own charsets from public
 *                       repositories (packages/zephyr/test-fixtures/warc; sources and licences in its README)
 *   2. web              WARC responses → main text (Readability), language-tagged (CLD3)
 *   3. web-en           the English pages
 *   4. quality-examples labelled lines: Brown paragraphs `hq`, cooking Q&A titles `lq`
 *      quality-hq       a fastText-style classifier trained on them → `classifiers/quality-hq`
 *   5. web-hq           the pages it scores highest
 *   6. web-dedup        exact + MinHash near-duplicate removal
 *   7. web-decontam     13-gram decontamination against brown_cloze, brown_last_word, brown_bpb
 *   8. brown-*          the Brown corpus as in the quickstart, and its BPE tokenizer
 *      web-tokens       the web pages in Brown's tokenizer (one vocabulary for the mixture)
 *   9. gpt-web-mixture  a GPT-2 trained on { web, brown } with weights that change by stage
 *  10. eval-web-mixture the quickstart's evaluation tasks; then the report, published to ./site
 *
 * `marin run experiments/web-mixture.ts` runs it; `WEB_MIXTURE_SCALE=tiny` runs the same pipeline with a very
 * small model, for tests.
 */
import { cp, mkdir, readFile, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import {
  BUILTIN_TASKS,
  Experiment,
  decontaminateStep,
  dedupStep,
  evalStep,
  ingestStep,
  languageFilterStep,
  qualityClassifierStep,
  qualityFilterStep,
  runIfMain,
  step,
  tokenizeStep,
  trainStep,
  versioned,
  warcIngestStep,
} from '@marin/marin'
import type { TrainStepOptions } from '@marin/marin'
import { readBrown } from '@marin/datakit'
import { setLogLevel } from '@marin/rigging'

const tiny = process.env.WEB_MIXTURE_SCALE === 'tiny'
const repo = resolve(import.meta.dirname, '..')
const WARC_DIR = join(repo, 'packages/zephyr/test-fixtures/warc')
const WARC_FILES = ['example.warc.gz', 'example-iana.org-chunked.warc', 'real-pages.warc.gz']
// fastText's tutorial data (cooking.stackexchange.com question titles, CC BY-SA; see its README)
const COOKING = join(repo, 'packages/datakit/test-fixtures/cooking-stackexchange/cooking.stackexchange.txt')

type Scale = Pick<TrainStepOptions, 'model' | 'trainer' | 'maxSteps'> & {
  documents: number
  vocabSize: number
  examples: number
  evalSize: number
  switchAt: number
}
const scale: Scale = tiny
  ? {
      documents: 12,
      vocabSize: 320,
      examples: 200,
      model: { type: 'gpt2', vocabSize: 320, seqLen: 128, dModel: 32, nLayers: 1, nHeads: 2 },
      trainer: { batchSize: 8, learningRate: 1e-2, logEvery: 5, evalEvery: 10, evalBatches: 1, checkpointEvery: 20 },
      maxSteps: 20,
      switchAt: 10,
      evalSize: 8,
    }
  : {
      documents: 200,
      vocabSize: 512,
      examples: 400,
      model: { type: 'gpt2', vocabSize: 512, seqLen: 128, dModel: 128, nLayers: 2, nHeads: 4 },
      trainer: {
        batchSize: 16,
        learningRate: 3e-3,
        logEvery: 25,
        evalEvery: 100,
        evalBatches: 4,
        checkpointEvery: 100,
      },
      maxSteps: 300,
      switchAt: 150,
      evalSize: 100,
    }
const name = tiny ? 'web-mixture-tiny' : 'web-mixture'

// 1-7: the web source
const sample = step({
  name: 'warc-sample',
  description: 'the WARC sample: real crawls, and real pages in other languages and charsets',
  config: { files: versioned(WARC_FILES) },
  fn: async (c, { outputPath, log }) => {
    await mkdir(outputPath, { recursive: true })
    for (const f of c.files) await cp(join(WARC_DIR, f), join(outputPath, f))
    log.info({ files: c.files.length }, 'copied the WARC sample')
  },
})
const pages = warcIngestStep({ name: 'web', source: WARC_FILES.map((f) => sample.output(f)) })
const english = languageFilterStep(pages, { name: 'web-en', languages: ['en'], threshold: 0.5 })
const examples = step({
  name: 'quality-examples',
  description: 'labelled lines for the quality classifier: Brown paragraphs hq, cooking question titles lq',
  config: { examples: versioned(scale.examples), brownFiles: versioned(scale.documents) },
  fn: async (c, { outputPath, log }) => {
    const hq = readBrown({ part: 'train', files: c.brownFiles })
      .flatMap((d) => d.paragraphs.map((p) => p.join(' ')))
      .filter((p) => p.split(' ').length >= 20)
      .slice(0, c.examples)
    const lq = (await readFile(COOKING, 'utf8'))
      .split('\n')
      .map((l) => l.replace(/__label__\S+\s*/g, '').trim())
      .filter((l) => l.length > 0)
      .slice(0, c.examples)
    const lines = [...hq.map((t) => `__label__hq ${t}`), ...lq.map((t) => `__label__lq ${t}`)]
    await mkdir(outputPath, { recursive: true })
    await writeFile(join(outputPath, 'examples.txt'), `${lines.join('\n')}\n`)
    log.info({ hq: hq.length, lq: lq.length }, 'wrote the labelled examples')
  },
})
// fastText's tutorial settings for small data: more epochs, a higher learning rate
const classifier = qualityClassifierStep({
  name: 'quality-hq',
  file: examples.output('examples.txt'),
  args: { epoch: 25, lr: 0.5 },
})
const highQuality = qualityFilterStep(english, { name: 'web-hq', classifier, label: 'hq', threshold: 0.5 })
const webDeduped = dedupStep(highQuality, { name: 'web-dedup' })
const webClean = decontaminateStep(webDeduped, { name: 'web-decontam', tasks: [...BUILTIN_TASKS] })

// 8: Brown, as in the quickstart, and one tokenizer for both sources
const brownText = step({
  name: 'brown-text',
  description: 'the Brown corpus as plain-text JSONL, one document per corpus file',
  config: { documents: versioned(scale.documents), untag: versioned('untag-brown-v2') },
  fn: async (c, { outputPath, log }) => {
    // The evaluation tasks use the held-out files; they never reach training.
    const docs = readBrown({ part: 'train', files: c.documents })
    await mkdir(outputPath, { recursive: true })
    await writeFile(
      join(outputPath, 'brown.jsonl'),
      docs.map((d) => JSON.stringify({ id: d.id, text: d.text, genre: d.genre })).join('\n') + '\n',
    )
    log.info({ documents: docs.length }, 'wrote the corpus')
  },
})
const brown = ingestStep({ name: 'brown', source: brownText.output('brown.jsonl'), format: 'jsonl' })
const brownDeduped = dedupStep(brown, { name: 'brown-dedup', paragraphs: true })
const brownTokens = tokenizeStep(brownDeduped, { name: 'brown-bpe', vocabSize: scale.vocabSize })
const webTokens = tokenizeStep(webClean, { name: 'web-tokens', tokenizer: brownTokens })

// 9-10: the mixture, trained and evaluated
const train = trainStep(
  {
    mixture: { web: webTokens, brown: brownTokens },
    // mostly Brown first, then more of the web; the small web sample repeats
    weights: [{ untilStep: scale.switchAt, weights: { web: 0.1, brown: 0.9 } }, { weights: { web: 0.3, brown: 0.7 } }],
    repeat: { web: true },
  },
  { name: 'gpt-web-mixture', model: scale.model, trainer: scale.trainer, maxSteps: scale.maxSteps, evalFraction: 0.2 },
)
const evaluation = evalStep('eval-web-mixture', {
  checkpoint: train.artifact(),
  tasks: [...BUILTIN_TASKS],
  size: scale.evalSize,
})

const experiment = new Experiment({
  name,
  description:
    'WARC sample → main text → English → quality filter → dedup → decontamination → tokens; ' +
    'a { web, brown } mixture trained, evaluated and reported',
  steps: [
    sample,
    pages,
    english,
    examples,
    classifier,
    highQuality,
    webDeduped,
    webClean,
    brownText,
    brown,
    brownDeduped,
    brownTokens,
    webTokens,
    train,
    evaluation,
  ],
  report: { target: process.env.WEB_MIXTURE_SITE ?? './site' },
})
export default experiment

if (process.env.MARIN_STEP_CHILD !== '1' && !process.env.LOG_LEVEL) setLogLevel('warn')
await runIfMain(import.meta.url, experiment)
