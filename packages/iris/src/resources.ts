/** @module Resource requests and capacities: parse `cpu=1,memory=2G,gpu=0`, compare, add, subtract, print. */
import { IrisError } from './errors.js'

/** What a task asks for or a worker offers. `memory` is in bytes; `cpu` may be fractional. */
export type Resources = { readonly cpu: number; readonly memory: number; readonly gpu: number }

/** The request a job gets when `--resources` is not given. */
export const DEFAULT_RESOURCES: Resources = { cpu: 1, memory: 512 * 1024 ** 2, gpu: 0 }

const UNITS: Record<string, number> = {
  '': 1, b: 1,
  k: 1024, kb: 1024, ki: 1024, kib: 1024,
  m: 1024 ** 2, mb: 1024 ** 2, mi: 1024 ** 2, mib: 1024 ** 2,
  g: 1024 ** 3, gb: 1024 ** 3, gi: 1024 ** 3, gib: 1024 ** 3,
  t: 1024 ** 4, tb: 1024 ** 4, ti: 1024 ** 4, tib: 1024 ** 4,
}

const HINT = 'write it as cpu=1,memory=2G,gpu=0 (keys cpu, memory, gpu; memory takes K, M, G or T)'

/** Parses a byte size such as `2G`, `512M`, `1.5GiB` or `1048576` (binary units). */
export function parseMemory(text: string, field = 'memory'): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text)
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined
  if (!m || unit === undefined) {
    throw new IrisError('BAD_RESOURCES', `${field}="${text}" is not a size; use a number with an optional unit K, M, G or T, e.g. ${field}=2G`)
  }
  return Math.round(Number(m[1]) * unit)
}

/**
 * Parses a resource string. Keys not given keep their value from `defaults`.
 * @example parseResources('cpu=2,memory=4G,gpu=1') // { cpu: 2, memory: 4294967296, gpu: 1 }
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
      if (value === '' || !Number.isFinite(n) || n <= 0) throw new IrisError('BAD_RESOURCES', `resources: cpu="${value}" must be a positive number such as cpu=1 or cpu=0.5`)
      out.cpu = n
    } else if (key === 'memory' || key === 'mem') {
      out.memory = parseMemory(value)
    } else if (key === 'gpu') {
      const n = Number(value)
      if (value === '' || !Number.isInteger(n) || n < 0) throw new IrisError('BAD_RESOURCES', `resources: gpu="${value}" must be a whole number of devices such as gpu=0 or gpu=8`)
      out.gpu = n
    } else {
      throw new IrisError('BAD_RESOURCES', `resources: unknown key "${key}"; ${HINT}`)
    }
  }
  return out
}

/** Prints resources in the form `parseResources` reads. */
export function formatResources(r: Resources): string {
  return `cpu=${r.cpu},memory=${formatMemory(r.memory)},gpu=${r.gpu}`
}

export function formatMemory(bytes: number): string {
  for (const [unit, size] of [['T', 1024 ** 4], ['G', 1024 ** 3], ['M', 1024 ** 2]] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`
  }
  // Machine totals are rarely whole gibibytes: one decimal reads better than kibibytes.
  if (bytes >= 1024 ** 3) return `${Number((bytes / 1024 ** 3).toFixed(1))}G`
  if (bytes >= 1024 ** 2) return `${Number((bytes / 1024 ** 2).toFixed(1))}M`
  return bytes >= 1024 && bytes % 1024 === 0 ? `${bytes / 1024}K` : String(bytes)
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
  if (need.memory > have.memory) out.push(`memory ${formatMemory(need.memory)} > ${formatMemory(have.memory)}`)
  if (need.gpu > have.gpu) out.push(`gpu ${need.gpu} > ${have.gpu}`)
  return out
}
