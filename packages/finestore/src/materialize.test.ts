import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { blobPath, manifestPath } from './layout.js'
import type { Store } from './store.js'
import { newStore, type TestStore } from './test-support/stores.js'

let t: TestStore | undefined
afterEach(() => {
  t?.cleanup()
  t = undefined
})

/**
 * Version 1 of `models/m` holds ok.txt and payload; `doctor` rewrites its `files` as someone with store access
 * could.
 */
async function doctored(doctor: (files: Record<string, unknown>) => void): Promise<Store> {
  t = await newStore('file')
  const { store } = t
  await store.commit('models/m', async (txn) => {
    await txn.put('ok.txt', 'fine')
    await txn.put('payload', '#!/bin/sh\necho pwned\n')
  })
  const m = JSON.parse(await store.storage.readText(manifestPath('models/m', 1)))
  doctor(m.files)
  await store.storage.write(manifestPath('models/m', 1), JSON.stringify(m))
  return store
}

/** Every file under `dir`, relative to it (empty when `dir` is missing). */
const tree = (dir: string): string[] =>
  existsSync(dir) ? readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort() : []

describe('view.materialize', () => {
  test('writes every file under a new folder, and an empty version as an empty folder', async () => {
    t = await newStore('file')
    const { store } = t
    await store.commit('models/m', async (txn) => {
      await txn.put('config.json', '{}')
      await txn.put('weights/a/model.bin', 'abc')
    })
    await store.commit('models/empty', async () => {})
    const dest = join(t.dir, 'out', 'nested')
    expect(await (await store.open('models/m')).materialize(dest)).toEqual(['config.json', 'weights/a/model.bin'])
    expect(readFileSync(join(dest, 'weights', 'a', 'model.bin'), 'utf8')).toBe('abc')
    expect(await (await store.open('models/empty')).materialize(join(t.dir, 'empty'))).toEqual([])
    expect(tree(join(t.dir, 'empty'))).toEqual([])
    expect(existsSync(join(t.dir, 'empty'))).toBe(true)
  })

  test.each([
    [
      '../../x.sh',
      /file entry "\.\.\/\.\.\/x\.sh": file path "\.\.\/\.\.\/x\.sh" is invalid \(it has a "\.\." segment\)/,
    ],
    ['/ABS', /file entry "\/.*x\.sh": file path .* is invalid \(it is absolute\)/],
    ['a/./b', /file entry "a\/\.\/b".*\(it has a "\." segment\)/],
    ['a//b', /file entry "a\/\/b".*\(it has an empty segment\)/],
    ['back\\slash', /file entry "back\\\\slash".*contains "\\"/],
    ['esc\u001b[2Jape', /file entry "esc\\u001b\[2Jape".*control character/],
    ['__proto__', /file entry "__proto__".*"__proto__" is reserved/],
  ])('a manifest entry %j is refused when the version is opened, naming it; nothing is written', async (entry, why) => {
    let abs = ''
    const store = await doctored((files) => {
      abs = join(t!.dir, 'x.sh')
      // An own key even for "__proto__", as JSON.parse makes one from the text.
      Object.defineProperty(files, entry === '/ABS' ? abs : entry, { value: files.payload, enumerable: true })
      delete files.payload
    })
    const dest = join(t!.dir, 'a', 'b')
    const err = await store.open('models/m@1').then(
      (v) => v.materialize(dest),
      (e: unknown) => e,
    )
    expect(err).toMatchObject({
      name: 'FinestoreError',
      code: 'MANIFEST_INVALID',
      message: expect.stringMatching(/^manifest artifacts\/models\/m\/versions\/1\.json \(models\/m@1\): /),
    })
    expect((err as Error).message).toMatch(why)
    expect((err as Error).message).toMatch(/this version is unreadable.*restore the file .* or delete it/i)
    expect([existsSync(join(t!.dir, 'x.sh')), existsSync(abs), tree(join(t!.dir, 'a'))]).toEqual([false, false, []])
  })

  test.each([
    [['dir', 'dir/inner'], /models\/m@1: "dir" is a file and also a folder of "dir\/inner"/],
    [['Dir', 'dir/inner'], /"Dir" is a file and also a folder of "dir\/inner"/],
    [['README', 'readme'], /files "README" and "readme" differ only in case or Unicode form/],
    [['caf\u00e9', 'cafe\u0301'], /differ only in case or Unicode form, so they are one file on macOS/],
  ])('entries %j that cannot share a folder are refused before anything is written', async (names, why) => {
    const store = await doctored((files) => {
      for (const n of names) files[n] = files.payload
    })
    const dest = join(t!.dir, 'out')
    const err = await (await store.open('models/m@1')).materialize(dest).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'INVALID_PATH', message: expect.stringMatching(why) })
    expect((err as Error).message).toContain(`nothing was written to ${dest}`)
    expect(existsSync(dest)).toBe(false)
  })

  test('a commit of files that cannot share a folder fails naming them, and the transaction stays usable', async () => {
    t = await newStore('file')
    const txn = await t.store.begin('models/c')
    await txn.put('a', '1')
    await txn.put('a/b', '2')
    await expect(txn.commit()).rejects.toMatchObject({
      code: 'INVALID_PATH',
      message: expect.stringMatching(/^models\/c: "a" is a file and also a folder of "a\/b"/),
    })
    txn.remove('a')
    expect((await txn.commit()).version).toBe(1)
    await expect(t.store.commit('models/c', async (x) => void (await x.put('__proto__', '1')))).rejects.toMatchObject({
      code: 'INVALID_PATH',
      message: expect.stringMatching(/"__proto__" is reserved/),
    })
  })

  test('a symbolic link in the target folder is not followed: nothing is written through it', async () => {
    t = await newStore('file')
    const { store } = t
    await store.commit('models/m', async (txn) => {
      await txn.put('aaa.txt', 'first')
      await txn.put('sub/x.sh', 'payload')
    })
    const outside = join(t.dir, 'outside')
    const dest = join(t.dir, 'dest')
    mkdirSync(outside)
    mkdirSync(dest)
    symlinkSync(outside, join(dest, 'sub'))
    const view = await store.open('models/m')
    await expect(view.materialize(dest)).rejects.toMatchObject({
      code: 'INVALID_PATH',
      message:
        `models/m@1: ${join(dest, 'sub')} is a symbolic link; files are written only into real folders, so ` +
        `remove the link; nothing was written to ${dest}`,
    })
    expect([tree(outside), tree(dest)]).toEqual([[], ['sub']])

    // The same for a link between the folder that must hold the target (a task's folder) and the target.
    const task = join(t.dir, 'task')
    mkdirSync(task)
    symlinkSync(outside, join(task, 'inputs'))
    await expect(view.materialize(join(task, 'inputs', 'data'), { within: task })).rejects.toThrow(
      `${join(task, 'inputs')} is a symbolic link`,
    )
    await expect(view.materialize(join(t.dir, 'elsewhere'), { within: task })).rejects.toMatchObject({
      code: 'INVALID_INPUT',
      message: expect.stringMatching(/is not inside/),
    })
    expect(tree(outside)).toEqual([])
  })

  test('a file that exists is not overwritten, and a damaged blob leaves no partial copy', async () => {
    t = await newStore('file')
    const { store } = t
    const c = await store.commit('models/m', async (txn) => {
      await txn.put('a.txt', 'first')
      await txn.put('deep/z.bin', 'second file, damaged on disk')
    })
    const dest = join(t.dir, 'dest')
    mkdirSync(dest)
    writeFileSync(join(dest, 'a.txt'), 'mine')
    const view = await store.open('models/m')
    await expect(view.materialize(dest)).rejects.toThrow(`${join(dest, 'a.txt')} already exists`)
    expect(readFileSync(join(dest, 'a.txt'), 'utf8')).toBe('mine')

    const local = store.storage.localPath(blobPath(c.manifest.files['deep/z.bin']!.blob))!
    writeFileSync(local, 'other bytes')
    const fresh = join(t.dir, 'fresh', 'out')
    await expect(view.materialize(fresh)).rejects.toMatchObject({ code: 'INTEGRITY' })
    expect(existsSync(join(t.dir, 'fresh'))).toBe(false)
  })
})
