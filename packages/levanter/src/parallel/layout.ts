/**
 * @module How parameters lie on a `{ data, model }` mesh.
 *
 * Over `model` (tensor parallelism, Megatron style): attention is split by heads (the q/k/v
 * projections by columns, each of q, k and v its own block of columns; the output projection by
 * rows) and the MLP is column-parallel then row-parallel (its first projections by columns, its
 * last by rows). Embeddings, the output layer, norms and the row-parallel biases are replicated:
 * every model member holds them whole.
 *
 * Over `data` with `fsdp` (ZeRO-3): each member owns 1/data of every parameter it holds (after the
 * model split) and of its AdamW moments: the flat values padded with zeros to a multiple of
 * `data`, member s owning floats [s·L, (s+1)·L) with L = ⌈n / data⌉.
 */
import { Mesh } from '@marin/fray'
import { LevanterError } from '../errors.js'
import type { ModelConfig } from '../models/config.js'
import type { ParamSpec, Shard } from '../models/param-spec.js'
import { architectureOf } from '../models/registry.js'
import { normalRange, seedFor } from '../rng.js'

/** The `{ data, model }` mesh a run trains on. */
export type MeshShape = { readonly data: number; readonly model: number }

/**
 * `cols`: the last dimension is split, in `groups` blocks each split alike (q, k and v of a packed
 * projection); `rows`: the first dimension is split; `replicated`: whole on every member.
 */
export type ModelSplit =
  | { readonly kind: 'replicated' }
  | { readonly kind: 'cols'; readonly groups: number }
  | {
      readonly kind: 'rows'
    }

const REPLICATED: ModelSplit = { kind: 'replicated' }
const COLS: ModelSplit = { kind: 'cols', groups: 1 }
const ROWS: ModelSplit = { kind: 'rows' }

/** How a parameter splits over the model axis: its spec's sharding rule (models/param-spec.ts `Shard`). */
export function modelSplitOf(spec: ParamSpec): ModelSplit {
  const shard: Shard = spec.shard ?? 'replicated'
  if (typeof shard === 'object') return { kind: 'cols', groups: shard.column }
  if (shard === 'column') return COLS
  if (shard === 'row' || shard === 'vocab' || shard === 'expert') return ROWS
  return REPLICATED
}

/**
 * The replicated parameters used inside a split stage (its norms, its row-parallel biases): each
 * model member's gradient is a part, and the parts add up over the model axis.
 */
export function partialGradients(config: ModelConfig, specs: readonly ParamSpec[], model: number): Set<string> {
  const stages = architectureOf(config.type).stages?.(config, model, true)
  const replicated = new Set(specs.filter((s) => modelSplitOf(s).kind === 'replicated').map((s) => s.name))
  const out = new Set<string>()
  for (const st of stages?.blocks ?? []) if (st.split) for (const n of st.names) if (replicated.has(n)) out.add(n)
  return out
}

/** Throws BAD_CONFIG when the model's heads or the other dimensions its architecture splits do not divide evenly
 * over `model` members (or its architecture has no tensor-parallel stages). */
export function checkModelAxis(config: ModelConfig, model: number): void {
  if (model === 1) return
  const arch = architectureOf(config.type)
  if (!arch.stages)
    throw new LevanterError(
      'BAD_CONFIG',
      `trainer config: mesh.model ${model}: architecture "${config.type}" defines no tensor-parallel stages; ` +
        'train it with mesh.model 1 or give its definition stages',
    )
  const dims = [
    { label: 'nHeads', value: config.nHeads, what: 'heads are split over it' },
    ...(arch.modelAxis?.(config) ?? []),
  ]
  for (const d of dims)
    if (d.value % model !== 0)
      throw new LevanterError(
        'BAD_CONFIG',
        `trainer config: mesh.model ${model} must divide ${d.label} ${d.value} (${d.what}); ` +
          `choose a mesh.model that divides it`,
      )
}

/** Rows and columns of a parameter seen as a matrix (a vector is one row). */
const dims = (shape: readonly number[]): [number, number] =>
  shape.length === 1 ? [1, shape[0]!] : [shape[0]!, shape.slice(1).reduce((a, b) => a * b, 1)]

/** The shape member `r` of `model` holds. */
export function localShape(shape: readonly number[], split: ModelSplit, model: number): number[] {
  if (split.kind === 'replicated' || model === 1) return [...shape]
  if (split.kind === 'rows') return [shape[0]! / model, ...shape.slice(1)]
  return [...shape.slice(0, -1), shape[shape.length - 1]! / model]
}

/** Member `r`'s part (of `model`) of the full values `full` of a parameter of shape `shape`. */
export function modelPart(
  full: Float32Array,
  shape: readonly number[],
  split: ModelSplit,
  model: number,
  r: number,
): Float32Array {
  if (split.kind === 'replicated' || model === 1) return full
  const [R, C] = dims(shape)
  if (split.kind === 'rows') return full.slice((r * R * C) / model, ((r + 1) * R * C) / model)
  const block = C / split.groups,
    w = block / model,
    lc = C / model
  const out = new Float32Array(R * lc)
  for (let i = 0; i < R; i++)
    for (let g = 0; g < split.groups; g++) {
      const from = i * C + g * block + r * w
      out.set(full.subarray(from, from + w), i * lc + g * w)
    }
  return out
}

/** The full values of a parameter from every model member's part, in model order (inverse of {@link modelPart}). */
export function joinModelParts(
  parts: readonly Float32Array[],
  shape: readonly number[],
  split: ModelSplit,
): Float32Array {
  const model = parts.length
  if (split.kind === 'replicated' || model === 1) return parts[0]!
  const [R, C] = dims(shape)
  const out = new Float32Array(R * C)
  if (split.kind === 'rows') {
    parts.forEach((p, r) => out.set(p, (r * R * C) / model))
    return out
  }
  const block = C / split.groups,
    w = block / model,
    lc = C / model
  parts.forEach((p, r) => {
    for (let i = 0; i < R; i++)
      for (let g = 0; g < split.groups; g++)
        out.set(p.subarray(i * lc + g * w, i * lc + (g + 1) * w), i * C + g * block + r * w)
  })
  return out
}

/** Floats each of `data` members owns of `n`: ⌈n / data⌉ (the last ones padded with zeros). */
export const shardLength = (n: number, data: number): number => Math.ceil(n / data)

/** Member `s`'s shard (of `data`) of `values`, zero-padded to {@link shardLength}. */
export function fsdpShard(values: Float32Array, data: number, s: number): Float32Array {
  const L = shardLength(values.length, data)
  const out = new Float32Array(L)
  out.set(values.subarray(Math.min(values.length, s * L), Math.min(values.length, (s + 1) * L)))
  return out
}

/** The `n` values from every member's shard in data order (inverse of {@link fsdpShard}). */
export function joinFsdpShards(shards: readonly Float32Array[], n: number): Float32Array {
  const out = new Float32Array(n)
  const L = shardLength(n, shards.length)
  shards.forEach((s, i) => out.set(s.subarray(0, Math.max(0, Math.min(L, n - i * L))), i * L))
  return out
}

/** One parameter as one member holds it. */
export type LocalParam = {
  readonly name: string
  /** Shape of the full parameter. */
  readonly shape: readonly number[]
  /** Shape of this member's part over the model axis. */
  readonly local: readonly number[]
  readonly split: ModelSplit
  /** Its gradient adds up over the model axis (see {@link partialGradients}). */
  readonly partial: boolean
  readonly decay: boolean
  /** Floats of the local part, and of the member's shard of it (the local part itself without fsdp). */
  readonly size: number
  readonly owned: number
}

/** Every parameter of a model as a member of `mesh` holds it, in the model's order. */
export function localParams(
  config: ModelConfig,
  specs: readonly ParamSpec[],
  mesh: MeshShape,
  fsdp: boolean,
): LocalParam[] {
  const partial = mesh.model > 1 ? partialGradients(config, specs, mesh.model) : new Set<string>()
  return specs.map((s) => {
    const split = modelSplitOf(s)
    const local = localShape(s.shape, split, mesh.model)
    const size = local.reduce((a, b) => a * b, 1)
    return {
      name: s.name,
      shape: s.shape,
      local,
      split,
      partial: partial.has(s.name),
      decay: s.decay,
      size,
      owned: fsdp ? shardLength(size, mesh.data) : size,
    }
  })
}

/** Full weights, moments (`m.<name>`, `v.<name>`) and update count. */
export type FullTensors = {
  readonly weights: ReadonlyMap<string, Float32Array>
  readonly optimizer: ReadonlyMap<string, Float32Array>
  readonly count: number
}

/** A member's parts: model parts of the weights, owned slices of the moments. */
export type PartTensors = FullTensors

/** Coordinates of `rank` on a `{ data, model }` mesh (model varies fastest), as fray's mesh numbers its members. */
export const coordsOfRank = (mesh: MeshShape, rank: number) =>
  Mesh.coordsOf({ data: mesh.data, model: mesh.model }, rank) as { data: number; model: number }

/** What member `rank` of `mesh` holds of `full` (moments absent in `full` stay absent). */
export function cutForMember(
  full: FullTensors,
  layout: readonly LocalParam[],
  mesh: MeshShape,
  fsdp: boolean,
  rank: number,
): PartTensors {
  const { data, model } = coordsOfRank(mesh, rank)
  const weights = new Map<string, Float32Array>()
  const optimizer = new Map<string, Float32Array>()
  for (const lp of layout) {
    const w = full.weights.get(lp.name)
    if (!w)
      throw new LevanterError(
        'BAD_CHECKPOINT',
        `no values for parameter "${lp.name}"; check the checkpoint matches the model`,
      )
    if (w.length !== lp.shape.reduce((a, b) => a * b, 1))
      throw new LevanterError(
        'BAD_SHAPE',
        `parameter "${lp.name}": got ${w.length} values for shape [${lp.shape.join(', ')}]`,
      )
    weights.set(lp.name, modelPart(w, lp.shape, lp.split, mesh.model, model))
    for (const k of ['m', 'v']) {
      const o = full.optimizer.get(`${k}.${lp.name}`)
      if (!o) continue
      const part = modelPart(o, lp.shape, lp.split, mesh.model, model)
      optimizer.set(`${k}.${lp.name}`, fsdp ? fsdpShard(part, mesh.data, data) : part)
    }
  }
  return { weights, optimizer, count: full.count }
}

/** Full weights from every member's model parts (or, `owned`, their fsdp shards of them), in rank order. */
export function joinWeights(
  parts: readonly ReadonlyMap<string, Float32Array>[],
  layout: readonly LocalParam[],
  mesh: MeshShape,
  owned = false,
): Map<string, Float32Array> {
  if (owned) return joinOwned(parts, layout, mesh, (n) => [n])
  const out = new Map<string, Float32Array>()
  for (const lp of layout) {
    const models = Array.from({ length: mesh.model }, (_, m) => parts[m]!.get(lp.name)!) // data coordinate 0
    out.set(lp.name, joinModelParts(models, lp.shape, lp.split))
  }
  return out
}

/** Full tensors (`keys` of each parameter) from every member's fsdp shards of its model part, in rank order. */
function joinOwned(
  parts: readonly ReadonlyMap<string, Float32Array>[],
  layout: readonly LocalParam[],
  mesh: MeshShape,
  keys: (name: string) => string[],
): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>()
  const at = (d: number, m: number) => parts[d * mesh.model + m]!
  for (const lp of layout)
    for (const key of keys(lp.name)) {
      const models = Array.from({ length: mesh.model }, (_, m) =>
        joinFsdpShards(
          Array.from({ length: mesh.data }, (_, d) => at(d, m).get(key)!),
          lp.size,
        ),
      )
      out.set(key, joinModelParts(models, lp.shape, lp.split))
    }
  return out
}

/** Full moments (`m.<name>`, `v.<name>`) from every member's owned slices, in rank order. */
export function joinMoments(
  parts: readonly ReadonlyMap<string, Float32Array>[],
  layout: readonly LocalParam[],
  mesh: MeshShape,
  fsdp: boolean,
): Map<string, Float32Array> {
  const keys = (n: string) => [`m.${n}`, `v.${n}`]
  if (fsdp) return joinOwned(parts, layout, mesh, keys)
  const out = new Map<string, Float32Array>()
  for (const lp of layout)
    for (const key of keys(lp.name)) {
      const models = Array.from({ length: mesh.model }, (_, m) => parts[m]!.get(key)!) // data coordinate 0
      out.set(key, joinModelParts(models, lp.shape, lp.split))
    }
  return out
}

/** The full tensors from every member's parts, in rank order (inverse of {@link cutForMember}). */
export function assembleMembers(
  parts: readonly PartTensors[],
  layout: readonly LocalParam[],
  mesh: MeshShape,
  fsdp: boolean,
): FullTensors {
  return {
    weights: joinWeights(
      parts.map((p) => p.weights),
      layout,
      mesh,
    ),
    optimizer: joinMoments(
      parts.map((p) => p.optimizer),
      layout,
      mesh,
      fsdp,
    ),
    count: parts[0]!.count,
  }
}

/** What a sharded checkpoint records of its mesh: the axes, fsdp, and how each parameter lies. */
export type ShardedLayout = {
  readonly data: number
  readonly model: number
  readonly fsdp: boolean
  readonly layout: readonly LocalParam[]
  /**
   * The members' model files hold their owned shards of the weights (fsdp: `owned` floats each)
   * rather than their whole model parts (`size` floats; every data member the same).
   */
  readonly ownedWeights?: boolean
}

/** The blobs one member wrote for a checkpoint (its model parts, its owned moments) and its update count. */
export type ShardBlobs = {
  readonly model: { readonly hash: string; readonly size: number }
  readonly optimizer: { readonly hash: string; readonly size: number }
  readonly count: number
}

/** Where a sharded checkpoint lies, for members that read their own parts (checkpointer.ts `ShardSource` has this
 * shape): the artifact version (`checkpoints/<run>@<version>`), the step's folder in it, the layout that wrote it. */
export type StoredShards = {
  readonly ref: string
  readonly dir: string
  readonly mesh: ShardedLayout
  readonly count: number
}

/**
 * Calls `run(localAt, fullAt, length)` for each contiguous run of the local indices
 * [from, to) of member `r`'s model part of a parameter of `shape`, with where the run starts in the
 * full parameter (its flat index).
 */
function partRuns(
  shape: readonly number[],
  split: ModelSplit,
  model: number,
  r: number,
  from: number,
  to: number,
  run: (localAt: number, fullAt: number, length: number) => void,
): void {
  if (from >= to) return
  if (split.kind === 'replicated' || model === 1) return run(from, from, to - from)
  const [R, C] = dims(shape)
  if (split.kind === 'rows') return run(from, (r * R * C) / model + from, to - from)
  const block = C / split.groups,
    w = block / model,
    lc = C / model
  for (let i = Math.floor(from / lc); i < R && i * lc < to; i++)
    for (let g = 0; g < split.groups; g++) {
      const at = i * lc + g * w,
        a = Math.max(at, from),
        b = Math.min(at + w, to)
      if (a < b) run(a, i * C + g * block + r * w + (a - at), b - a)
    }
}

/**
 * Member `rank`'s initial values of a parameter, drawn as the whole model draws them
 * (`CausalLM.init`: each parameter from its own stream of `seed`) but only where the member needs
 * them: its model part (`owned` false), or under fsdp its owned shard of that part (zero-padded to
 * `lp.owned`). No member, and not the driver, ever holds the whole parameter.
 */
export function initialPart(
  spec: ParamSpec,
  lp: LocalParam,
  mesh: MeshShape,
  rank: number,
  seed: number,
  owned: boolean,
): Float32Array {
  const { data, model } = coordsOfRank(mesh, rank)
  const [from, to] = owned ? [data * lp.owned, Math.min(lp.size, (data + 1) * lp.owned)] : [0, lp.size]
  const out = new Float32Array(owned ? lp.owned : lp.size)
  if (spec.init === 'ones') out.fill(1, 0, Math.max(0, to - from))
  else if (spec.init !== 'zeros') {
    const { std } = spec.init,
      s = seedFor(seed, spec.name)
    partRuns(lp.shape, lp.split, mesh.model, model, from, to, (localAt, fullAt, length) =>
      out.set(normalRange(fullAt, fullAt + length, std, s), localAt - from),
    )
  }
  return out
}

/**
 * Calls `visit(m, localAt, fullAt, length)` for the pieces of the full parameter's flat range
 * [from, to) as the members of a model axis of `model` hold them: member m, at `localAt` of its
 * part (the inverse of {@link partRuns}; a replicated parameter is member 0's).
 */
function fullRuns(
  shape: readonly number[],
  split: ModelSplit,
  model: number,
  from: number,
  to: number,
  visit: (m: number, localAt: number, fullAt: number, length: number) => void,
): void {
  if (from >= to) return
  if (split.kind === 'replicated' || model === 1) return visit(0, from, from, to - from)
  const [R, C] = dims(shape)
  if (split.kind === 'rows') {
    const per = (R * C) / model
    for (let p = from; p < to; ) {
      const m = Math.floor(p / per),
        len = Math.min(to, (m + 1) * per) - p
      visit(m, p - m * per, p, len)
      p += len
    }
    return
  }
  const block = C / split.groups,
    w = block / model,
    lc = C / model
  for (let p = from; p < to; ) {
    const i = Math.floor(p / C),
      c = p - i * C,
      g = Math.floor(c / block),
      m = Math.floor((c - g * block) / w),
      cw = c - g * block - m * w,
      len = Math.min(to - p, w - cw)
    visit(m, i * lc + g * w + cw, p, len)
    p += len
  }
}

/** One copy of a checkpoint member's stored values into a member's new part. */
export type ShardCopy = {
  /** The stored member (rank in the checkpoint's mesh) and the tensor in its file. */
  readonly rank: number
  readonly key: string
  readonly from: number
  readonly to: Float32Array
  readonly at: number
  readonly length: number
}

/**
 * What member `rank` of `mesh` needs of a sharded checkpoint laid out as `stored`, without joining
 * any full tensor: its new parts (zero-filled: its weights' model part, or with `ownedWeights` its
 * fsdp shard of it; its owned moments) and the copies that fill them from the stored members'
 * tensors. The ranks the copies name are the only files the member has to read: a stored weight
 * is taken from the member that stored the moment at the same place where there is a choice, and
 * whole model parts stored alike by every data member from the one at this member's data
 * coordinate (modulo the stored data axis).
 */
export function shardCopies(
  stored: ShardedLayout,
  layout: readonly LocalParam[],
  mesh: MeshShape,
  fsdp: boolean,
  rank: number,
  ownedWeights: boolean,
): { weights: Map<string, Float32Array>; optimizer: Map<string, Float32Array>; copies: ShardCopy[] } {
  const { data, model } = coordsOfRank(mesh, rank)
  const storedBy = new Map(stored.layout.map((lp) => [lp.name, lp]))
  const weights = new Map<string, Float32Array>()
  const optimizer = new Map<string, Float32Array>()
  const copies: ShardCopy[] = []
  for (const lp of layout) {
    const old = storedBy.get(lp.name)
    if (!old || old.shape.join() !== lp.shape.join())
      throw new LevanterError(
        'BAD_CHECKPOINT',
        `parameter "${lp.name}" [${lp.shape.join(', ')}] is ${old ? `[${old.shape.join(', ')}]` : 'missing'} in the ` +
          "checkpoint's layout; check the checkpoint matches the model",
      )
    const L = old.owned
    // `owned`: member d of the stored data axis keeps floats [d·L, (d+1)·L) of its model part; `byOwner`: every
    // data member keeps the whole part, taken from that same member; else from this member's data coordinate
    const fill = (key: string, into: Float32Array, lo: number, hi: number, how: 'owned' | 'byOwner' | 'whole') =>
      partRuns(lp.shape, lp.split, mesh.model, model, lo, hi, (localAt, fullAt, length) =>
        fullRuns(old.shape, old.split, stored.model, fullAt, fullAt + length, (m, oldAt, pieceAt, len) => {
          const at = localAt - lo + (pieceAt - fullAt)
          if (how === 'whole') {
            copies.push({ rank: (data % stored.data) * stored.model + m, key, from: oldAt, to: into, at, length: len })
            return
          }
          for (let q = oldAt; q < oldAt + len; ) {
            const d = Math.floor(q / L),
              n = Math.min(oldAt + len, (d + 1) * L) - q
            const from = how === 'owned' ? q - d * L : q
            copies.push({ rank: d * stored.model + m, key, from, to: into, at: at + (q - oldAt), length: n })
            q += n
          }
        }),
      )
    const [wLo, wHi] = ownedWeights ? [data * lp.owned, Math.min(lp.size, (data + 1) * lp.owned)] : [0, lp.size]
    const w = new Float32Array(ownedWeights ? lp.owned : lp.size)
    fill(lp.name, w, wLo, wHi, stored.ownedWeights ? 'owned' : stored.fsdp ? 'byOwner' : 'whole')
    weights.set(lp.name, w)
    const [mLo, mHi] = fsdp ? [data * lp.owned, Math.min(lp.size, (data + 1) * lp.owned)] : [0, lp.size]
    for (const k of ['m', 'v']) {
      const o = new Float32Array(lp.owned)
      fill(`${k}.${lp.name}`, o, mLo, mHi, stored.fsdp ? 'owned' : 'whole')
      optimizer.set(`${k}.${lp.name}`, o)
    }
  }
  return { weights, optimizer, copies }
}
