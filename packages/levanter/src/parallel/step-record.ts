/** @module What a mesh member records of each step it runs: where the time went, and on a device its traffic. */

/** Host↔device traffic of one member step on a device backend: bytes read back to the host (the flat gradient
 * and the loss, in one read), bytes uploaded (the batch slice and the summed gradient), and the number of reads. */
export type StepTransfer = { readonly toHost: number; readonly toDevice: number; readonly reads: number }

/**
 * Where one member step's time went, in milliseconds of wall time, and the CPU time the process
 * used (on a shared machine, the work itself). A phase the member's layout has not is 0.
 */
export type MeshStepPhases = {
  /** Forward and backward: the model-axis all-reduces between stages, and with `overlapReduce` the data-axis
   * collectives started during the pass, interleaved. */
  readonly grads: number
  /** Of `grads`: waiting on the model-axis all-reduces between stages. */
  readonly stageReduce: number
  /** Copying the gradients off the backend into the buffer the data axis reduces (one read on a device). */
  readonly flatten: number
  /** Summing the parts of replicated parameters over the model axis. */
  readonly modelReduce: number
  /** Waiting on the data-axis collectives after the backward pass. */
  readonly dataReduce: number
  /** The global norm's all-reduce over every axis (a member holding the whole model needs none). */
  readonly norm: number
  readonly apply: number
  /** Setting the updated parameters back into the tensors the next pass reads. */
  readonly gather: number
  readonly cpu: number
  /** Data-axis collectives of the step's gradients, and how many of them started before the backward pass ended. */
  readonly buckets: number
  readonly bucketsDuringBackward: number
}

/** A step's phases, and on a device backend its traffic. */
export type StepRecord = MeshStepPhases & { readonly transfer?: StepTransfer }

/** Milliseconds of CPU time this process has used. */
export const cpuMs = (): number => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

/** The phases a layout has not, as 0: a record of a step starts from it. */
export const NO_PHASES: MeshStepPhases = {
  grads: 0,
  stageReduce: 0,
  flatten: 0,
  modelReduce: 0,
  dataReduce: 0,
  norm: 0,
  apply: 0,
  gather: 0,
  cpu: 0,
  buckets: 0,
  bucketsDuringBackward: 0,
}
