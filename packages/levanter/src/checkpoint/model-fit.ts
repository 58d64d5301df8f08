/**
 * @module Before a model is built from someone else's files: does the config describe the tensors
 * the weights hold, and does the model fit in memory? A config is data: `n_layer: 1e6` must not
 * allocate until killed, `vocab_size: 1e9` must not reach a typed array. Everything here is counted
 * from parameter specs (`specsOf`, the same ones the model is built from) and from the weights'
 * headers, so nothing is allocated at the size the config claims.
 */
import os from 'node:os'
import { LevanterError, isLevanterError } from '../errors.js'
import { ModelConfig } from '../models/config.js'
import type { ModelConfigInput } from '../models/config.js'
import { specsOf } from '../models/lm.js'
import type { ParamSpec } from '../models/param-spec.js'

/** Of the memory free when loading starts, the share a model may take; the rest stays for everything else. */
export const MEMORY_SHARE = 0.75

/**
 * Bytes this process may still allocate: the machine's free memory (`os.freemem`, MemAvailable on Linux),
 * or less when a cgroup limits the process (`process.constrainedMemory`).
 */
export function availableMemory(): number {
  let free = os.freemem()
  const limit = process.constrainedMemory?.() ?? 0
  // an unlimited cgroup reports a huge number (2^63 rounded), not 0
  if (limit > 0 && limit < 2 ** 60) free = Math.min(free, Math.max(0, limit - process.memoryUsage().rss))
  return free
}

export type FitCheck = {
  /** The model config as read; validated here. */
  readonly config: ModelConfigInput
  /** Where the config came from, for errors (`dir/config.json`, `ref step-…/manifest.json`). */
  readonly configFile: string
  /** Where the weights came from, for errors. */
  readonly weightsFile: string
  /** A config key (`nLayers`) as the config file spells it (`n_layer`, `model.nLayers`). */
  readonly field: (key: string) => string
  /** How many tensors the weights hold. */
  readonly tensorCount: number
  /** The shape the weights hold for the model's parameter `name`, in the model's layout; undefined when absent. */
  readonly stored: (name: string) => readonly number[] | undefined
  /** Bytes of the weight files, which are read whole while the model is built. */
  readonly fileBytes: number
  /** The most bytes loading may take; @default {@link MEMORY_SHARE} of {@link availableMemory} */
  readonly maxBytes?: number
}

const product = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1)
const fmt = (b: number) =>
  b >= 2 ** 30 ? `${(b / 2 ** 30).toFixed(1)} GiB` : b >= 2 ** 20 ? `${(b / 2 ** 20).toFixed(1)} MiB` : `${b} bytes`

/** Same shape, or (a file that stores parameters flat) the same number of values in another rank. */
const sameShape = (want: readonly number[], got: readonly number[]) =>
  want.length === got.length ? want.every((d, i) => d === got[i]) : product(want) === product(got)

/**
 * The model's specs for `config`, checked against the weights and the memory available, before anything of
 * the model's size is allocated: BAD_CONFIG naming the config's field when it describes more layers than the
 * weights hold, a tensor of another shape, or a model larger than memory; BAD_CHECKPOINT when a tensor is
 * missing. The layer count is checked first, from the specs of a one- and a two-layer model (blocks repeat),
 * so that a config claiming a million layers fails at once instead of listing twelve million parameters.
 */
export function checkModelFits(o: FitCheck): ParamSpec[] {
  const parsed = ModelConfig.safeParse(o.config)
  if (!parsed.success)
    throw new LevanterError(
      'BAD_CONFIG',
      `${o.configFile}: ` +
        parsed.error.issues.map((i) => `field "${o.field(String(i.path[0] ?? ''))}": ${i.message}`).join('; '),
    )
  const config = parsed.data,
    values = config as Record<string, unknown>
  const specs = (c: ModelConfigInput) => {
    try {
      return specsOf(c)
    } catch (err) {
      if (!isLevanterError(err, 'BAD_CONFIG')) throw err
      throw new LevanterError('BAD_CONFIG', `${o.configFile}: ${err.message}`, { cause: err })
    }
  }
  const layers = config.nLayers
  const one = specs({ ...config, nLayers: 1 }),
    two = specs({ ...config, nLayers: 2 })
  const perLayer = two.length - one.length,
    fixed = one.length - perLayer
  const wanted = fixed + layers * perLayer
  if (wanted > o.tensorCount) {
    const held = perLayer > 0 ? Math.max(0, Math.floor((o.tensorCount - fixed) / perLayer)) : 0
    throw new LevanterError(
      'BAD_CONFIG',
      `${o.configFile}: field "${o.field('nLayers')}" is ${layers}, a model of ${wanted} tensors, but ` +
        `${o.weightsFile} holds ${o.tensorCount} (at most ${held} layer${held === 1 ? '' : 's'}); ` +
        'set it to the layers the weights hold',
    )
  }
  const all = specs(config)
  // Which fields set each dimension: change one field at a time in a one-layer model and see what moves.
  const setBy = new Map<string, Set<string>>() // `${name}/${axis}` → config keys
  for (const [key, value] of Object.entries(values)) {
    if (key === 'nLayers' || typeof value !== 'number') continue
    let moved: ParamSpec[]
    try {
      moved = specsOf({ ...config, nLayers: 1, [key]: value * 2 } as ModelConfigInput)
    } catch (_err) {
      continue // a doubled value the schema refuses sets no dimension worth naming
    }
    one.forEach((s, i) =>
      s.shape.forEach((d, axis) => {
        if (moved[i]?.shape[axis] === d) return
        const at = `${s.name.replace(/\.\d+\./, '.N.')}/${axis}`
        setBy.set(at, (setBy.get(at) ?? new Set()).add(key))
      }),
    )
  }
  const keysAt = (name: string, axes: readonly number[]) =>
    axes.flatMap((a) => [...(setBy.get(`${name.replace(/\.\d+\./, '.N.')}/${a}`) ?? [])])
  const cleared = new Set<string>() // fields that set a dimension of a tensor that matched
  for (const s of all) {
    const got = o.stored(s.name)
    if (!got) throw new LevanterError('BAD_CHECKPOINT', `${o.weightsFile}: tensor "${s.name}" is missing`)
    if (sameShape(s.shape, got)) {
      for (const k of keysAt(s.name, [...s.shape.keys()])) cleared.add(k)
      continue
    }
    const axes = s.shape.flatMap((d, axis) => (s.shape.length !== got.length || got[axis] !== d ? [axis] : []))
    const movers = [...new Set(keysAt(s.name, axes))],
      suspects = movers.filter((k) => !cleared.has(k))
    const keys = suspects.length ? suspects : movers
    const named = keys.map((k) => `"${o.field(k)}" (${String(values[k])})`)
    const hint = named.length ? `check field ${named.join(' or ')}` : 'the config does not describe these weights'
    throw new LevanterError(
      'BAD_CONFIG',
      `${o.configFile}: tensor "${s.name}" would be [${s.shape.join(', ')}], but ${o.weightsFile} holds ` +
        `[${got.join(', ')}]; ${hint}`,
    )
  }
  const params = all.reduce((a, s) => a + product(s.shape), 0)
  // the files read whole, their values as float32, and the model's own copy, all at once
  const need = o.fileBytes + 2 * 4 * params
  const budget = o.maxBytes ?? Math.floor(MEMORY_SHARE * availableMemory())
  if (need > budget) {
    const sizes = ['nLayers', 'dModel', 'vocabSize']
      .filter((k) => values[k] !== undefined)
      .map((k) => `${o.field(k)} ${String(values[k])}`)
    throw new LevanterError(
      'BAD_CONFIG',
      `${o.configFile}: the model it describes (${sizes.join(', ')}: ${params} parameters) needs ${fmt(need)} to ` +
        `load, more than the ${fmt(budget)} allowed (${
          o.maxBytes === undefined ? `${MEMORY_SHARE * 100}% of ` + 'the free memory' : 'maxBytes'
        }); load it on a machine with more memory`,
    )
  }
  return all
}
