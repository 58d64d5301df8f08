/**
 * @module Closing an engine's members after a failed call. A member that failed, or that had not
 * answered when the call failed as one (REPLICA_FAILED: dead, or silent behind a partition), may not
 * answer a stop either: the iris job of a member on a cut host ends only when the controller gives
 * its worker up, tens of seconds later. So closing waits {@link FAILED_STOP_MS} for such a member,
 * no longer, and leaves the rest of its stop (the job's end) to the scheduler; the other members
 * stop as usual. A run that fails then reports within the failure's own bound plus this one.
 */
import type { ActorGroup } from '@marin/fray'
import { logger } from '@marin/rigging'

const log = logger('levanter')

/** How long closing waits for a failed member to stop. */
export const FAILED_STOP_MS = 3000

/** The members of one engine's group that failed a call, by rank. */
export class FailedMembers {
  readonly #failed = new Set<number>()

  /** Ranks recorded so far, in order. */
  get ranks(): number[] {
    return [...this.#failed].sort((a, b) => a - b)
  }

  /**
   * `all(calls)` (call `i` on member `i`), recording, when it rejects, every member whose call failed
   * or had not settled, and every member `group` knows gone.
   */
  async watch<T>(
    group: Pick<ActorGroup<unknown>, 'gone'>,
    calls: Promise<T>[],
    all: (calls: Promise<T>[]) => Promise<T[]>,
  ): Promise<T[]> {
    const settled = new Set<number>()
    const watched = calls.map((c, i) =>
      c.then(
        (v) => {
          settled.add(i)
          return v
        },
        (err: unknown) => {
          settled.add(i)
          this.#failed.add(i)
          throw err
        },
      ),
    )
    try {
      return await all(watched)
    } catch (err) {
      calls.forEach((_, i) => {
        if (!settled.has(i)) this.#failed.add(i)
      })
      for (const g of group.gone()) this.#failed.add(g)
      throw err
    }
  }

  /** Stops every member of `group`: a recorded one for `boundMs` at most (its stop goes on unawaited). */
  async stop(group: Pick<ActorGroup<unknown>, 'members'>, boundMs = FAILED_STOP_MS): Promise<void> {
    await Promise.all(
      group.members.map(async (m, i) => {
        const stop = m.$actor.stop()
        if (!this.#failed.has(i)) return stop
        if (!(await bounded(stop, boundMs)))
          log.warn({ member: i, boundMs }, 'failed member did not stop in time; its scheduler ends its job')
      }),
    )
  }
}

/**
 * Waits for `work` `boundMs` at most: true when it settled (a rejection is logged, not thrown), false when the
 * bound came first (it goes on unawaited).
 */
export async function bounded(work: Promise<unknown>, boundMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const bound = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), boundMs)
  })
  const settled = work.then(
    () => true,
    (err: unknown) => {
      log.debug({ err }, 'bounded wait: the work failed')
      return true
    },
  )
  const done = await Promise.race([settled, bound])
  clearTimeout(timer)
  return done
}
