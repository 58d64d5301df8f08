import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeEach, describe, expect, test } from 'vitest'
import { z } from 'zod'
import { ConfigError, loadConfig } from './config.js'
import { jsonErrorOffset } from './config-file.js'
import type { RiggingError } from './errors.js'

const Model = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('gpt2'), nLayers: z.int().positive().default(2) }),
  z.strictObject({ type: z.literal('llama'), ropeTheta: z.number().default(10000) }),
])
const Config = z.strictObject({
  name: z.string(),
  trainer: z
    .strictObject({
      maxSteps: z.int().positive().default(1000),
      lr: z.number().positive().default(6e-4),
      tags: z.array(z.string()).default([]),
      mixedPrecision: z.boolean().default(false),
    })
    .prefault({}),
  model: Model.optional(),
  secrets: z.record(z.string(), z.string()).default({}),
  data: z.object({ path: z.string().optional(), shards: z.int().default(1) }).prefault({}),
})

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'rigging-config-'))
})
const file = (name: string, text: string) => {
  const p = join(dir, name)
  writeFileSync(p, text)
  return p
}
function thrown(fn: () => unknown): RiggingError {
  try {
    fn()
  } catch (err) {
    return err as RiggingError
  }
  throw new Error('expected a throw')
}

describe('loading', () => {
  test('a YAML file plus schema defaults', () => {
    const cfg = loadConfig(Config, {
      files: [file('a.yaml', 'name: tiny\ntrainer:\n  lr: 0.01\nmodel:\n  type: gpt2\n')],
      env: false,
    })
    expect(cfg).toEqual({
      name: 'tiny',
      trainer: { maxSteps: 1000, lr: 0.01, tags: [], mixedPrecision: false },
      model: { type: 'gpt2', nLayers: 2 },
      secrets: {},
      data: { shards: 1 },
    })
  })

  test('files merge in order: objects deeply, lists replaced; JSON by extension', () => {
    const a = file('base.yaml', 'name: base\ntrainer:\n  maxSteps: 10\n  tags: [a, b]\n')
    const b = file('over.json', JSON.stringify({ trainer: { tags: ['c'] }, data: { shards: 4 } }))
    const cfg = loadConfig(Config, { files: [a, b], env: false })
    expect(cfg.name).toBe('base')
    expect(cfg.trainer).toMatchObject({ maxSteps: 10, tags: ['c'] })
    expect(cfg.data.shards).toBe(4)
  })

  test('an empty YAML file sets nothing', () => {
    expect(loadConfig(Config, { files: [file('empty.yaml', '')], overrides: { name: 'x' }, env: false }).name).toBe('x')
  })

  test('YAML anchors and merge keys work', () => {
    const p = file('anchors.yaml', 'base: &b\n  maxSteps: 7\nname: n\ntrainer:\n  <<: *b\n  lr: 0.1\n')
    const Loose = Config.extend({ base: z.unknown() })
    expect(loadConfig(Loose, { files: [p], env: false }).trainer).toMatchObject({ maxSteps: 7, lr: 0.1 })
  })
})

describe('environment overrides', () => {
  const base = () => file('base.yaml', 'name: base\ntrainer:\n  maxSteps: 10\n')

  test('MARIN_A__B_C sets a.bC, typed by the schema', () => {
    const cfg = loadConfig(Config, {
      files: [base()],
      env: {
        MARIN_TRAINER__MAX_STEPS: '25',
        MARIN_TRAINER__MIXED_PRECISION: 'true',
        MARIN_TRAINER__TAGS: '[x, y]',
        MARIN_NAME: '123', // a string field keeps the text as is
        MARIN_SECRETS__OPENAI_API_KEY: 'env:OPENAI_KEY', // record keys are lower-cased
        MARIN_MODEL: '{type: llama}',
        MARIN_PREFIX: '/data/marin', // not a field of this schema: left to its owner
        OTHER__THING: 'ignored',
      },
    })
    expect(cfg.trainer).toMatchObject({ maxSteps: 25, mixedPrecision: true, tags: ['x', 'y'] })
    expect(cfg.name).toBe('123')
    expect(cfg.secrets).toEqual({ openai_api_key: 'env:OPENAI_KEY' })
    expect(cfg.model).toEqual({ type: 'llama', ropeTheta: 10000 })
  })

  test('overrides win over env, env over files', () => {
    const cfg = loadConfig(Config, {
      files: [base()],
      env: { MARIN_TRAINER__MAX_STEPS: '25' },
      overrides: { trainer: { maxSteps: 99 } },
    })
    expect(cfg.trainer.maxSteps).toBe(99)
  })

  test('a custom prefix', () => {
    expect(
      loadConfig(Config, { files: [base()], env: { APP_NAME: 'via-app', MARIN_NAME: 'not-me' }, envPrefix: 'APP_' })
        .name,
    ).toBe('via-app')
  })

  test('an unknown nested field in a variable is an error naming the variable', () => {
    const err = thrown(() => loadConfig(Config, { files: [base()], env: { MARIN_TRAINER__MAX_STEPZ: '1' } }))
    expect(err.code).toBe('CONFIG_INVALID')
    expect(err.message).toBe(
      'MARIN_TRAINER__MAX_STEPZ: config field trainer.MAX_STEPZ does ' +
        'not exist; fields under trainer are maxSteps, lr, tags, ' +
        'mixedPrecision',
    )
  })

  test('a wrongly typed variable names the variable and the expected type', () => {
    const err = thrown(() =>
      loadConfig(Config, { files: [base()], env: { MARIN_TRAINER__MAX_STEPS: 'many' } }),
    ) as ConfigError
    expect(err).toBeInstanceOf(ConfigError)
    expect(err.issues).toEqual([
      {
        field: 'trainer.maxSteps',
        message: 'expected number, received string',
        source: 'env MARIN_TRAINER__MAX_STEPS',
      },
    ])
  })
})

describe('bad input', () => {
  test('malformed YAML: CONFIG_PARSE with file, line and column', () => {
    const p = file('bad.yaml', 'name: x\ntrainer:\n  tags: [a, b\n  lr: 1\n')
    const err = thrown(() => loadConfig(Config, { files: [p], env: false }))
    expect(err.code).toBe('CONFIG_PARSE')
    expect(err.message).toMatch(new RegExp(`^${p}:\\d+:\\d+: invalid YAML: .*fix the syntax at that line`))
  })

  test('a duplicate key in YAML names its line', () => {
    const p = file('dup.yaml', 'name: a\ntrainer:\n  lr: 1\n  lr: 2\n')
    const err = thrown(() => loadConfig(Config, { files: [p], env: false }))
    expect(err.code).toBe('CONFIG_PARSE')
    expect(err.message).toContain(`${p}:4:3: invalid YAML: Map keys must be unique`)
  })

  test('malformed JSON: CONFIG_PARSE with the line of the error', () => {
    const p = file('bad.json', '{\n  "name": "x",\n  "trainer": { "lr": }\n}\n')
    const err = thrown(() => loadConfig(Config, { files: [p], env: false }))
    expect(err.code).toBe('CONFIG_PARSE')
    expect(err.message).toMatch(new RegExp(`^${p}:3:22: invalid JSON`))
  })

  test('jsonErrorOffset finds the first error', () => {
    expect(jsonErrorOffset('{"a": [1, 2,]}')).toBe(12)
    expect(jsonErrorOffset('{"a": 1} x')).toBe(9)
    expect(jsonErrorOffset('{"a": "unterminated')).toBe(19)
    expect(jsonErrorOffset('{"a": tru}')).toBe(6)
  })

  test('a missing file is CONFIG_NOT_FOUND; a directory is CONFIG_PARSE', () => {
    const missing = thrown(() => loadConfig(Config, { files: [join(dir, 'nope.yaml')] }))
    expect(missing.code).toBe('CONFIG_NOT_FOUND')
    expect(missing.message).toContain(`config file ${join(dir, 'nope.yaml')} does not exist`)
    mkdirSync(join(dir, 'folder.yaml'))
    expect(thrown(() => loadConfig(Config, { files: [join(dir, 'folder.yaml')] })).code).toBe('CONFIG_PARSE')
  })

  test('a top level that is not a mapping', () => {
    const err = thrown(() => loadConfig(Config, { files: [file('list.yaml', '- a\n- b\n')] }))
    expect(err.code).toBe('CONFIG_INVALID')
    expect(err.message).toContain('the top level must be a mapping of field names to values, got a list')
  })

  test('wrong types: file, line, field path and what was expected, all at once', () => {
    const p = file('types.yaml', 'name: x\ntrainer:\n  maxSteps: ten\n  lr: -1\nmodel:\n  type: t5\n')
    const err = thrown(() => loadConfig(Config, { files: [p], env: false })) as ConfigError
    expect(err.code).toBe('CONFIG_INVALID')
    expect(err.issues).toEqual([
      { field: 'trainer.maxSteps', message: 'expected number, received string', source: `${p}:3:13` },
      { field: 'trainer.lr', message: 'Too small: expected number to be >0', source: `${p}:4:7` },
      { field: 'model.type', message: "Invalid discriminator value. Expected 'gpt2' | 'llama'", source: `${p}:6:9` },
    ])
    expect(err.message).toContain(`${p}:3:13: trainer.maxSteps: expected number, received string`)
    expect(err.message).toMatch(/fix these fields and run again$/)
  })

  test('unknown keys are rejected, in strict and in plain objects, with the known fields', () => {
    const p = file('unknown.yaml', 'name: x\ntrainer:\n  maxStep: 5\ndata:\n  shard: 2\nextra: 1\n')
    const err = thrown(() => loadConfig(Config, { files: [p], env: false })) as ConfigError
    expect(err.issues).toEqual([
      {
        field: 'trainer.maxStep',
        message: 'unknown key "maxStep"; known fields: maxSteps, lr, tags, mixedPrecision',
        source: `${p}:3:12`,
      },
      { field: 'data.shard', message: 'unknown key "shard"; known fields: path, shards', source: `${p}:5:10` },
      {
        field: 'extra',
        message: 'unknown key "extra"; known fields: name, trainer, model, secrets, data',
        source: `${p}:6:8`,
      },
    ])
  })

  test('unknown keys inside a union option come from zod, still with their source', () => {
    const p = file('u.json', JSON.stringify({ name: 'x', model: { type: 'gpt2', nHeads: 4 } }, null, 2))
    const err = thrown(() => loadConfig(Config, { files: [p], env: false })) as ConfigError
    expect(err.issues).toEqual([
      {
        field: 'model.nHeads',
        message: 'unknown key "nHeads"',
        source: expect.stringMatching(new RegExp(`^${p}:\\d+:\\d+$`)),
      },
    ])
  })

  test('a missing required field says so', () => {
    const err = thrown(() =>
      loadConfig(Config, { files: [file('none.yaml', 'trainer: {}\n')], env: false }),
    ) as ConfigError
    expect(err.issues).toEqual([
      {
        field: 'name',
        message: 'expected string, received undefined (a required field is missing)',
        source: `${join(dir, 'none.yaml')}:1:1`,
      },
    ])
  })
})
