/** @module @marin/fray: the execution runtime: actors, actor groups, jobs, a device mesh and collectives, local and
 * iris backends. */
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

export { actorClass } from './actor.js'
export type { ActorClass, ActorClassRef, ActorControl, ActorHandle, ActorStatus, CallOptions, Remote } from './actor.js'
export { ActorGroup } from './actor-group.js'
export { ActorPool } from './actor-pool.js'
export type { PoolOptions } from './actor-pool.js'
export type { Broadcast, WaitReadyOptions } from './actor-group.js'
export type { ActorOptions } from './actor-options.js'
export { currentClient, setDefaultClient, withClient } from './client.js'
export type { Client, GroupArgs } from './client.js'
export { currentActor, currentMesh } from './context.js'
export type { ActorContext } from './context.js'
export { ActorDiedError, FRAY_ERROR_CODES, FrayError, isFrayError } from './errors.js'
export type { FrayErrorCode } from './errors.js'
export { JobRequest, jobRequest } from './job.js'
export type { JobHandle, JobRequestInput, JobStatus, JobWaitOptions } from './job.js'
export { FrayIrisClient } from './iris-client.js'
export type { FrayIrisClientOptions, FrayIrisClusterOptions } from './iris-client.js'
export { LocalClient } from './local-client.js'
export type { LocalClientOptions } from './local-client.js'
export { Mesh } from './mesh.js'
export type { MeshOptions } from './mesh.js'
export { resolveAxes } from './mesh-axes.js'
export type { MeshAxes, MeshAxesInput } from './mesh-axes.js'
export { MeshMember } from './mesh-member.js'
export type {
  AllGatherOptions,
  AllReduceOptions,
  AxisSelector,
  BroadcastOptions,
  ReduceScatterOptions,
} from './mesh-member.js'
export type { ReduceOp } from './collective/reduce-scatter.js'
export { memoryBytes, Resources, resources } from './resources.js'
export type { ResourcesInput } from './resources.js'
export { ParameterServer, ParameterServerClient } from './parameter-server.js'
export type { ParameterServerAddress, ParameterServerOptions } from './parameter-server.js'
export { ParameterShard } from './parameter-shard.js'
