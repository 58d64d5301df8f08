/**
 * Closing after a failure: members whose call failed or never answered (REPLICA_FAILED) are recorded,
 * with those the group knows gone, and their stops are waited for a bound only, so a member whose stop
 * never ends (its host cut) does not hold the close up; the other members' stops are awaited whole.
 */
import { expect, test } from 'vitest'
import { allMembers } from './all-members.js'
import { bounded, FailedMembers } from './failed-members.js'

const names = { engine: 'mesh', member: 'member' }
const never = <T>() => new Promise<T>(() => {})

/** A group of `n` members whose stops are `stops[i]()`; `stopped` lists the stops that ended. */
function groupOf(n: number, stops: (() => Promise<void>)[], gone: number[] = []) {
  const stopped: number[] = []
  const members = Array.from({ length: n }, (_, i) => ({
    $actor: { stop: () => stops[i]!().then(() => void stopped.push(i)) },
  }))
  return { group: { members, gone: () => gone }, stopped } as const
}

test('a failed and a silent member are recorded; their stops are bounded, the healthy ones awaited', async () => {
  const { group, stopped } = groupOf(4, [
    () => Promise.resolve(),
    never,
    never,
    () => new Promise((r) => setTimeout(r, 30)),
  ])
  const failed = new FailedMembers()
  const calls = [Promise.resolve(1), Promise.reject(new Error('peer lost')), never<number>(), Promise.resolve(4)]
  const step = failed.watch(group, calls, (c) => allMembers(group, 4, names, 'step', c, 20))
  await expect(step).rejects.toThrow(/mesh step: member 2 of 4 failed \(member 2 did not answer within 20 ms/)
  expect(failed.ranks).toEqual([1, 2])
  // members 1 and 2 never stop: the close ends at the bound, after the healthy members stopped
  await failed.stop(group as never, 50)
  expect(stopped).toEqual([0, 3])
})

test('a member the group knows gone is recorded; nothing is before a failure', async () => {
  const { group, stopped } = groupOf(2, [() => Promise.resolve(), never], [1])
  const failed = new FailedMembers()
  expect(await failed.watch(group, [Promise.resolve(1), Promise.resolve(2)], (c) => Promise.all(c))).toEqual([1, 2])
  expect(failed.ranks).toEqual([])
  await expect(
    failed.watch(group, [Promise.reject(new Error('x')), Promise.resolve(2)], (c) => Promise.all(c)),
  ).rejects.toThrow('x')
  expect(failed.ranks).toEqual([0, 1])
  await failed.stop(group as never, 20)
  expect(stopped).toEqual([0])
})

test('bounded: true when the work settles (a rejection too), false at the bound', async () => {
  expect(await bounded(Promise.resolve(), 1000)).toBe(true)
  expect(await bounded(Promise.reject(new Error('stop failed')), 1000)).toBe(true)
  expect(await bounded(never(), 10)).toBe(false)
})
