/**
 * @module Architectures as values: {@link defineArchitecture} describes one (config schema,
 * parameter specs with their sharding rules, the model, tensor-parallel stages, Hugging Face
 * names, FLOPs per token) and {@link registerArchitecture} makes its `type` usable in a model
 * config; everything architecture-specific in levanter is read from here by `type`.
 */
import type { z } from 'zod'
import { LevanterError } from '../errors.js'
import { registerConfigSchema } from './config.js'
import type { ModelConfigBase, ModelConfigInput } from './config.js'
import type { ParamSpec } from './param-spec.js'
import type { Stages } from './stages.js'

/** A dimension the model axis splits, for the check that it divides evenly (`what`: why it is split). */
export type ModelAxisDim = { readonly label: string; readonly value: number; readonly what: string }

/** How an architecture reads and writes Hugging Face's `config.json` and tensor names. */
export type HfNames<C extends ModelConfigBase> = {
  /** config.json's `model_type`. */
  readonly modelType: string
  /** config.json's `architectures[0]` (e.g. LlamaForCausalLM), also named in refusals. */
  readonly className: string
  /** Our config keys as config.json spells them, to name the field a refusal is about. */
  readonly fields: ReadonlyMap<string, string>
  /** config.json's fields for `c` (besides `torch_dtype`). */
  readonly toConfig: (c: C) => Record<string, unknown>
  /** Our config from config.json's fields (`file` names it in refusals). */
  readonly fromConfig: (j: Record<string, unknown>, file: string) => ModelConfigInput
  /** Parameters stored [out, in] by Hugging Face and [in, out] here (transposed on the way out and in). */
  readonly transposed?: (name: string) => boolean
  /** Other names a file may give parameter `name` (e.g. without a prefix), tried in order after it. */
  readonly aliases?: (name: string) => readonly string[]
  /** A tensor in the file the model does not use: true when it may be dropped; @default every one is dropped */
  readonly unusedOk?: (c: C, tensor: string) => boolean
}

/**
 * A faster decode step an architecture brings (for example one native call for the whole step): it answers the
 * step's logits [B, 1, V] left on the device, the same values as the tensor-op step, or undefined where it cannot
 * run here (the caller then runs the step on tensor ops). `prepare` readies the model for `weights` and throws
 * `BAD_CONFIG` naming why where they cannot run. `M` is the model, `K` the KV cache, `T` the logits tensor.
 */
export type ArchitectureDecode<M = unknown, K = unknown, T = unknown> = {
  step(model: M, cache: K, tokens: readonly number[], o: { readonly weights?: 'fp32' | 'bf16' }): T | undefined
  prepare(model: M, weights: 'fp32' | 'bf16'): void
}

/** What defines an architecture; `M` is its model class (a `CausalLM`). */
export type Architecture<C extends ModelConfigBase = ModelConfigBase, M = unknown> = {
  /** The config `type` that selects it. */
  readonly type: string
  /** Its config schema: `type` a literal of {@link type}; spread `modelConfigFields` for the shared fields. */
  readonly config: z.ZodType<C>
  /** Its parameters, in order, each with its sharding rule over the model axis. */
  readonly specs: (c: C) => ParamSpec[]
  /** A model with fresh parameters drawn from `seed`. */
  readonly create: (c: C, seed: number) => M
  /** Model FLOPs per token at context `seqLen` (`numParams`: the scalar parameters), for MFU. */
  readonly flopsPerToken: (c: C, seqLen: number, numParams: number) => number
  /** The per-member stages of tensor parallelism over `model` members (`lead`: model coordinate 0); without
   * them the architecture trains with mesh.model 1 only. */
  readonly stages?: (c: C, model: number, lead: boolean) => Stages
  /** Dimensions besides nHeads that the model axis splits (each must be a multiple of mesh.model). */
  readonly modelAxis?: (c: C) => readonly ModelAxisDim[]
  /** Hugging Face names: without them exportHf/importHf refuse the architecture. */
  readonly hf?: HfNames<C>
  /** URL of the module that defines it (`import.meta.url`), for processes that must load it. */
  readonly module?: string
  /** Its faster decode step, if it has one ({@link ArchitectureDecode}); without it decoding runs on tensor ops
   * and `weights: 'bf16'` is refused. */
  readonly decode?: ArchitectureDecode
}

/** Attention and matmul FLOPs of a decoder: 6 per parameter touched by a matmul, and 12·layers·dModel·seqLen. */
export const transformerFlops = (c: ModelConfigBase, seqLen: number, matmulParams: number): number =>
  6 * matmulParams + 12 * c.nLayers * c.dModel * seqLen

/** An architecture value, checked (register it with {@link registerArchitecture}). */
export function defineArchitecture<C extends ModelConfigBase, M>(arch: Architecture<C, M>): Architecture<C, M> {
  if (typeof arch.type !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(arch.type))
    throw new LevanterError(
      'BAD_CONFIG',
      `defineArchitecture: type ${JSON.stringify(arch.type)} must be a name (letters, digits, . _ -)`,
    )
  for (const k of ['specs', 'create', 'flopsPerToken'] as const)
    if (typeof arch[k] !== 'function')
      throw new LevanterError('BAD_CONFIG', `defineArchitecture "${arch.type}": ${k} must be a function`)
  if (typeof arch.config?.safeParse !== 'function')
    throw new LevanterError('BAD_CONFIG', `defineArchitecture "${arch.type}": config must be a zod schema`)
  return Object.freeze({ ...arch })
}

const registry = new Map<string, Architecture<ModelConfigBase, unknown>>()

/** Make `arch.type` usable in model configs (createModel, layouts, checkpoints, Hugging Face files). Registering
 * the same value again is a no-op; another value under a registered type is refused. */
export function registerArchitecture<C extends ModelConfigBase, M>(arch: Architecture<C, M>): void {
  const old = registry.get(arch.type)
  if ((old as unknown) === arch) return
  if (old)
    throw new LevanterError(
      'BAD_CONFIG',
      `registerArchitecture: type "${arch.type}" is already registered${old.module ? ` by ${old.module}` : ''}; ` +
        'choose another type',
    )
  registry.set(arch.type, arch as unknown as Architecture<ModelConfigBase, unknown>)
  registerConfigSchema(arch.type, arch.config)
}

/** The registered architecture types, sorted. */
export const registeredArchitectures = (): string[] => [...registry.keys()].sort()

/** The architecture registered under `type`, if any. */
export const findArchitecture = (type: string): Architecture<ModelConfigBase, unknown> | undefined => registry.get(type)

/** The architecture registered under `type`; BAD_CONFIG naming it and the registered ones when there is none. */
export function architectureOf(type: string): Architecture<ModelConfigBase, unknown> {
  const arch = registry.get(type)
  if (!arch)
    throw new LevanterError(
      'BAD_CONFIG',
      `model config: type ${JSON.stringify(type)} is not a registered architecture ` +
        `(registered: ${registeredArchitectures().join(', ') || 'none'}); ` +
        'define it with defineArchitecture and call registerArchitecture before using it',
    )
  return arch
}
