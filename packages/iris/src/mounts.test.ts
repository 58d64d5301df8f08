import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '@marin/finestore'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { isIrisError } from './errors.js'
import { LocalCluster } from './local-cluster.js'
import { parseMount } from './mount-spec.js'
import { finestoreMounts } from './mounts.js'

let dir: string
let storeUrl: string

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'iris-mounts-'))
  storeUrl = `file://${join(dir, 'store')}`
  const store = await openStore({ url: storeUrl })
  await store.commit('datasets/tiny', async (txn) => {
    await txn.put('train.txt', 'one\ntwo\n')
    await txn.put('meta/info.json', '{"rows":2}')
  })
  await store.commit('datasets/tiny', async (txn) => {
    await txn.put('train.txt', 'version two\n')
  })
  store.close()
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('parseMount', () => {
  test('reads ARTIFACT[@VERSION]:path', () => {
    expect(parseMount('datasets/tiny@1:data')).toEqual({ artifact: 'datasets/tiny', version: '1', path: 'data' })
    expect(parseMount('ckpt:inputs/ckpt')).toEqual({ artifact: 'ckpt', path: 'inputs/ckpt' })
  })
  test.each([
    ['nocolon', /expected ARTIFACT\[@VERSION\]:path/],
    ['a@:p', /empty/],
    ['a:/abs', /must be a relative path/],
    ['a:../up', /must be a relative path/],
  ])('refuses %j', (text, why) => {
    let err: unknown
    try {
      parseMount(text)
    } catch (e) {
      err = e
    }
    expect(isIrisError(err, 'BAD_MOUNT')).toBe(true)
    expect((err as Error).message).toMatch(why)
  })
})

describe('finestore mounts', () => {
  test('a task sees the pinned version read-only, and its path in the environment', async () => {
    const cluster = await LocalCluster.start({
      prefix: join(dir, 'prefix'),
      heartbeatMs: 200,
      resources: { cpu: 2, memory: 2 ** 30, gpu: 0 },
      materialize: finestoreMounts(storeUrl),
    })
    const iris = cluster.client()
    try {
      const id = await iris.submit({
        name: 'reader',
        mounts: ['datasets/tiny@1:data', 'datasets/tiny:latest'],
        command: [
          'sh',
          '-c',
          'cat data/train.txt; cat "$IRIS_MOUNT_DATA/meta/info.json"; ' +
            'echo; cat latest/train.txt; echo "$IRIS_MOUNTS"',
        ],
      })
      const job = await iris.wait(id, { timeoutMs: 30_000 })
      expect(job.state).toBe('SUCCEEDED')
      const lines: string[] = []
      for await (const l of iris.logs(id)) lines.push(l.line)
      expect(lines.slice(0, 4)).toEqual(['one', 'two', '{"rows":2}', 'version two'])
      const mounts = JSON.parse(lines[4]!) as Record<string, string>
      expect(Object.keys(mounts)).toEqual(['data', 'latest'])
      expect(statSync(join(mounts.data!, 'train.txt')).mode & 0o777).toBe(0o444)
      expect(statSync(mounts.data!).mode & 0o777).toBe(0o555)
      // Cleanup removes read-only trees too.
      expect(cluster.workers[0]!.cleanup(0)).toBe(1)
    } finally {
      iris.close()
      await cluster.stop()
    }
  }, 60_000)

  test('a missing artifact fails the task with the reason', async () => {
    const cluster = await LocalCluster.start({
      prefix: join(dir, 'prefix2'),
      heartbeatMs: 200,
      resources: { cpu: 2, memory: 2 ** 30, gpu: 0 },
      materialize: finestoreMounts(storeUrl),
    })
    const iris = cluster.client()
    try {
      const id = await iris.submit({ name: 'missing', mounts: ['datasets/none@3:data'], command: ['true'] })
      const job = await iris.wait(id, { timeoutMs: 30_000 })
      expect(job.state).toBe('FAILED')
      expect(job.error).toMatch(/mount datasets\/none@3 from file:.*datasets\/none/)
    } finally {
      iris.close()
      await cluster.stop()
    }
  }, 60_000)

  test('a doctored manifest with paths out of the mount fails it, naming the entry, writing nothing', async () => {
    const store = await openStore({ url: storeUrl })
    await store.commit('datasets/evil', async (txn) => {
      await txn.put('ok.txt', 'fine')
      await txn.put('payload', 'echo pwned\n')
    })
    store.close()
    const own = mkdtempSync(join(dir, 'evil-'))
    const manifest = join(dir, 'store', 'artifacts', 'datasets', 'evil', 'versions', '1.json')
    const m = JSON.parse(readFileSync(manifest, 'utf8'))
    m.files['../../x.sh'] = m.files.payload
    m.files[join(own, 'abs.sh')] = m.files.payload
    writeFileSync(manifest, JSON.stringify(m))
    const task = join(own, 'task', 'work')
    mkdirSync(task, { recursive: true })
    let err: unknown
    try {
      await finestoreMounts(storeUrl)({ artifact: 'datasets/evil', version: '1', path: 'data' }, join(task, 'data'))
    } catch (e) {
      err = e
    }
    expect(isIrisError(err, 'MOUNT_FAILED')).toBe(true)
    expect((err as Error).message).toMatch(
      // Both entries are bad; the first in the file is named.
      /^mount datasets\/evil@1 from file:.*: manifest .*1\.json \(datasets\/evil@1\): file entry "\.\.\/\.\.\/x\.sh"/,
    )
    expect([
      existsSync(join(own, 'x.sh')),
      existsSync(join(own, 'task', 'x.sh')),
      existsSync(join(own, 'abs.sh')),
    ]).toEqual([false, false, false])
    expect(readdirSync(task)).toEqual([])
  })

  test('a symbolic link in the task directory on the way to a mount is not followed', async () => {
    const own = mkdtempSync(join(dir, 'link-'))
    const task = join(own, 'work')
    const outside = join(own, 'outside')
    mkdirSync(task)
    mkdirSync(outside)
    symlinkSync(outside, join(task, 'inputs'))
    const mount = { artifact: 'datasets/tiny', version: '1', path: 'inputs/data' }
    await expect(finestoreMounts(storeUrl)(mount, join(task, 'inputs', 'data'))).rejects.toThrow(
      `${join(task, 'inputs')} is a symbolic link`,
    )
    expect(readdirSync(outside)).toEqual([])
  })
})
