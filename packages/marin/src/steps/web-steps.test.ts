/** The web steps' definitions: bad options refused when defined, thresholds part of the version. (They run end to end
 * in experiments/web-mixture.test.ts.) */
import { describe, expect, test } from 'vitest'
import { topoSort } from '../executor/graph.js'
import { step, type Step } from '../executor/step.js'
import { computeVersions } from '../executor/version.js'
import { languageFilterStep, qualityClassifierStep, qualityFilterStep, warcIngestStep } from './web-steps.js'

const version = (s: Step) => computeVersions(topoSort([s])).get(s)!
const sample = step({ name: 'sample', config: {}, fn: () => {} })
const pages = warcIngestStep({ name: 'web', source: [sample.output('a.warc.gz'), 'more/*.warc'] })
const hq = qualityClassifierStep({ name: 'hq', file: sample.output('examples.txt') })

describe('web steps', () => {
  test('a changed threshold is a new version, named by its field', () => {
    const a = version(languageFilterStep(pages, { name: 'web-en', languages: ['en'], threshold: 0.5 }))
    const b = version(languageFilterStep(pages, { name: 'web-en', languages: ['en'], threshold: 0.8 }))
    expect(b.nameHash).not.toBe(a.nameHash)
    expect(Object.keys(a.fields).filter((k) => a.fields[k] !== b.fields[k])).toEqual(['threshold'])
    const q = (o: { threshold?: number; topFraction?: number }) =>
      version(qualityFilterStep(pages, { name: 'web-hq', classifier: hq, label: 'hq', ...o }))
    expect(q({ threshold: 0.5 }).nameHash).not.toBe(q({ threshold: 0.6 }).nameHash)
    expect(q({ topFraction: 0.5 }).fields.topFraction).toBe('0.5')
    // the WARC sources: a step's output is a dependency, a glob a versioned string
    const w = version(pages)
    expect(w.dependencies).toEqual([version(sample).nameHash])
    expect(w.fields.source).toContain('more/*.warc')
  })

  test('bad options are refused when the step is defined', () => {
    expect(() => languageFilterStep(pages, { name: 'x', languages: [] })).toThrow(/languages is empty/)
    expect(() => qualityFilterStep(pages, { name: 'x', classifier: hq, label: 'hq' })).toThrow(
      /give exactly one of threshold and topFraction/,
    )
    expect(() =>
      qualityFilterStep(pages, { name: 'x', classifier: hq, label: 'hq', threshold: 0.5, topFraction: 0.1 }),
    ).toThrow(/give exactly one of threshold and topFraction/)
  })
})
