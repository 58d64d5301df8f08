/**
 * `s3://` and `gs://` when their optional peer is not installed. The storage
 * sources are copied outside the workspace and run in a child Node process,
 * so module resolution sees exactly what a user without the peer has, even
 * when the workspace itself has the package installed for other tests.
 */
import { execFile } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, describe, expect, test } from 'vitest'
import { isRiggingError } from '../errors.js'
import { parseBucketUrl } from './s3.js'

const here = fileURLToPath(new URL('.', import.meta.url))
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
const dirs: string[] = []
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })))
})

/** A copy of src/errors.ts and src/storage/*.ts (no tests) in a fresh dir under /tmp. */
function isolatedCopy(): string {
  const root = mkdtempSync(join(tmpdir(), 'rigging-nopeer-'))
  dirs.push(root)
  mkdirSync(join(root, 'src', 'storage'), { recursive: true })
  writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module' }))
  cpSync(join(here, '..', 'errors.ts'), join(root, 'src', 'errors.ts'))
  for (const f of readdirSync(here).filter((n) => n.endsWith('.ts') && !n.endsWith('.test.ts'))) {
    cpSync(join(here, f), join(root, 'src', 'storage', f))
  }
  return root
}

async function openInIsolation(url: string): Promise<{ code: string; message: string }> {
  const root = isolatedCopy()
  const script = join(root, 'probe.ts')
  writeFileSync(
    script,
    `import { openStorage } from './src/storage/open-storage.js'
try { await openStorage(${JSON.stringify(url)}); console.log(JSON.stringify({ code: 'OPENED', message: '' })) }
catch (err) { console.log(JSON.stringify({ code: err.code, message: err.message })) }
`,
  )
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', tsx, script], { cwd: root })
  return JSON.parse(stdout.trim()) as { code: string; message: string }
}

describe('object-store adapters without their optional peer', () => {
  test.each([
    ['s3://my-bucket/runs', '@aws-sdk/client-s3'],
    ['gs://my-bucket/runs', '@google-cloud/storage'],
  ])('%s: STORAGE_ADAPTER_MISSING naming %s and how to add it', async (url, pkg) => {
    const got = await openInIsolation(url)
    expect(got.code).toBe('STORAGE_ADAPTER_MISSING')
    expect(got.message).toContain(`storage URL ${url} needs the optional package ${pkg}`)
    expect(got.message).toContain(`pnpm add ${pkg}`)
  })
})

describe('bucket URLs', () => {
  test('bucket and prefix are split; bad URLs say what to write', () => {
    expect(parseBucketUrl('s3://b', 's3')).toEqual({ bucket: 'b', prefix: '' })
    expect(parseBucketUrl('s3://b/x/y/', 's3')).toEqual({ bucket: 'b', prefix: 'x/y' })
    expect(parseBucketUrl('gs://b/p', 'gs')).toEqual({ bucket: 'b', prefix: 'p' })
    const err = (() => {
      try {
        return parseBucketUrl('s3:///nobucket', 's3')
      } catch (e) {
        return e
      }
    })()
    expect(isRiggingError(err, 'STORAGE_INVALID_PATH')).toBe(true)
    expect((err as Error).message).toMatch(/expected s3:\/\/bucket or s3:\/\/bucket\/prefix/)
    expect(() => parseBucketUrl('gs://b/../etc', 'gs')).toThrow(/contains "\.\."/)
  })
})
