import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import type { Command } from 'commander'
import { loadAllCommands, runCli, UsageError } from './run-cli.js'

const DEMO = fileURLToPath(new URL('./fixtures/demo-cli.ts', import.meta.url))

/** Runs the demo CLI in a real child process. */
function demo(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', DEMO, ...args], { encoding: 'utf8' }, (error, out, err) => {
      resolve({ code: error ? Number(error.code) : 0, out, err })
    })
  })
}

describe('exit codes of a real process', () => {
  test('no arguments print help on stderr and exit 2', async () => {
    const r = await demo()
    expect(r.code).toBe(2)
    expect(r.err).toMatch(/Usage: demo \[options\] \[command\]/)
    expect(r.err).toMatch(/greet\s+greet someone/)
  }, 60_000)

  test('--version prints the version; --help exits 0 and loads no command', async () => {
    const [v, h] = await Promise.all([demo('--version'), demo('--help')])
    expect(v).toMatchObject({ code: 0, out: '1.2.3\n' })
    expect(h.code).toBe(0)
    expect(h.out).toMatch(/fail\s+fail in a chosen way/)
    expect(h.out).toMatch(/--prefix <prefix>\s+Marin prefix/)
    expect(h.err).not.toContain('loaded')
  }, 60_000)

  test('a command runs; only its own module is imported', async () => {
    const r = await demo('--loud', 'greet', 'ann', '--times', '2')
    expect(r).toMatchObject({ code: 0, out: 'HELLO ann\nHELLO ann\n' })
    expect(r.err).toBe('loaded demo-greet\n')
  }, 60_000)

  test('a command chooses its exit code', async () => {
    expect((await demo('greet', 'bo', '--exit', '3')).code).toBe(3)
  }, 60_000)

  test('bad usage exits 2: unknown command, missing argument, unknown ' +
    "option, UsageError, the package's usage errors", async () => {
    const [unknown, missing, option, usage, bad] = await Promise.all([
      demo('frobnicate'),
      demo('greet'),
      demo('greet', 'x', '--bogus'),
      demo('fail', 'usage'),
      demo('fail', 'bad'),
    ])
    expect(unknown).toMatchObject({ code: 2, err: expect.stringMatching(/unknown command 'frobnicate'/) })
    expect(missing).toMatchObject({ code: 2, err: expect.stringMatching(/missing required argument 'who'/) })
    expect(option).toMatchObject({ code: 2, err: expect.stringMatching(/unknown option '--bogus'/) })
    expect(usage).toMatchObject({ code: 2, err: expect.stringContaining('demo: --how: "usage" was asked for\n') })
    expect(bad).toMatchObject({ code: 2, err: expect.stringContaining('demo: a package error that means bad usage\n') })
  }, 60_000)

  test('any other failure (not found) exits 1 with the message', async () => {
    const r = await demo('fail', 'widget')
    expect(r.code).toBe(1)
    expect(r.err).toContain('demo: no thing "widget"; run demo list\n')
  }, 60_000)

  test("a command's help shows its own options; a group without a subcommand is bad usage", async () => {
    const [help, helpCmd, group, inner] = await Promise.all([
      demo('greet', '--help'),
      demo('help', 'greet'),
      demo('group'),
      demo('group', 'inner'),
    ])
    expect(help).toMatchObject({
      code: 0,
      out: expect.stringMatching(/Usage: demo greet \[options\] <who>[\s\S]*--times <n>/),
    })
    expect(helpCmd).toMatchObject({ code: 0, out: expect.stringMatching(/--times <n>/) })
    expect(group.code).toBe(2)
    expect(group.err).toMatch(/inner\s+the only subcommand/)
    expect(inner).toMatchObject({ code: 0, out: 'inner ran\n' })
  }, 60_000)
})

test('in process: output goes to the io given; loadAllCommands defines every command for inspection', async () => {
  const out: string[] = []
  const err: string[] = []
  const spec = {
    package: { bin: { tiny: './tiny.js' }, version: '0.0.1', description: 'tiny' },
    commands: [
      {
        name: 'go',
        description: 'go',
        load: async () => (cmd: Command) =>
          void cmd.option('--far', 'how far').action(() => {
            throw new UsageError('not that way')
          }),
      },
    ],
  }
  expect(await runCli(spec, ['go'], { out: (s) => out.push(s), err: (s) => err.push(s) })).toBe(2)
  expect(err.join('')).toBe('tiny: not that way\n')
  expect(await runCli(spec, ['--version'], { out: (s) => out.push(s), err: (s) => err.push(s) })).toBe(0)
  expect(out.join('')).toBe('0.0.1\n')
  const program = await loadAllCommands(spec, { out: () => {}, err: () => {} })
  expect(program.commands.find((c) => c.name() === 'go')!.options.map((o) => o.long)).toEqual(['--far'])
})
