/**
 * @module Awaiting a call on every member of an actor group, failing as one step: when any call
 * fails, REPLICA_FAILED naming the members that are gone. Both the data-parallel and the mesh
 * engine drive their members through it.
 */
import type { ActorGroup } from '@marin/fray'
import { logger } from '@marin/rigging'
import { LevanterError } from '../errors.js'

const log = logger('levanter')

/** How an engine names itself and its members in the error (`data-parallel`, `replica`). */
export type MemberNames = { readonly engine: string; readonly member: string }

export async function allMembers<T>(
  group: Pick<ActorGroup<unknown>, 'gone'>,
  size: number,
  names: MemberNames,
  what: string,
  calls: Promise<T>[],
): Promise<T[]> {
  // Wait for every call to settle: when one member dies, a survivor's collective often fails
  // first (its peer disconnected), before the dead one is known as gone.
  const settled = await Promise.allSettled(calls)
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected')
  if (!failed) return settled.map((r) => (r as PromiseFulfilledResult<T>).value)
  const err: unknown = failed.reason
  const gone = group.gone()
  log.error({ err, gone }, `${names.member} failed`)
  throw new LevanterError(
    'REPLICA_FAILED',
    `${names.engine} ${what}: ${names.member}${gone.length > 1 ? 's' : ''} ` +
      `${gone.length ? gone.join(', ') : '?'} of ${size} failed (${(err as Error).message}); ` +
      'the step was not applied — resume from the last checkpoint',
    { cause: err },
  )
}
