/**
 * @module `ActorPool`: work spread over an actor group, one task per member at a time, each task
 * going to whichever member is free next. A task whose member dies is given to another member,
 * so a pool finishes as long as some member survives (zephyr's workers run this way).
 */
import type { ActorHandle } from './actor.js'
import type { ActorGroup } from './actor-group.js'
import { ActorDiedError, FrayError } from './errors.js'

export type PoolOptions = {
  /** Tries per task when members die under it. @default 3 */
  maxAttempts?: number
}

export class ActorPool<T> {
  constructor(readonly group: ActorGroup<T>) {}

  /**
   * Runs `fn(member, item, index)` for every item; results come back in input order. A task that
   * throws anything but `ActorDiedError` fails the whole map (the other tasks finish first).
   * @example const sizes = await pool.map(shards, (w, shard) => w.process(shard))
   */
  async map<I, R>(
    items: Iterable<I>,
    fn: (member: ActorHandle<T>, item: I, index: number) => Promise<R>,
    opts: PoolOptions = {},
  ): Promise<R[]> {
    const maxAttempts = opts.maxAttempts ?? 3
    const list = [...items]
    const results = new Array<R>(list.length)
    const queue = list.map((_, i) => i)
    const attempts = new Array<number>(list.length).fill(0)
    let failure: Error | null = null
    let lastDeath: ActorDiedError | null = null
    let inFlight = 0
    // Wakes idle members when a task finishes or comes back to the queue.
    let wake: () => void = () => {}
    let changed = new Promise<void>((r) => (wake = r))
    const notify = () => {
      wake()
      changed = new Promise<void>((r) => (wake = r))
    }

    const drive = async (member: ActorHandle<T>): Promise<void> => {
      for (;;) {
        if (failure) return
        const i = queue.shift()
        if (i === undefined) {
          // Others still run tasks that may come back if their member dies: stay until they settle.
          if (inFlight === 0) return
          await changed
          continue
        }
        attempts[i]!++
        inFlight++
        try {
          results[i] = await fn(member, list[i]!, i)
          inFlight--
          notify()
        } catch (err) {
          inFlight--
          notify()
          if (!(err instanceof ActorDiedError)) {
            failure ??= err as Error
            return
          }
          lastDeath = err
          if (attempts[i]! >= maxAttempts) {
            failure ??= new FrayError(
              'ACTOR_DIED',
              `pool task ${i} lost its actor ${attempts[i]} times (last: ` +
                `${err.message}); raise maxAttempts or find why members die`,
              { cause: err },
            )
            return
          }
          queue.unshift(i)
          notify()
          // A member that restarts comes back to work; a dead one leaves the pool.
          const status = member.$actor.status()
          if (status !== 'restarting' && status !== 'starting') return
          await member.$actor.ready().catch(() => undefined)
          if (member.$actor.status() !== 'ready') return
        }
      }
    }

    const alive = this.group.alive().map((i) => this.group.member(i))
    if (alive.length === 0 && list.length > 0)
      throw new FrayError('ACTOR_DIED', 'actor pool: every member of the group is gone; create the group again')
    await Promise.all(alive.map(drive))
    if (failure) throw failure
    if (queue.length > 0) {
      throw new FrayError('ACTOR_DIED', `actor pool: ${queue.length} tasks left and no member alive to run them`, {
        cause: lastDeath ?? undefined,
      })
    }
    return results
  }
}
