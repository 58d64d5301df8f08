/** @module Resource requests and capacities: parse `cpu=1,memory=2Gi,gpu=0`, compare, add, subtract, print. */
import { formatByteSize, isRiggingError, parseByteSize } from '@marin/rigging'
import { IrisError } from './errors.js'

/** What a task asks for or a worker offers. `memory` is in bytes; `cpu` may be fractional. */
export type Resources = { readonly cpu: number; readonly memory: number; readonly gpu: number }

/**
 * The request a job gets when `--resources` is not given: one core and 1Gi, fray's default for an
 * actor or job replica too (a Node process that loads tfjs or a data shard outgrows 512Mi).
 */
export const DEFAULT_RESOURCES: Resources = { cpu: 1, memory: 2 ** 30, gpu: 0 }

const HINT =
  'write it as cpu=1,memory=2Gi,gpu=0 (keys cpu, memory, gpu; ' +
  'memory in bytes or with k, M, G, T, Ki, Mi, Gi or Ti)'

/** Reads a byte size by rigging's one rule (`4G` = 4×10⁹ bytes, `4Gi` = 4×2³⁰); `BAD_RESOURCES` otherwise. */
function parseMemory(text: string): number {
  try {
    return parseByteSize(text, 'resources: memory')
  } catch (err) {
    if (isRiggingError(err, 'BYTE_SIZE_INVALID')) throw new IrisError('BAD_RESOURCES', err.message, { cause: err })
    throw err
  }
}

/**
 * Parses a resource string. Keys not given keep their value from `defaults`.
 * @example parseResources('cpu=2,memory=4G,gpu=1') // { cpu: 2, memory: 4000000000, gpu: 1 }
 */
export function parseResources(text: string, defaults: Resources = DEFAULT_RESOURCES): Resources {
  const out = { ...defaults }
  if (text.trim() === '') throw new IrisError('BAD_RESOURCES', `resources string is empty; ${HINT}`)
  const seen = new Set<string>()
  for (const part of text.split(',')) {
    const eq = part.indexOf('=')
    if (eq < 0) throw new IrisError('BAD_RESOURCES', `resources: "${part.trim()}" has no "="; ${HINT}`)
    const key = part.slice(0, eq).trim().toLowerCase()
    const value = part.slice(eq + 1).trim()
    if (seen.has(key)) throw new IrisError('BAD_RESOURCES', `resources: "${key}" is given twice; ${HINT}`)
    seen.add(key)
    if (key === 'cpu') {
      const n = Number(value)
      if (value === '' || !Number.isFinite(n) || n <= 0)
        throw new IrisError(
          'BAD_RESOURCES',
          `resources: cpu="${value}" must be a positive number such as cpu=1 or cpu=0.5`,
        )
      out.cpu = n
    } else if (key === 'memory' || key === 'mem') {
      out.memory = parseMemory(value)
    } else if (key === 'gpu') {
      const n = Number(value)
      if (value === '' || !Number.isInteger(n) || n < 0)
        throw new IrisError(
          'BAD_RESOURCES',
          `resources: gpu="${value}" must be a whole number of devices such as gpu=0 or gpu=8`,
        )
      out.gpu = n
    } else {
      throw new IrisError('BAD_RESOURCES', `resources: unknown key "${key}"; ${HINT}`)
    }
  }
  return out
}

/** Prints resources in the form `parseResources` reads. */
export function formatResources(r: Resources): string {
  return `cpu=${r.cpu},memory=${formatByteSize(r.memory)},gpu=${r.gpu}`
}

// A small epsilon keeps fractional cpu sums (0.1 + 0.2) from refusing an exact fit.
const EPS = 1e-9

/** True when `need` fits inside `have` on every axis. */
export function fits(need: Resources, have: Resources): boolean {
  return need.cpu <= have.cpu + EPS && need.memory <= have.memory && need.gpu <= have.gpu
}

export function addResources(a: Resources, b: Resources): Resources {
  return { cpu: a.cpu + b.cpu, memory: a.memory + b.memory, gpu: a.gpu + b.gpu }
}

export function subtractResources(a: Resources, b: Resources): Resources {
  return { cpu: a.cpu - b.cpu, memory: a.memory - b.memory, gpu: a.gpu - b.gpu }
}

/** Names the axes on which `need` exceeds `have`, e.g. `gpu 8 > 0`. */
export function shortfall(need: Resources, have: Resources): string[] {
  const out: string[] = []
  if (need.cpu > have.cpu + EPS) out.push(`cpu ${need.cpu} > ${have.cpu}`)
  if (need.memory > have.memory) out.push(`memory ${formatByteSize(need.memory)} > ${formatByteSize(have.memory)}`)
  if (need.gpu > have.gpu) out.push(`gpu ${need.gpu} > ${have.gpu}`)
  return out
}
