/**
 * @module The evaluation-task guide (docs/guides/evaluation-task.md): a task of your own, built in code, scored
 * on the model that the first experiment trains (that step is reused, so it runs only once per prefix).
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { openStore, storeUrl } from '@marin/finestore'
import { initBackend } from '@marin/levanter'
import { Experiment, formatArtifactRef, runIfMain, step, versioned } from '@marin/marin'
import type { ArtifactRef } from '@marin/marin'
import { LocalLanguageModel, brownSentences, evaluate } from '@marin/marin/eval'
import type { EvalTask } from '@marin/marin/eval'
import { loadModel } from '@marin/marin/serve'
import { train } from './first-experiment.js'

const tiny = process.env.GUIDE_SCALE === 'tiny'

/**
 * Multiple choice: the first half of a held-out Brown sentence, then its own second half (the right choice)
 * or the next sentence's. A model that learned anything about English should prefer its own.
 */
export function continuationTask(size: number): EvalTask {
  const sentences = brownSentences('out').filter((s) => s.split(' ').length >= 8)
  const half = (s: string) => {
    const words = s.split(' ')
    const at = Math.floor(words.length / 2)
    return [words.slice(0, at).join(' '), ` ${words.slice(at).join(' ')}`] as const
  }
  const items = sentences.slice(0, size).map((s, i) => {
    const [context, own] = half(s)
    const [, other] = half(sentences[i + 1]!)
    return { context, choices: [own, other], gold: 0 }
  })
  return { name: 'brown_continuation', kind: 'multiple_choice', items }
}

export const evaluation = step({
  name: 'guide-eval',
  description: 'brown_continuation on the guide model, in process',
  config: { model: train.artifact(), size: versioned(tiny ? 12 : 200) },
  fn: async (c, { outputPath, prefix, log }) => {
    const checkpoint = formatArtifactRef(c.model as ArtifactRef)
    await initBackend()
    const loaded = await loadModel({ checkpoint, prefix })
    const { summary, ref } = await evaluate({
      model: new LocalLanguageModel(loaded.model, loaded.tokenizer, checkpoint),
      tasks: [continuationTask(c.size)],
      store: await openStore({ url: storeUrl(prefix) }),
      artifact: 'eval/guide-continuation',
      lineage: [checkpoint],
    })
    await mkdir(outputPath, { recursive: true })
    await writeFile(join(outputPath, 'results.json'), `${JSON.stringify({ ref, ...summary }, null, 2)}\n`)
    log.info({ ref, acc: summary.tasks.brown_continuation?.metrics.acc?.value }, 'evaluated')
  },
})

const experiment = new Experiment({ name: 'evaluation-task', steps: [evaluation] })
export default experiment
await runIfMain(import.meta.url, experiment)
