/**
 * @module Checkpoints in finestore. Artifact `checkpoints/<run>`; each save commits a version
 * holding `step-<N>/{model,optimizer}.safetensors` and `step-<N>/manifest.json` for every kept
 * checkpoint. A mesh's members write their own parts instead, all into the same version
 * (`step-<N>/{model,optimizer}-<rank>-of-<members>.safetensors`), and the manifest records the mesh
 * and how each parameter lies on it (under fsdp each member stores only what it owns); reading
 * joins the parts into full tensors, which load into any mesh (parallel/layout.ts), or, for a mesh
 * (`loadInto`), leaves each member to read only the files its new parts lie in. finestore writes a
 * version's manifest after all its blobs, so a checkpoint whose save was interrupted is never
 * visible. Keep policy: multiples of `keepEvery` stay in every later version; others only while
 * among the `keepLatest` newest.
 */
import { isFinestoreError, openStore } from '@marin/finestore'
import type { ArtifactView, Store, Transaction } from '@marin/finestore'
import { logger } from '@marin/rigging'
import type { TrainTensors } from '../engine.js'
import { LevanterError, isLevanterError } from '../errors.js'
import { createModel } from '../models/lm.js'
import type { CausalLM } from '../models/lm.js'
import type { ModelConfigInput } from '../models/config.js'
import { joinMoments, joinWeights } from '../parallel/layout.js'
import type { ShardBlobs, ShardedLayout, StoredShards } from '../parallel/layout.js'
import { checkModelFits } from './model-fit.js'
import { decodeSafetensors, encodeSafetensors, readSafetensorsHeader } from './safetensors.js'
import type { SafeTensor } from './safetensors.js'

const log = logger('levanter')

/** What a checkpoint records besides tensors. */
export type CheckpointManifest = {
  readonly step: number
  /** Sequences consumed: step × batchSize (batches are a pure function of seed and step). */
  readonly dataPosition: number
  /** The batch-order seed; there is no other random state in training. */
  readonly rng: { readonly seed: number }
  readonly optimizerCount: number
  readonly config: { readonly model: unknown; readonly trainer: unknown }
  readonly metrics: Readonly<Record<string, number>>
  /** Present when each mesh member wrote its own parts. */
  readonly mesh?: ShardedLayout
}

export type CheckpointerOptions = {
  /** finestore URL or local path. */
  readonly store: string | Store
  readonly run: string
  readonly keepEvery?: number | null
  readonly keepLatest?: number
}

/** A kept checkpoint that could not be read, and why. */
export type DamagedCheckpoint = { readonly step: number; readonly reason: string }

/**
 * Where a sharded checkpoint lies, for a mesh whose members read their own parts (`MeshEngine.loadShards`): the
 * artifact version (`checkpoints/<run>@<version>`), the step's folder in it, the layout that wrote it. One type
 * with parallel/layout.ts's, which this file already imports.
 */
export type ShardSource = StoredShards

/** A loaded checkpoint; `damaged` lists newer ones skipped because they could not be read. */
export type LoadedCheckpoint = {
  readonly manifest: CheckpointManifest
  readonly tensors: TrainTensors
  readonly damaged: readonly DamagedCheckpoint[]
}

/** Errors that mean a checkpoint's stored bytes are damaged, not that the store is unreachable. */
const isDamage = (err: unknown): boolean =>
  isFinestoreError(err, 'INTEGRITY') ||
  isFinestoreError(err, 'NOT_FOUND') ||
  isLevanterError(err, 'BAD_SAFETENSORS') ||
  isLevanterError(err, 'BAD_CHECKPOINT')

const dir = (step: number) => `step-${String(step).padStart(9, '0')}`
const toSafe = (m: ReadonlyMap<string, Float32Array>, shapes?: ReadonlyMap<string, readonly number[]>) =>
  new Map<string, SafeTensor>([...m].map(([k, d]) => [k, { shape: shapes?.get(k) ?? [d.length], data: d }]))

/** The steps a version of a checkpoint artifact keeps, ascending. */
export function checkpointSteps(view: ArtifactView): number[] {
  return ((view.metadata.steps as number[] | undefined) ?? []).slice().sort((a, b) => a - b)
}

/**
 * The model of the checkpoint at `step` (default: the newest) in a version of a checkpoint
 * artifact, built from the model config its manifest records once that config is checked against the
 * weights and the memory available (model-fit.ts; `maxBytes` overrides the memory budget).
 */
export async function modelFromCheckpoint(
  view: ArtifactView,
  step?: number,
  maxBytes?: number,
): Promise<{ model: CausalLM; step: number }> {
  const steps = checkpointSteps(view)
  const s = step ?? steps[steps.length - 1]
  if (s === undefined)
    throw new LevanterError('CHECKPOINT_NOT_FOUND', `${view.ref}: holds no checkpoint (its metadata lists no steps)`)
  if (!steps.includes(s))
    throw new LevanterError(
      'CHECKPOINT_NOT_FOUND',
      `${view.ref}: no checkpoint at step ${s}; kept steps are ${steps.join(', ')}`,
    )
  const what = (f: string) => `${view.ref} ${dir(s)}/${f}`
  let manifest: CheckpointManifest
  try {
    manifest = JSON.parse(await view.readText(`${dir(s)}/manifest.json`)) as CheckpointManifest
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err
    throw new LevanterError('BAD_CHECKPOINT', `${what('manifest.json')}: not JSON (${err.message})`)
  }
  const cfg = (manifest as { config?: { model?: unknown } } | null)?.config?.model
  if (typeof cfg !== 'object' || cfg === null || Array.isArray(cfg))
    throw new LevanterError('BAD_CHECKPOINT', `${what('manifest.json')}: has no "config.model" object`)
  // What the weights hold, from their headers (or the manifest's layout for a mesh's parts), before the
  // model is built: a manifest is data, and its config may claim any size.
  const shapes = new Map<string, readonly number[]>(),
    whole = new Map<string, Uint8Array>()
  let fileBytes = 0
  const mesh = manifest.mesh
  if (mesh) {
    checkMesh(view, mesh, what('manifest.json'))
    const members = mesh.data * mesh.model
    for (const lp of mesh.layout) shapes.set(lp.name, lp.shape)
    for (let r = 0; r < members; r++) fileBytes += view.entry(`${dir(s)}/${shardFile('model', r, members)}`).size
  } else {
    // read whole (finestore verifies a blob only whole), and decoded from these bytes below
    const bytes = await view.read(`${dir(s)}/model.safetensors`)
    for (const [n, e] of readSafetensorsHeader(bytes, what('model.safetensors')).entries) shapes.set(n, e.shape)
    fileBytes = bytes.length
    whole.set('model.safetensors', bytes)
  }
  checkModelFits({
    config: cfg as ModelConfigInput,
    configFile: what('manifest.json'),
    weightsFile: what(mesh ? 'model-*.safetensors' : 'model.safetensors'),
    field: (k) => `config.model.${k}`,
    tensorCount: shapes.size,
    stored: (n) => shapes.get(n),
    fileBytes,
    ...(maxBytes === undefined ? {} : { maxBytes }),
  })
  const model = createModel(cfg as ModelConfigInput)
  try {
    for (const [n, d] of await readTensors(view, s, manifest, 'model', whole)) model.set(n, d)
  } catch (err) {
    model.dispose()
    throw err
  }
  return { model, step: s }
}

/** The file of member `rank` of a mesh of `members` in a sharded checkpoint's step folder. */
export const shardFile = (kind: 'model' | 'optimizer', rank: number, members: number) =>
  `${kind}-${String(rank).padStart(5, '0')}-of-${String(members).padStart(5, '0')}.safetensors`

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0

/**
 * A manifest's mesh, checked before its numbers size anything: members that the version's files can hold,
 * and each parameter's full shape, part and owned floats consistent with one another (parts are checked
 * against these when read), so that joining parts allocates only what the files hold.
 */
function checkMesh(view: ArtifactView, mesh: ShardedLayout, what: string): void {
  const bad = (msg: string) => new LevanterError('BAD_CHECKPOINT', `${what}: "mesh" ${msg}; the manifest is damaged`)
  if (!isCount(mesh.data) || !isCount(mesh.model) || mesh.data < 1 || mesh.model < 1)
    throw bad(`has data ${JSON.stringify(mesh.data)} and model ${JSON.stringify(mesh.model)}, not positive integers`)
  if (mesh.data * mesh.model > view.files().length)
    throw bad(`has ${mesh.data * mesh.model} members, more than the version's ${view.files().length} files`)
  if (!Array.isArray(mesh.layout)) throw bad('has no "layout" list')
  for (const lp of mesh.layout) {
    const name = JSON.stringify(lp?.name)
    if (typeof lp?.name !== 'string' || !Array.isArray(lp.shape) || !lp.shape.every(isCount))
      throw bad(`parameter ${name} has no name or no shape of non-negative integers`)
    const split = lp.split?.kind
    const parts = split === 'replicated' || mesh.model === 1 ? 1 : mesh.model
    if (!isCount(lp.size) || lp.shape.reduce((a: number, b: number) => a * b, 1) !== lp.size * parts)
      throw bad(`parameter ${name} has shape [${lp.shape.join(', ')}] but parts of ${JSON.stringify(lp.size)} floats`)
    if (lp.owned !== (mesh.fsdp ? Math.ceil(lp.size / mesh.data) : lp.size))
      throw bad(`parameter ${name} owns ${JSON.stringify(lp.owned)} floats, not its share of ${lp.size}`)
  }
}

/**
 * The full weights (`model`) or moments (`optimizer`) of step `s`: one file, or every member's parts joined;
 * `already` holds files of the step folder read before, by name.
 */
async function readTensors(
  view: ArtifactView,
  s: number,
  manifest: CheckpointManifest,
  kind: 'model' | 'optimizer',
  already: ReadonlyMap<string, Uint8Array> = new Map(),
): Promise<Map<string, Float32Array>> {
  const read = async (f: string) => {
    const bytes = already.get(f) ?? (await view.read(`${dir(s)}/${f}`))
    const { tensors } = decodeSafetensors(bytes, `${view.ref} ${dir(s)}/${f}`)
    return new Map(
      [...tensors].map(([k, t]) => [k, t.data instanceof Float32Array ? t.data : Float32Array.from(t.data)]),
    )
  }
  const mesh = manifest.mesh
  if (!mesh) return read(`${kind}.safetensors`)
  checkMesh(view, mesh, `${view.ref} ${dir(s)}/manifest.json`)
  const members = mesh.data * mesh.model
  const parts = await Promise.all(Array.from({ length: members }, (_, r) => read(shardFile(kind, r, members))))
  for (const [r, part] of parts.entries())
    for (const lp of mesh.layout) {
      const keys = kind === 'model' ? [lp.name] : [`m.${lp.name}`, `v.${lp.name}`]
      for (const k of keys)
        if (part.get(k)?.length !== (kind === 'model' && !mesh.ownedWeights ? lp.size : lp.owned))
          throw new LevanterError(
            'BAD_CHECKPOINT',
            `${view.ref} ${dir(s)}/${shardFile(kind, r, members)}: "${k}" is missing or not the size the manifest's ` +
              'layout records',
          )
    }
  return kind === 'model'
    ? joinWeights(parts, mesh.layout, mesh, mesh.ownedWeights === true)
    : joinMoments(parts, mesh.layout, mesh, mesh.fsdp)
}

export class Checkpointer {
  readonly artifact: string
  private constructor(
    readonly store: Store,
    readonly opts: CheckpointerOptions,
    private readonly owned: boolean,
  ) {
    this.artifact = `checkpoints/${opts.run}`
  }

  static async open(opts: CheckpointerOptions): Promise<Checkpointer> {
    if (typeof opts.store !== 'string') return new Checkpointer(opts.store, opts, false)
    return new Checkpointer(await openStore({ url: opts.store }), opts, true)
  }

  /** Steps of the checkpoints HEAD lists, ascending. */
  async steps(): Promise<number[]> {
    if ((await this.store.head(this.artifact)) === undefined) return []
    return checkpointSteps(await this.store.open(this.artifact))
  }

  /** Save tensors + manifest as step `manifest.step`; apply the keep policy. */
  async save(
    manifest: CheckpointManifest,
    tensors: TrainTensors,
    shapes: ReadonlyMap<string, readonly number[]>,
  ): Promise<void> {
    const optShapes = new Map<string, readonly number[]>()
    for (const [k, s] of shapes) {
      optShapes.set(`m.${k}`, s)
      optShapes.set(`v.${k}`, s)
    }
    await this.#commit(manifest, async (txn, d) => {
      await txn.put(`${d}/model.safetensors`, encodeSafetensors(toSafe(tensors.weights, shapes)))
      await txn.put(`${d}/optimizer.safetensors`, encodeSafetensors(toSafe(tensors.optimizer, optShapes)))
    })
  }

  /**
   * Save step `manifest.step` from the blobs each member of a mesh wrote (`MeshEngine.writeShards`,
   * in rank order) into this store: one version holds every member's files, and the manifest
   * records `mesh` and its layout. Applies the keep policy.
   */
  async saveShards(manifest: CheckpointManifest, mesh: ShardedLayout, blobs: readonly ShardBlobs[]): Promise<void> {
    const members = mesh.data * mesh.model
    if (blobs.length !== members)
      throw new LevanterError(
        'BAD_CHECKPOINT',
        `${this.artifact}: ${blobs.length} members' shards for a mesh of ${members}`,
      )
    await this.#commit({ ...manifest, mesh }, async (txn, d) => {
      for (const [r, b] of blobs.entries()) {
        await txn.putBlob(`${d}/${shardFile('model', r, members)}`, b.model)
        await txn.putBlob(`${d}/${shardFile('optimizer', r, members)}`, b.optimizer)
      }
    })
  }

  async #commit(manifest: CheckpointManifest, write: (txn: Transaction, dir: string) => Promise<void>): Promise<void> {
    const step = manifest.step
    const keepEvery = this.opts.keepEvery ?? null,
      keepLatest = this.opts.keepLatest ?? 2
    const previous = await this.steps()
    const all = [...new Set([...previous, step])].sort((a, b) => a - b)
    const temporary = all.filter((s) => !(keepEvery && s % keepEvery === 0))
    const dropped = new Set(temporary.slice(0, Math.max(0, temporary.length - keepLatest)))
    const kept = all.filter((s) => !dropped.has(s))
    await this.store.commit(
      this.artifact,
      async (txn) => {
        for (const path of Object.keys(txn.files())) {
          const s = Number(/^step-(\d+)\//.exec(path)?.[1])
          if (dropped.has(s) || s === step) txn.remove(path)
        }
        await write(txn, dir(step))
        await txn.put(`${dir(step)}/manifest.json`, JSON.stringify(manifest)) // the step's metadata, last
        txn.setMetadata({ latest: step, steps: kept })
      },
      { inherit: true, message: `checkpoint at step ${step}` },
    )
    log.info({ artifact: this.artifact, step, kept }, 'checkpoint saved')
  }

  /**
   * The checkpoint at `step`, or without `step` the newest intact one. A checkpoint whose files are
   * damaged (a blob that fails its hash, a truncated safetensors file, an unreadable manifest) is
   * skipped with a warning naming it, and the next older one is tried; `damaged` lists the skipped
   * steps. When every kept checkpoint is damaged the error names each one. Undefined when there is none.
   */
  async load(step?: number): Promise<LoadedCheckpoint | undefined> {
    const steps = await this.steps()
    if (steps.length === 0) return undefined
    if (step !== undefined) {
      if (!steps.includes(step))
        throw new LevanterError(
          'CHECKPOINT_NOT_FOUND',
          `${this.artifact}: no checkpoint at step ${step}; kept steps are ${steps.join(', ')}`,
        )
      return { ...(await this.#read(step)), damaged: [] }
    }
    const damaged: DamagedCheckpoint[] = []
    for (const s of steps.slice().reverse()) {
      try {
        return { ...(await this.#read(s)), damaged }
      } catch (err) {
        if (!isDamage(err)) throw err
        const reason = err instanceof Error ? err.message : String(err)
        damaged.push({ step: s, reason })
        log.warn(
          { artifact: this.artifact, step: s, reason },
          `checkpoint ${dir(s)} is damaged; trying the next older one`,
        )
      }
    }
    throw new LevanterError(
      'CHECKPOINT_DAMAGED',
      `${this.artifact}: every kept checkpoint is damaged (` +
        `${damaged.map((d) => `${dir(d.step)}: ${d.reason}`).join('; ')}); ` +
        'run `finestore verify` on the store, or delete the artifact to train from step 0',
    )
  }

  /**
   * {@link load}, except that a sharded checkpoint is not read here: `into` gets where it lies and
   * the mesh's members read their own parts (`MeshEngine.loadShards`), and `tensors` is absent.
   * A checkpoint written by one process is read and returned as by `load`.
   */
  async loadInto(
    into: (src: ShardSource) => Promise<void>,
  ): Promise<(Omit<LoadedCheckpoint, 'tensors'> & { readonly tensors?: TrainTensors }) | undefined> {
    const steps = await this.steps()
    const newest = steps[steps.length - 1]
    if (newest === undefined) return undefined
    const view = await this.store.open(this.artifact)
    const manifest = await this.#manifest(view, newest)
    if (!manifest.mesh) return this.load()
    checkMesh(view, manifest.mesh, `${this.artifact} ${dir(newest)}/manifest.json`)
    await into({ ref: view.ref, dir: dir(newest), mesh: manifest.mesh, count: manifest.optimizerCount })
    return { manifest, damaged: [] }
  }

  async #manifest(view: ArtifactView, s: number): Promise<CheckpointManifest> {
    const what = (f: string) => `${this.artifact} ${dir(s)}/${f}`
    let manifest: CheckpointManifest
    try {
      manifest = JSON.parse(new TextDecoder().decode(await view.read(`${dir(s)}/manifest.json`))) as CheckpointManifest
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err
      throw new LevanterError('BAD_CHECKPOINT', `${what('manifest.json')}: not JSON (${err.message})`)
    }
    if (manifest?.step !== s || typeof manifest.optimizerCount !== 'number') {
      throw new LevanterError('BAD_CHECKPOINT', `${what('manifest.json')}: does not describe step ${s}`)
    }
    return manifest
  }

  async #read(s: number): Promise<{ manifest: CheckpointManifest; tensors: TrainTensors }> {
    const view = await this.store.open(this.artifact)
    const manifest = await this.#manifest(view, s)
    return {
      manifest,
      tensors: {
        weights: await readTensors(view, s, manifest, 'model'),
        optimizer: await readTensors(view, s, manifest, 'optimizer'),
        count: manifest.optimizerCount,
      },
    }
  }

  close(): void {
    if (this.owned) this.store.close()
  }
}
