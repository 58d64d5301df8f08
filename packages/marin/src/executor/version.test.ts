import { describe, expect, test } from 'vitest'
import { MemoryStorage } from '@marin/rigging'
import { canonicalJson } from './canonical-json.js'
import { Config } from './experiment.js'
import { prepare } from './executor.js'
import { topoSort } from './graph.js'
import { step, type Step } from './step.js'
import { computeVersions } from './version.js'
import { versioned } from './versioned.js'

const noop = () => {}

function pipeline(opts: { vocab?: number; workers?: number; order?: 'ab' | 'ba'; lr?: number } = {}) {
  const ingest = step({
    name: 'ingest',
    config: { source: versioned('brown'), scratch: `/tmp/${Math.random()}` },
    fn: noop,
  })
  const tok =
    opts.order === 'ba'
      ? { workers: opts.workers ?? 2, vocab: versioned(opts.vocab ?? 256), input: ingest.output('docs') }
      : { input: ingest.output('docs'), vocab: versioned(opts.vocab ?? 256), workers: opts.workers ?? 2 }
  const tokenize = step({ name: 'tokenize', config: tok, fn: noop })
  const train = step({
    name: 'train',
    config: { data: tokenize.output(), opt: { lr: versioned(opts.lr ?? 3e-4), beta: versioned(0.9) }, logEvery: 10 },
    fn: noop,
  })
  return { ingest, tokenize, train }
}

const hashes = (p: ReturnType<typeof pipeline>) => {
  const v = computeVersions(topoSort([p.train]))
  return { ingest: v.get(p.ingest)!.nameHash, tokenize: v.get(p.tokenize)!.nameHash, train: v.get(p.train)!.nameHash }
}

describe('step versions', () => {
  test('canonical JSON sorts keys at every depth and refuses what JSON cannot hold', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[1,{"x":1,"y":2}]},"b":1}',
    )
    expect(() => canonicalJson({ lr: Number.NaN })).toThrow(/config\.lr: NaN cannot be part of a version/)
    expect(() => canonicalJson({ f: () => 1 })).toThrow(/config\.f: a function cannot be part of a version/)
  })

  test('the same config gives the same hash, whatever the key order', () => {
    expect(hashes(pipeline({ order: 'ab' }))).toEqual(hashes(pipeline({ order: 'ba' })))
    expect(hashes(pipeline()).tokenize).toMatch(/^tokenize_[0-9a-f]{8}$/)
  })

  test('the hash does not depend on the prefix; the output path does', async () => {
    const p = pipeline()
    const a = prepare([p.train], new MemoryStorage('prefix-a'))
    const b = prepare([p.train], new MemoryStorage('prefix-b'))
    expect(a.versions.get(p.train)!.hash).toBe(b.versions.get(p.train)!.hash)
    const ca = a.configs.get(p.train) as { data: string; opt: { lr: number }; logEvery: number }
    expect(ca.data).toBe(`memory://prefix-a/${a.versions.get(p.tokenize)!.nameHash}`)
    expect(ca.opt.lr).toBe(3e-4)
    expect(ca.logEvery).toBe(10)
    expect((b.configs.get(p.train) as { data: string }).data).toContain('memory://prefix-b/')
  })

  test('an unversioned field leaves the hash alone; a versioned one changes it and every dependent', () => {
    const base = hashes(pipeline())
    expect(hashes(pipeline({ workers: 16 }))).toEqual(base)
    const vocab = hashes(pipeline({ vocab: 512 }))
    expect(vocab.ingest).toBe(base.ingest)
    expect(vocab.tokenize).not.toBe(base.tokenize)
    expect(vocab.train).not.toBe(base.train)
    const lr = hashes(pipeline({ lr: 1e-3 }))
    expect(lr.tokenize).toBe(base.tokenize)
    expect(lr.train).not.toBe(base.train)
  })

  test('a pinned hash: the version formula does not drift', () => {
    const s = step({
      name: 'pinned',
      config: { a: versioned(1), b: versioned({ y: [1, 'two'], x: true }), c: 'free' },
      fn: noop,
    })
    const v = computeVersions([s]).get(s)!
    // sha256 of {"config":{"a":1,"b":{"x":true,"y":[1,"two"]}},"dependencies":[],"name":"pinned"}
    expect(v.config).toEqual({ a: 1, b: { x: true, y: [1, 'two'] } })
    expect(v.hash).toBe('477deceac5c7fda8a8a389bf9f3f0f04b7bb18efee5d9fff50555aabfe7d0792')
    expect(v.nameHash).toBe('pinned_477decea')
    expect(v.fields).toEqual({ a: '1', 'b.x': 'true', 'b.y': '[1,"two"]' })
  })

  test('every field of a Config counts', () => {
    const cfg = new Config({ model: 'gpt2-small', batchSize: 128 })
    const a = step({ name: 'train', config: { cfg, note: 'free' }, fn: noop })
    const b = step({ name: 'train', config: { cfg: cfg.with({ batchSize: 64 }), note: 'other' }, fn: noop })
    const c = step({
      name: 'train',
      config: { cfg: new Config({ batchSize: 128, model: 'gpt2-small' }), note: 'x' },
      fn: noop,
    })
    const h = (s: typeof a) => computeVersions([s]).get(s)!.hash
    expect(h(a)).not.toBe(h(b))
    expect(h(a)).toBe(h(c))
    expect(() => cfg.get('lr' as never)).toThrow(/config has no field "lr"; known fields: model, batchSize/)
  })

  test('a cycle is named; two different steps with one name are refused', () => {
    const refs: Record<string, Step> = {}
    refs.a = step({ name: 'a', config: () => ({ x: refs.c!.output() }), fn: noop })
    refs.b = step({ name: 'b', config: () => ({ x: refs.a!.output() }), fn: noop })
    refs.c = step({ name: 'c', config: () => ({ x: refs.b!.output() }), fn: noop })
    expect(() => topoSort([refs.a!])).toThrow(/steps depend on each other in a cycle: a -> c -> b -> a/)
    const x1 = step({ name: 'x', config: {}, fn: noop })
    const x2 = step({ name: 'x', config: {}, fn: noop })
    const y = step({ name: 'y', config: { a: x1.output(), b: x2.output() }, fn: noop })
    expect(() => topoSort([y])).toThrow(/two different steps are named "x"/)
    expect(() => step({ name: '../up', config: {}, fn: noop })).toThrow(/step name "..\/up" is invalid/)
  })
})
