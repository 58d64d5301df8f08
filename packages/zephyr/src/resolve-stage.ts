/**
 * @module Before a task runs, every user function of its stage becomes a
 * plain function: module references are imported and bound `args` are
 * appended. The same step runs in process and in workers, so both behave alike.
 */
import type { KeySpec } from './keys.js'
import type { RecordOp } from './ops.js'
import type { StageInput, StageOutput, StagePlan } from './plan.js'
import { importFn, resolveFn } from './user-fn.js'

async function resolveKey(key: KeySpec, what: string): Promise<KeySpec> {
  return typeof key === 'string' || typeof key === 'function' ? key : importFn(key, what)
}

async function resolveOp(op: RecordOp, stage: number): Promise<RecordOp> {
  const what = `stage ${stage} ${op.kind}`
  switch (op.kind) {
    case 'map':
    case 'filter':
    case 'flatMap':
      return { kind: op.kind, fn: await resolveFn(op.fn, op.args, 1, what) }
    case 'mapShard':
      return { kind: op.kind, fn: await resolveFn(op.fn, op.args, 2, what) }
    default:
      return op
  }
}

async function resolveInput(input: StageInput, stage: number): Promise<StageInput> {
  if (input.kind !== 'shuffle' || input.reduce.kind === 'concat') return input
  const r = input.reduce
  const key = await resolveKey(r.key, `stage ${stage} key`)
  if (r.kind === 'first') return { ...input, reduce: { kind: 'first', key } }
  return {
    ...input,
    reduce: { kind: 'group', key, reducer: await resolveFn(r.reducer, r.args, 2, `stage ${stage} groupBy reducer`) },
  }
}

async function resolveOutput(output: StageOutput, stage: number): Promise<StageOutput> {
  if (output.kind !== 'shuffle' || output.partition.kind !== 'hash') return output
  return { ...output, partition: { kind: 'hash', key: await resolveKey(output.partition.key, `stage ${stage} key`) } }
}

function needsResolving(stage: StagePlan): boolean {
  const userFn = (f: unknown, args: unknown) => typeof f !== 'function' || args !== undefined
  if (
    stage.ops.some(
      (op) =>
        (op.kind === 'map' || op.kind === 'filter' || op.kind === 'flatMap' || op.kind === 'mapShard') &&
        userFn(op.fn, op.args),
    )
  )
    return true
  const input = stage.input
  if (input.kind === 'shuffle' && input.reduce.kind !== 'concat') {
    if (typeof input.reduce.key === 'object') return true
    if (input.reduce.kind === 'group' && userFn(input.reduce.reducer, input.reduce.args)) return true
  }
  return (
    stage.output.kind === 'shuffle' &&
    stage.output.partition.kind === 'hash' &&
    typeof stage.output.partition.key === 'object'
  )
}

const resolved = new WeakMap<StagePlan, Promise<StagePlan>>()

/** The stage with plain functions only (memoized per stage object). */
export function resolveStage(stage: StagePlan): Promise<StagePlan> {
  if (!needsResolving(stage)) return Promise.resolve(stage)
  let r = resolved.get(stage)
  if (!r) {
    r = (async () => ({
      ...stage,
      input: await resolveInput(stage.input, stage.index),
      ops: await Promise.all(stage.ops.map((op) => resolveOp(op, stage.index))),
      output: await resolveOutput(stage.output, stage.index),
    }))()
    resolved.set(stage, r)
  }
  return r
}
