import { isRiggingError, MemoryStorage, type Storage } from '@marin/rigging'
import { expect, test } from 'vitest'
import { moveObject } from './move-object.js'

let n = 0
/** A memory storage that lacks `rename` (and `copy` too, unless asked): what a third-party storage may look like. */
function without(copy: boolean): Storage {
  const s = new MemoryStorage(`move-${process.pid}-${n++}`)
  return Object.assign(Object.create(s) as Storage, { rename: undefined, ...(copy ? {} : { copy: undefined }) })
}

test.each([
  ['rename', new MemoryStorage(`move-native-${process.pid}`)],
  ['copy + delete', without(true)],
  ['streamed copy + delete', without(false)],
])('moves an object by %s; a failed condition changes nothing', async (_how, s) => {
  await s.write('tmp/a', 'bytes')
  await s.write('taken', 'other')
  await expect(moveObject(s, 'tmp/a', 'taken', { condition: { ifAbsent: true } })).rejects.toSatisfy((e) =>
    isRiggingError(e, 'STORAGE_CONDITION_FAILED'),
  )
  expect(await s.readText('tmp/a')).toBe('bytes')
  expect(await s.readText('taken')).toBe('other')
  await moveObject(s, 'tmp/a', 'blobs/a', { condition: { ifAbsent: true }, durable: false })
  expect(await s.readText('blobs/a')).toBe('bytes')
  expect(await s.exists('tmp/a')).toBe(false)
})
