import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { configureLogging } from '@marin/rigging'
import { Help } from 'commander'
import pkg from '../../package.json' with { type: 'json' }
import { COMMANDS, buildProgram, runCli } from './program.js'

const fixture = (f: string) => join(import.meta.dirname, '..', 'fixtures', f)
let prefix: string
beforeAll(() => {
  prefix = mkdtempSync(join(tmpdir(), 'marin-cli-'))
  configureLogging({ destination: { write: () => {} }, pretty: false })
})
afterAll(() => rmSync(prefix, { recursive: true, force: true }))

async function cli(...argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(argv, { out: (l) => out.push(l), err: (l) => err.push(l), env: { MARIN_PREFIX: prefix } })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

describe('marin CLI', () => {
  test('marin export copies the files of an artifact version into a folder; an unknown one is named', async () => {
    const { openStore, storeUrl } = await import('@marin/finestore')
    // A prefix of its own: the other tests look at what is under theirs.
    const own = mkdtempSync(join(tmpdir(), 'marin-cli-export-'))
    const cli = async (...argv: string[]) => {
      const out: string[] = []
      const err: string[] = []
      const code = await runCli(argv, { out: (l) => out.push(l), err: (l) => err.push(l), env: { MARIN_PREFIX: own } })
      return { code, out: out.join('\n'), err: err.join('\n') }
    }
    const store = await openStore({ url: storeUrl(own) })
    try {
      await store.commit('models/tiny', async (txn) => {
        await txn.put('config.json', '{"n":1}')
        await txn.put('weights/model.safetensors', new Uint8Array([1, 2, 3]))
      })
    } finally {
      store.close()
    }
    const dest = join(own, 'exported')
    const r = await cli('export', 'models/tiny@1', dest)
    expect(r, r.err).toMatchObject({ code: 0 })
    expect(r.out).toContain(`2 files of models/tiny@1 → ${dest}`)
    expect(readFileSync(join(dest, 'config.json'), 'utf8')).toBe('{"n":1}')
    expect([...readFileSync(join(dest, 'weights', 'model.safetensors'))]).toEqual([1, 2, 3])
    // A folder that is not empty is refused (nothing is overwritten).
    expect(await cli('export', 'models/tiny@1', dest)).toMatchObject({
      code: 2,
      err: expect.stringMatching(/not empty/),
    })
    const missing = await cli('export', 'models/nope@1', join(own, 'other'))
    expect(missing.code).toBe(1)
    expect(missing.err).toMatch(/models\/nope/)
    rmSync(own, { recursive: true, force: true })
  })

  test('the help line of every command, listed without loading it, is the one the loaded command has', async () => {
    const program = await buildProgram({ out: () => {}, err: () => {}, env: {} })
    for (const entry of COMMANDS) {
      const cmd = program.commands.find((c) => c.name() === entry.name)!
      expect({ name: cmd.name(), term: new Help().subcommandTerm(cmd), description: cmd.description() }).toEqual({
        name: entry.name,
        term: entry.term,
        description: entry.description,
      })
    }
  })

  test('no arguments print help and exit 2; --version prints the package version', async () => {
    const none = await cli()
    expect(none.code).toBe(2)
    expect(none.err).toMatch(/Usage: marin/)
    for (const c of COMMANDS) expect(none.err).toContain(`\n  ${c.term} `)
    expect(await cli('--version')).toMatchObject({ code: 0, out: pkg.version })
  })

  test("marin help COMMAND and marin COMMAND --help print that command's own options", async () => {
    expect(await cli('help', 'run')).toMatchObject({ code: 0, out: expect.stringMatching(/--max-concurrent <n>/) })
    expect(await cli('ls', '--help')).toMatchObject({ code: 0, out: expect.stringMatching(/--json/) })
  })

  test('bad usage exits 2 naming the problem', async () => {
    expect(await cli('run')).toMatchObject({ code: 2, err: expect.stringMatching(/missing required argument 'file'/) })
    expect(await cli('run', 'x.ts', '--max-concurrent', '0')).toMatchObject({
      code: 2,
      err: expect.stringMatching(/--max-concurrent.*whole number >= 1/),
    })
    expect(await cli('run', 'x.ts', '--run-only', '(')).toMatchObject({
      code: 2,
      err: expect.stringMatching(/--run-only.*not a regular expression/),
    })
    expect(await cli('run', 'missing.ts')).toMatchObject({
      code: 2,
      err: expect.stringMatching(/experiment script missing.ts does not exist/),
    })
    expect(await cli('run', fixture('not-experiment.ts'))).toMatchObject({
      code: 2,
      err: expect.stringMatching(/must `export default` an Experiment.*its default export is object/),
    })
    expect(await cli('frobnicate')).toMatchObject({
      code: 2,
      err: expect.stringMatching(/unknown command 'frobnicate'/),
    })
    expect(await cli('status', 'nope')).toMatchObject({
      code: 2,
      err: expect.stringMatching(/no experiment named "nope" has run under/),
    })
    expect(await cli('explain', 'nope')).toMatchObject({
      code: 2,
      err: expect.stringMatching(/no step named "nope" has run under/),
    })
    expect(await cli('ls')).toMatchObject({ code: 0, out: expect.stringMatching(/no steps under/) })
  })

  test('a script that throws while building steps: its own stack, nothing run', async () => {
    const r = await cli('run', fixture('throws.ts'), '--local')
    expect(r.code).toBe(1)
    expect(r.err).toMatch(/experiment script .*throws\.ts threw while building its steps; nothing was run/)
    expect(r.err).toMatch(/unknown dataset "nope"/)
    expect(r.err).toMatch(/at datasetSteps \(.*fixtures\/throws\.ts:5:/)
    expect(readdirSync(prefix)).toEqual([])
  })

  test('a script that calls experiment.main() itself runs once under marin run', async () => {
    const before = process.exitCode
    const r = await cli('run', fixture('calls-main.ts'), '--local', '--dry-run')
    expect(r.code).toBe(0)
    // main() would have parsed this process's own arguments and set its exit code.
    expect(process.exitCode).toBe(before)
    expect(r.out.match(/plan calls_main/g)).toHaveLength(1)
  })

  test('a dependency cycle is named and nothing runs', async () => {
    const r = await cli('run', fixture('cycle.ts'), '--local')
    expect(r.code).toBe(1)
    expect(r.err).toMatch(/steps depend on each other in a cycle: a -> b -> a/)
    expect(existsSync(join(prefix, 'experiments'))).toBe(false)
  })

  test('run --local, status, ls, explain, run --dry-run', async () => {
    const run = await cli('run', fixture('three-steps.ts'), '--local', '--max-concurrent', '2')
    expect(run).toMatchObject({ code: 0 })
    expect(run.out).toMatch(/SUCCESS train_\w{8}/)
    const status = await cli('status')
    expect(status.out).toMatch(/three_steps +SUCCESS +\S+ +3 steps/)
    const one = await cli('status', 'three_steps')
    expect(one.out).toMatch(/tokenize_\w{8} +SUCCESS +now SUCCESS/)
    const ls = await cli('ls')
    expect(ls.out.split('\n')).toHaveLength(3)
    expect(ls.out).toContain(join(prefix, 'ingest_'))
    const explain = await cli('explain', 'tokenize')
    expect(explain.out).toMatch(/this is the only completed version/)
    const dry = await cli('run', fixture('three-steps.ts'), '--dry-run')
    expect(dry.out).toMatch(/plan three_steps: 3 steps/)
    expect(dry.out.match(/skip {2}\w+_\w{8} +done at /g)).toHaveLength(3)
  })
})
