/** @module Options for creating an actor or a group of actors. */
import type { ResourcesInput } from './resources.js'

export type ActorOptions = {
  /** Shown in errors and logs. @default the class's export name and a counter */
  name?: string
  /** What the actor needs; validated, and passed to iris by the iris backend. @default { cpu: 1, memory: '1Gi' } */
  resources?: ResourcesInput
  /** Times a dead actor is brought back with its constructor arguments. @default 0 */
  maxRestarts?: number
  /** Default per-call timeout in ms; `handle.$actor.withOptions({ timeoutMs })` overrides it. @default none */
  callTimeoutMs?: number
  /** How long construction may take before `ACTOR_START_FAILED`. @default 60000 */
  startTimeoutMs?: number
  /** Extra environment variables for the actor's process. */
  env?: Record<string, string>
}
