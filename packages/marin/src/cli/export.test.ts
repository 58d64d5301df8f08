import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { openStore, storeUrl } from '@marin/finestore'
import { configureLogging } from '@marin/rigging'
import { runCli } from './program.js'

let prefix: string
beforeAll(() => {
  prefix = mkdtempSync(join(tmpdir(), 'marin-export-'))
  configureLogging({ destination: { write: () => {} }, pretty: false })
})
afterAll(() => rmSync(prefix, { recursive: true, force: true }))

async function cli(...argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(argv, { out: (l) => out.push(l), err: (l) => err.push(l), env: { MARIN_PREFIX: prefix } })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

test.each([
  ['../../x.sh', () => join(prefix, 'x.sh')],
  ['ABS', () => join(prefix, 'abs.sh')],
])(
  'marin export of a version whose manifest lists %j refuses it, naming the entry, and writes nothing',
  async (entry, outside) => {
    const name = `models/evil-${entry === 'ABS' ? 'abs' : 'up'}`
    const store = await openStore({ url: storeUrl(prefix) })
    try {
      await store.commit(name, async (txn) => {
        await txn.put('ok.txt', 'fine')
        await txn.put('payload', '#!/bin/sh\necho pwned\n')
      })
    } finally {
      store.close()
    }
    // What someone else with write access to the shared store could do to the version's file.
    const manifest = join(prefix, 'store', 'artifacts', name, 'versions', '1.json')
    const m = JSON.parse(readFileSync(manifest, 'utf8'))
    const key = entry === 'ABS' ? outside() : entry
    m.files[key] = m.files.payload
    delete m.files.payload
    writeFileSync(manifest, JSON.stringify(m))

    const dest = join(prefix, 'a', 'b')
    const r = await cli('export', `${name}@1`, dest)
    expect(r.code).toBe(1)
    expect(r.err).toContain(
      `(${name}@1): file entry ${JSON.stringify(key)}: file path ${JSON.stringify(key)} is invalid`,
    )
    expect([existsSync(outside()), existsSync(join(prefix, 'a'))]).toEqual([false, false])
  },
)
