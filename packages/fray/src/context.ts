/**
 * @module The actor a piece of code runs in: `currentActor()` inside an actor's methods
 * (and its constructor) says who it is and reaches the meshes it belongs to.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { FrayError } from './errors.js'
import type { MeshMember } from './mesh-member.js'

/** Who an actor is, available inside its methods through `currentActor()`. */
export type ActorContext = {
  readonly name: string
  /** Position in its group (0 for a lone actor). */
  readonly index: number
  /** Members in its group (1 for a lone actor). */
  readonly groupSize: number
  /** The mesh this actor joined most recently, or the one with this id; throws `NOT_IN_MESH` if none. */
  mesh(id?: string): MeshMember
}

// One store per process even if this module is loaded twice (e.g. through two module graphs).
const KEY = Symbol.for('marin.fray.actorContext')
const g = globalThis as unknown as Record<symbol, AsyncLocalStorage<ActorContext> | undefined>
const store: AsyncLocalStorage<ActorContext> = (g[KEY] ??= new AsyncLocalStorage<ActorContext>())

/** Runs `fn` as the given actor. */
export function runAsActor<R>(ctx: ActorContext, fn: () => R): R {
  return store.run(ctx, fn)
}

/** The actor whose method is running; throws `ACTOR_NOT_FOUND` outside actors. */
export function currentActor(): ActorContext {
  const ctx = store.getStore()
  if (!ctx)
    throw new FrayError(
      'ACTOR_NOT_FOUND',
      'currentActor() was called outside an actor; call it from an actor method or constructor',
    )
  return ctx
}

/** The mesh of the running actor: `currentMesh().allReduce(grad, { op: 'mean' })`. */
export function currentMesh(id?: string): MeshMember {
  return currentActor().mesh(id)
}
