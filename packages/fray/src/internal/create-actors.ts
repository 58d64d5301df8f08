/**
 * @module Actor and group creation shared by every client: a backend only says how
 * one actor connection starts (`Launch`); handles, readiness and groups are the same.
 */
import { type ActorClass, type ActorClassRef, type ActorConnection, type ActorHandle, makeHandle } from '../actor.js'
import { ActorGroup } from '../actor-group.js'
import type { ActorOptions } from '../actor-options.js'
import type { GroupArgs } from '../client.js'
import { FrayError } from '../errors.js'

/** Starts one actor: member `index` of a group of `groupSize` (1 for a lone actor). */
export type Launch = (
  cls: ActorClassRef,
  args: readonly unknown[],
  opts: ActorOptions,
  index: number,
  groupSize: number,
  name: string,
) => ActorConnection

/** One actor named `name`, resolved once it is ready. */
export async function createActorWith<C extends ActorClass>(
  launch: Launch,
  name: string,
  cls: ActorClassRef<C>,
  args: readonly unknown[],
  opts: ActorOptions,
): Promise<ActorHandle<InstanceType<C>>> {
  const conn = launch(cls, args, opts, 0, 1, name)
  await conn.ready()
  return makeHandle<InstanceType<C>>(conn)
}

/** `n` actors named `base/0` … `base/n-1`; `args` may give each member its own arguments. */
export function createActorGroupWith<C extends ActorClass>(
  launch: Launch,
  base: string,
  cls: ActorClassRef<C>,
  n: number,
  args: GroupArgs<C>,
  opts: ActorOptions,
): ActorGroup<InstanceType<C>> {
  if (!Number.isInteger(n) || n < 1)
    throw new FrayError('INVALID_RESOURCES', `createActorGroup: n=${n} must be a positive integer`)
  const members = Array.from({ length: n }, (_, i) => {
    const a = typeof args === 'function' ? args(i) : args
    return makeHandle<InstanceType<C>>(launch(cls, a, opts, i, n, `${base}/${i}`))
  })
  return new ActorGroup(members)
}
