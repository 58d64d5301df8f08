import { writeFileSync, mkdirSync } from 'node:fs'
import { brownParagraphs } from '/work/main/packages/datakit/src/test-support/brown.ts'
import { ZephyrContext, Dataset } from '@marin/zephyr'
const o = [...new Set(brownParagraphs(4))]
const half = Math.floor(o.length / 2)
const long = o.slice(0, half).filter((p) => p.split(' ').length >= 60)
const exactPlants = long.slice(0, 6).map((p) => `  ${p.toUpperCase().replace(/ /g, ' \n ')}  `)
mkdirSync('/tmp/dk/d2', { recursive: true })
writeFileSync('/tmp/dk/d2/c.jsonl', exactPlants.map((text) => JSON.stringify({ text, planted: true })).join('\n') + '\n')
const ctx = new ZephyrContext({ progress: 'off' })
const r = await ctx.execute(Dataset.fromList(['file:///tmp/dk/d2/c.jsonl'], { numShards: 1 }).loadJsonl())
console.log(long.length, r.results.length)
