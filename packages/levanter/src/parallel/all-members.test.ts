import { describe, expect, test } from 'vitest'
import { isLevanterError } from '../errors.js'
import { allMembers } from './all-members.js'

const names = { engine: 'data-parallel', member: 'replica' }
/** A promise settled from outside, and one that never settles (a member behind a partition). */
const deferred = <T>() => {
  let resolve!: (v: T) => void
  let reject!: (e: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}
const never = <T>() => new Promise<T>(() => {})
const groupWith = (gone: number[]) => ({ gone: () => gone })
const failure = async (p: Promise<unknown>): Promise<Error> => {
  try {
    await p
  } catch (e) {
    expect(isLevanterError(e, 'REPLICA_FAILED'), String(e)).toBe(true)
    return e as Error
  }
  throw new Error('expected REPLICA_FAILED')
}

describe('allMembers', () => {
  test('every call answers: the results in member order', async () => {
    const late = deferred<number>()
    const all = allMembers(groupWith([]), 3, names, 'step', [Promise.resolve(1), late.promise, Promise.resolve(3)])
    late.resolve(2)
    expect(await all).toEqual([1, 2, 3])
    expect(await allMembers(groupWith([]), 2, names, 'step', [])).toEqual([])
  })

  test('a member that never answers does not hold the step past the grace: it is named as silent', async () => {
    const peerLost = new Error('mesh member 1 (at 10.0.0.3:4000) sent nothing to member 0 for 2000 ms')
    const e = await failure(allMembers(groupWith([]), 2, names, 'step', [Promise.reject(peerLost), never()], 50))
    expect(e.message).toBe(
      "data-parallel step: replica 1 of 2 failed (replica 1 did not answer within 50 ms of replica 0's error: " +
        `${peerLost.message}); the step was not applied — resume from the last checkpoint`,
    )
    expect(e.cause).toBe(peerLost)
  })

  test('a member that dies within the grace is named as gone, with the first error as the cause', async () => {
    const gone: number[] = []
    const dying = deferred<number>()
    const first = new Error('peer disconnected')
    const all = allMembers(groupWith(gone), 2, names, 'step', [Promise.reject(first), dying.promise], 10_000)
    setTimeout(() => {
      gone.push(1)
      dying.reject(new Error('actor r-1 died'))
    }, 20)
    const e = await failure(all)
    expect(e.message).toMatch(/^data-parallel step: replica 1 of 2 failed \(peer disconnected\); the step was not/)
    expect(e.cause).toBe(first)
  })

  test('every call fails and none is gone: every failed member is named', async () => {
    const calls = [Promise.reject(new Error('bad batch')), Promise.reject(new Error('bad batch'))]
    const e = await failure(allMembers(groupWith([]), 2, { engine: 'mesh', member: 'member' }, 'load', calls))
    expect(e.message).toMatch(/^mesh load: members 0, 1 of 2 failed \(bad batch\)/)
  })

  test('a late failure after the step has failed is absorbed, not an unhandled rejection', async () => {
    const late = deferred<number>()
    const e = await failure(
      allMembers(groupWith([]), 2, names, 'step', [Promise.reject(new Error('x')), late.promise], 5),
    )
    expect(e.message).toContain('replica 1 did not answer within 5 ms')
    late.reject(new Error('the partitioned member answers at last'))
    await new Promise((r) => setTimeout(r, 10))
  })
})
