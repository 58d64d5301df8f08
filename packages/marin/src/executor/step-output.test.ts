import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { openStorage, type Storage } from '@marin/rigging'
import { clearOtherStaging, discardStaging, newStaging, publishOutput } from './step-output.js'

const dirs: string[] = []
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })))
let n = 0
const stores: [string, () => Promise<Storage>][] = [
  [
    'file',
    () => {
      const d = mkdtempSync(join(tmpdir(), 'marin-output-'))
      dirs.push(d)
      return openStorage(d)
    },
  ],
  ['memory (an object store: object by object)', () => openStorage(`memory://step-output-${process.pid}-${n++}`)],
]

const listAll = async (s: Storage, prefix: string) => {
  const out: string[] = []
  for await (const o of s.list(prefix)) out.push(o.path.slice(prefix.length))
  return out.filter((p) => !p.startsWith('.staging/')).sort()
}

describe.each(stores)('%s', (_kind, open) => {
  test('publishOutput replaces the previous output with the staged one and keeps the executor files', async () => {
    const s = await open()
    const step = 'train_1234abcd'
    for (const [p, v] of [
      ['.executor_status', 'RUNNING\n'],
      ['.executor_info', '{}'],
      ['logs/a.log', 'x'],
      ['old.txt', 'old'],
      ['keep/a.txt', 'old'],
      ['keep/gone.txt', 'old'],
    ]) {
      await s.write(`${step}/${p}`, v!)
    }
    const a = newStaging(s, step, `/out/${step}`)
    expect(a.rel).toMatch(new RegExp(`^${step}/\\.staging/[^/]+/${step}$`))
    await s.write(`${a.rel}/keep/a.txt`, 'new')
    await s.write(`${a.rel}/model.json`, '{}')
    // Another attempt's leftovers go; this attempt's stay.
    const b = newStaging(s, step, `/out/${step}`)
    await s.write(`${b.rel}/junk.txt`, 'junk')
    await clearOtherStaging(s, a)
    expect(await s.exists(`${b.rel}/junk.txt`)).toBe(false)
    expect(await s.exists(`${a.rel}/model.json`)).toBe(true)

    await publishOutput(s, a)
    await discardStaging(s, a)
    expect(await listAll(s, `${step}/`)).toEqual([
      '.executor_info',
      '.executor_status',
      'keep/a.txt',
      'logs/a.log',
      'model.json',
    ])
    expect(await s.readText(`${step}/keep/a.txt`)).toBe('new')
    expect(await listAll(s, `${step}/.staging/`)).toEqual([])
  })

  test('an output naming an executor file is refused and nothing moves', async () => {
    const s = await open()
    const step = 'x_1234abcd'
    await s.write(`${step}/old.txt`, 'old')
    const a = newStaging(s, step, `/out/${step}`)
    await s.write(`${a.rel}/new.txt`, 'new')
    await s.write(`${a.rel}/zz/.executor_status`, "not the executor's: inside a folder of the output")
    await s.write(`${a.rel}/logs/x.log`, 'x')
    await expect(publishOutput(s, a)).rejects.toThrow(
      /wrote "logs" into its output, a name the executor keeps for its own files/,
    )
    expect(await listAll(s, `${step}/`)).toEqual(['old.txt'])
  })
})
