/**
 * @module Awaiting a call on every member of an actor group, failing as one step: when any call
 * fails, REPLICA_FAILED naming the members that are gone (or, where none is known gone yet, the
 * members that stopped answering). Both the data-parallel and the mesh engine drive their members
 * through it.
 *
 * After the first failure the others get {@link MEMBER_GRACE_MS} more to settle, no longer: a
 * member killed on this machine is known dead within milliseconds of its peer's collective
 * failing, but a member behind a partition answers nothing until the scheduler gives its host up
 * (iris's worker timeout, tens of seconds). So a partition fails the step within the survivors'
 * peer timeout (`FRAY_PEER_TIMEOUT_MS`) plus this grace, whatever the scheduler's timeouts are.
 */
import type { ActorGroup } from '@marin/fray'
import { logger } from '@marin/rigging'
import { LevanterError } from '../errors.js'

const log = logger('levanter')

/** How an engine names itself and its members in the error (`data-parallel`, `replica`). */
export type MemberNames = { readonly engine: string; readonly member: string }

/** How long the other members' calls may take to settle once one has failed. */
export const MEMBER_GRACE_MS = 2000

/**
 * The results of `calls` (call `i` is on member `i`), in order; REPLICA_FAILED when any fails, once
 * every call has settled or `graceMs` after the first failure, whichever comes first.
 */
export async function allMembers<T>(
  group: Pick<ActorGroup<unknown>, 'gone'>,
  size: number,
  names: MemberNames,
  what: string,
  calls: Promise<T>[],
  graceMs = MEMBER_GRACE_MS,
): Promise<T[]> {
  const values: T[] = new Array(calls.length)
  const pending = new Set(calls.keys())
  const failed: number[] = []
  let first: { member: number; reason: unknown } | undefined
  await new Promise<void>((resolve) => {
    let timer: NodeJS.Timeout | undefined
    const settle = (i: number) => {
      pending.delete(i)
      if (pending.size === 0) {
        clearTimeout(timer)
        resolve()
      }
    }
    if (calls.length === 0) resolve()
    calls.forEach((call, i) => {
      call.then(
        (v) => {
          values[i] = v
          settle(i)
        },
        (reason: unknown) => {
          failed.push(i)
          if (first === undefined) {
            first = { member: i, reason }
            // A member that answers nothing does not hold the step up past the grace.
            timer = setTimeout(resolve, graceMs)
          } else log.debug({ err: reason, member: i }, `${names.member} also failed`)
          settle(i)
        },
      )
    })
  })
  if (first === undefined) return values
  const err = first.reason
  const gone = group.gone()
  // Known dead first; else the members still silent (behind a partition, or stalled); else every one that failed.
  const silent = [...pending]
  const named = gone.length ? gone : silent.length ? silent : [...failed].sort((x, y) => x - y)
  const why = (err as Error | undefined)?.message ?? String(err)
  const detail =
    gone.length === 0 && silent.length
      ? `${names.member} ${silent.join(', ')} did not answer within ${graceMs} ms of ` +
        `${names.member} ${first.member}'s error: ${why}`
      : why
  log.error({ err, gone, silent }, `${names.member} failed`)
  throw new LevanterError(
    'REPLICA_FAILED',
    `${names.engine} ${what}: ${names.member}${named.length > 1 ? 's' : ''} ${named.join(', ')} of ${size} ` +
      `failed (${detail}); the step was not applied — resume from the last checkpoint`,
    { cause: err },
  )
}
