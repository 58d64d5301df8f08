/** Typed artifact references handed from step to step, and the `artifacts.json` that carries them (new and older
 * forms). */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { MemoryStorage, configureLogging } from '@marin/rigging'
import { writeArtifacts } from '../steps/artifacts.js'
import { artifactRef, formatArtifactRef, parseArtifactRef, parseStepArtifacts, type ArtifactRef } from './artifacts.js'
import { Executor, prepare } from './executor.js'
import { Experiment } from './experiment.js'
import { step } from './step.js'

let root: string
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-artifacts-'))
  configureLogging({ destination: { write: () => {} }, pretty: false })
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe('artifact references', () => {
  test('made, printed and parsed; bad ones are refused with the reason', () => {
    const ref = artifactRef('datasets/brown', 3)
    expect(ref).toEqual({ kind: 'artifact', name: 'datasets/brown', version: 3 })
    expect(formatArtifactRef(ref)).toBe('datasets/brown@3')
    expect(parseArtifactRef('models/gpt-brown@12')).toEqual({ kind: 'artifact', name: 'models/gpt-brown', version: 12 })
    expect(() => parseArtifactRef('datasets/brown')).toThrow(/"datasets\/brown" is not NAME@VERSION/)
    expect(() => artifactRef('datasets/brown', 0)).toThrow(/version must be a whole number >= 1/)
  })

  test('artifacts.json: the typed form, and the older forms old step folders hold', () => {
    const typed = { artifacts: [{ kind: 'artifact', name: 'datasets/a', version: 2 }], records: 5 }
    expect(parseStepArtifacts(JSON.stringify(typed), 'x/artifacts.json')).toEqual(typed)
    expect(parseStepArtifacts('{"artifacts":["datasets/a@2","checkpoints/r@1"],"steps":4}', 'f').artifacts).toEqual([
      artifactRef('datasets/a', 2),
      artifactRef('checkpoints/r', 1),
    ])
    expect(parseStepArtifacts('[{"artifact":"datasets/a","version":2}]', 'f').artifacts).toEqual([
      artifactRef('datasets/a', 2),
    ])
    expect(() => parseStepArtifacts('{"artifacts":[42]}', 'out/artifacts.json')).toThrow(
      /out\/artifacts.json: entry 0 \(42\) is not an artifact reference/,
    )
    expect(() => parseStepArtifacts('{"nothing":1}', 'out/artifacts.json')).toThrow(
      /out\/artifacts.json: lists no artifacts/,
    )
  })

  test(
    'step.artifact() hands the main artifact on as a typed ' + 'reference, from a new or an old step folder',
    async () => {
      const prefix = join(root, 'prefix')
      const seen: ArtifactRef[] = []
      const make = step({
        name: 'make',
        config: {},
        fn: async (_c, { outputPath }) =>
          writeArtifacts(outputPath, {
            artifacts: [artifactRef('datasets/made', 4), 'checkpoints/side@1'],
            note: 'hi',
          }),
      })
      const use = step({
        name: 'use',
        config: { input: make.artifact(), side: make.artifact(1) },
        fn: (c) => void seen.push(c.input, c.side),
      })
      const exp = new Experiment({ name: 'refs', steps: [use] })
      const rec = await new Executor({ prefix, leaseTtlMs: 2000 }).run(exp)
      expect(rec.steps.map((s) => s.error ?? s.status)).toEqual(['SUCCESS', 'SUCCESS'])
      expect(seen).toEqual([artifactRef('datasets/made', 4), artifactRef('checkpoints/side', 1)])
      const written = JSON.parse(readFileSync(join(prefix, rec.steps[0]!.nameHash, 'artifacts.json'), 'utf8'))
      expect(written).toEqual({
        artifacts: [
          { kind: 'artifact', name: 'datasets/made', version: 4 },
          { kind: 'artifact', name: 'checkpoints/side', version: 1 },
        ],
        note: 'hi',
      })

      // A step folder written before references were typed still hands its artifact on.
      writeFileSync(
        join(prefix, rec.steps[0]!.nameHash, 'artifacts.json'),
        '{"artifacts":["datasets/made@5","checkpoints/side@2"]}\n',
      )
      seen.length = 0
      const again = await new Executor({ prefix, leaseTtlMs: 2000, force: true, runOnly: /^use$/ }).run(exp)
      expect(again.steps.map((s) => `${s.name}:${s.error ?? s.status}`)).toEqual(['make:SKIPPED', 'use:SUCCESS'])
      expect(seen).toEqual([artifactRef('datasets/made', 5), artifactRef('checkpoints/side', 2)])
    },
  )

  test("an artifact input versions like output('artifacts.json'), so step versions stay what they were", async () => {
    const make = step({ name: 'make', config: {}, fn: () => {} })
    const byPath = step({ name: 'use', config: { input: make.output('artifacts.json') }, fn: () => {} })
    const byRef = step({ name: 'use', config: { input: make.artifact() }, fn: () => {} })
    const storage = new MemoryStorage('versions')
    expect(prepare([byRef], storage).versions.get(byRef)!.hash).toBe(
      prepare([byPath], storage).versions.get(byPath)!.hash,
    )
  })

  test('a missing artifacts.json fails the dependent step, naming the file and what to do', async () => {
    const prefix = join(root, 'missing')
    await mkdir(prefix, { recursive: true })
    const make = step({ name: 'make', config: {}, fn: () => {} })
    const use = step({ name: 'use', config: { input: make.artifact() }, fn: () => {} })
    const rec = await new Executor({ prefix, leaseTtlMs: 2000 }).run(new Experiment({ name: 'missing', steps: [use] }))
    expect(rec.steps.map((s) => s.status)).toEqual(['SUCCESS', 'FAILED'])
    expect(rec.steps[1]!.error).toMatch(
      /make_[0-9a-f]{8}\/artifacts.json: cannot read the artifacts of step "make".*run that step again with --force/,
    )
  })
})
