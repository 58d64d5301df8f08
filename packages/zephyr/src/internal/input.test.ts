import { existsSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { tableFromArrays, tableToIPC } from 'apache-arrow'
import { expect, test } from 'vitest'
import { tempDir } from '../fixtures/tmp.js'
import { readArrow } from '../readers/arrow.js'
import { openInput } from './input.js'

/** The file descriptors of this process that are open on `path` (Linux's /proc). */
function openFdsOn(path: string): string[] {
  return readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === path
    } catch {
      return false
    }
  })
}

/** Waits until nothing in this process holds `path` open; closing is asynchronous. */
async function waitClosed(path: string): Promise<void> {
  for (let i = 0; i < 500 && openFdsOn(path).length > 0; i++) await new Promise((r) => setTimeout(r, 20))
  expect(openFdsOn(path)).toEqual([])
}

const hasProc = existsSync('/proc/self/fd')

test.skipIf(!hasProc)('an input abandoned before its end closes its file (plain and gzip)', async () => {
  const dir = tempDir()
  const big = Buffer.alloc(8 << 20, 'a')
  const plain = join(dir, 'big.txt')
  const gz = join(dir, 'big.txt.gz')
  writeFileSync(plain, big)
  writeFileSync(gz, gzipSync(big))
  for (const path of [plain, gz]) {
    const stream = await openInput(path)
    for await (const chunk of stream) {
      expect((chunk as Buffer).length).toBeGreaterThan(0)
      break
    }
    await waitClosed(path)
  }
})

test.skipIf(!hasProc)(
  'an Arrow read stopped after its first batch, or failing on a truncated file, closes its file',
  async () => {
    const dir = tempDir()
    const bytes = tableToIPC(tableFromArrays({ x: Float64Array.from({ length: 1000 }, (_, i) => i) }), 'stream')
    const whole = join(dir, 'whole.arrows')
    const cut = join(dir, 'cut.arrows')
    const batch = () => tableFromArrays({ x: Float64Array.from({ length: 1 << 16 }, (_, i) => i) })
    writeFileSync(whole, tableToIPC(batch().concat(...Array.from({ length: 7 }, batch)), 'stream'))
    writeFileSync(cut, bytes.subarray(0, bytes.length - 500))

    for await (const rows of readArrow(whole)) {
      expect(rows).toHaveLength(1 << 16)
      break
    }
    await waitClosed(whole)

    const readAll = async (path: string) => {
      for await (const rows of readArrow(path)) expect(rows.length).toBeGreaterThan(0)
    }
    await expect(readAll(cut)).rejects.toMatchObject({ code: 'CORRUPT_ARROW' })
    await waitClosed(cut)
  },
)
