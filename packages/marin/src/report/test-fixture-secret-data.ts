/**
 * @module An experiment for the published-secret test: its one step reads a secret through `SecretStore`
 * (`file:$FIX_SECRET_FILE`) and writes it into a dataset row (once where a shortened cell would cut it), an eval
 * sample and the dataset's metadata, all committed to finestore, as a careless step might.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SecretStore } from '@marin/rigging'
import { openStore, storeUrl } from '@marin/finestore'
import { Experiment } from '../executor/experiment.js'
import { runIfMain } from '../executor/main.js'
import { step } from '../executor/step.js'

const leak = step({
  name: 'leak',
  config: { service: 'example' },
  fn: async (_c, ctx) => {
    const key = new SecretStore({ specs: { api_key: `file:${process.env.FIX_SECRET_FILE}` }, sources: [] }).get(
      'api_key',
    )
    const store = await openStore({ url: storeUrl(ctx.prefix), fsync: false })
    try {
      const rows = [
        { id: 1, text: `the key is ${key}`, note: key },
        { id: 2, text: `${'x'.repeat(150)}${key}` },
      ]
      const data = await store.begin('datasets/leaky', { metadata: { used: key } })
      await data.put('part-0.jsonl', rows.map((r) => JSON.stringify(r)).join('\n'))
      const d = await data.commit()
      const evals = await store.begin('evals/leaky', { metadata: {} })
      await evals.put(
        'samples/task.jsonl',
        `${JSON.stringify({ prompt: `use ${key}`, completion: key, answer: key })}\n`,
      )
      const e = await evals.commit()
      writeFileSync(
        join(ctx.outputPath, 'artifacts.json'),
        JSON.stringify([`datasets/leaky@${d.version}`, `evals/leaky@${e.version}`]),
      )
    } finally {
      store.close()
    }
  },
})

const experiment = new Experiment({ name: 'leaks_data', steps: [leak] })
export default experiment
await runIfMain(import.meta.url, experiment)
