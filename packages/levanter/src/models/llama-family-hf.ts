/**
 * @module The Hugging Face config.json of the Llama-family architectures (Llama, Qwen3, Mixtral), once: the fields
 * they share with their defaults, the checks every member makes, the tensors a file may hold that the model drops,
 * and {@link familyHf}, which makes an architecture's `hf` from what its own config adds.
 */
import { LevanterError } from '../errors.js'
import type { ModelConfigInput } from './config.js'
import { familyKvHeads } from './llama-family.js'
import type { LlamaFamilyConfig } from './llama-family.js'
import type { HfNames } from './registry.js'

type Keys = readonly (readonly [string, string])[]

/** An architecture's own config keys as config.json spells them, at their places among the shared ones. */
export type FamilyHfFields = { readonly afterHeads?: Keys; readonly afterKv?: Keys; readonly end?: Keys }

/** Our config keys as config.json spells them: the shared ones, with `own` (the architecture's) among them. */
function familyHfFields(own: FamilyHfFields): Map<string, string> {
  return new Map([
    ['vocabSize', 'vocab_size'],
    ['seqLen', 'max_position_embeddings'],
    ['dModel', 'hidden_size'],
    ['nLayers', 'num_hidden_layers'],
    ['nHeads', 'num_attention_heads'],
    ...(own.afterHeads ?? []),
    ['intermediateSize', 'intermediate_size'],
    ['nKvHeads', 'num_key_value_heads'],
    ...(own.afterKv ?? []),
    ['rmsNormEps', 'rms_norm_eps'],
    ['ropeTheta', 'rope_theta'],
    ['tieWordEmbeddings', 'tie_word_embeddings'],
    ...(own.end ?? []),
    ['initStd', 'initializer_range'],
  ])
}

/** An architecture's own config.json fields, at their places among the shared ones. */
export type FamilyHfConfig = { afterKv?: object; afterAct?: object; afterRope?: object; end?: object }

/** config.json for `c` (`F`: its MLP width): the shared fields, the architecture's own in `own` at their places. */
function familyHfConfig(
  names: { readonly type: string; readonly className: string },
  c: LlamaFamilyConfig,
  F: number,
  own: FamilyHfConfig,
): Record<string, unknown> {
  return {
    architectures: [names.className],
    model_type: names.type,
    vocab_size: c.vocabSize,
    max_position_embeddings: c.seqLen,
    hidden_size: c.dModel,
    intermediate_size: F,
    num_hidden_layers: c.nLayers,
    num_attention_heads: c.nHeads,
    num_key_value_heads: familyKvHeads(c),
    ...own.afterKv,
    hidden_act: 'silu',
    ...own.afterAct,
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    ...own.afterRope,
    initializer_range: c.initStd,
    tie_word_embeddings: c.tieWordEmbeddings ?? false,
    ...own.end,
  }
}

/** How a member reads config.json: which flags it refuses when true (`refused`, with `why` after the refusal),
 * whether it reads rope_scaling (refused otherwise) and checks hidden_act (silu), and its rope_theta default. */
export type FamilyHfRules = {
  readonly refused: readonly string[]
  readonly why?: string
  readonly ropeScaling: boolean
  readonly hiddenAct: boolean
  readonly ropeTheta: number
}

/** config.json's numbers: `n(k)` requires field k, `opt(k)` lets it be absent or null. */
export type HfNumbers = { n: (k: string) => number; opt: (k: string) => number | undefined }

/** A reader of config.json's numbers: `n` requires the field, `opt` lets it be absent or null (BAD_CHECKPOINT
 * naming the field and `file` otherwise). */
function hfNumbers(j: Record<string, unknown>, file: string): HfNumbers {
  const n = (k: string): number => {
    if (typeof j[k] !== 'number')
      throw new LevanterError('BAD_CHECKPOINT', `${file}: field "${k}" is missing or not a number`)
    return j[k] as number
  }
  const opt = (k: string): number | undefined => (j[k] === undefined || j[k] === null ? undefined : n(k))
  return { n, opt }
}

/** The shared part of a Llama-family config as config.json gives it. */
export type FamilyHfInput<T extends string> = {
  type: T
  vocabSize: number
  seqLen: number
  dModel: number
  nLayers: number
  nHeads: number
  intermediateSize: number
  rmsNormEps: number
  ropeTheta: number
  initStd: number
  nKvHeads?: number
  tieWordEmbeddings?: boolean
}

/** The shared part of our config from config.json (`type` is the architecture's): its fields with their defaults,
 * after the checks `rules` asks for. */
function familyFromHf<T extends string>(
  type: T,
  className: string,
  rules: FamilyHfRules,
  j: Record<string, unknown>,
  file: string,
): FamilyHfInput<T> {
  const { n, opt } = hfNumbers(j, file)
  if (j.tie_word_embeddings !== undefined && typeof j.tie_word_embeddings !== 'boolean')
    throw new LevanterError('BAD_CHECKPOINT', `${file}: field "tie_word_embeddings" is not true or false`)
  for (const k of rules.refused)
    if (j[k] === true)
      throw new LevanterError('BAD_CHECKPOINT', `${file}: ${k} = true is not supported${rules.why ?? ''}`)
  if (!rules.ropeScaling && j.rope_scaling !== undefined && j.rope_scaling !== null)
    throw new LevanterError('BAD_CHECKPOINT', `${file}: rope_scaling is not supported for ${className}; remove it`)
  if (rules.hiddenAct && j.hidden_act !== undefined && j.hidden_act !== 'silu')
    throw new LevanterError('BAD_CHECKPOINT', `${file}: hidden_act ${JSON.stringify(j.hidden_act)} is not silu`)
  const heads = n('num_attention_heads'),
    kv = opt('num_key_value_heads') ?? heads
  return {
    type,
    vocabSize: n('vocab_size'),
    seqLen: n('max_position_embeddings'),
    dModel: n('hidden_size'),
    nLayers: n('num_hidden_layers'),
    nHeads: heads,
    intermediateSize: n('intermediate_size'),
    rmsNormEps: n('rms_norm_eps'),
    ropeTheta: opt('rope_theta') ?? rules.ropeTheta,
    initStd: opt('initializer_range') ?? 0.02,
    ...(kv !== heads ? { nKvHeads: kv } : {}),
    ...(j.tie_word_embeddings ? { tieWordEmbeddings: true } : {}),
  }
}

/** A tensor a file may hold that the model drops: rotary's cached inverse frequencies, and the head when tied. */
const familyUnusedOk = (c: LlamaFamilyConfig, t: string): boolean =>
  /\.rotary_emb\.inv_freq$/.test(t) || (t === 'lm_head.weight' && !!c.tieWordEmbeddings)

/** What an architecture of the family says of its Hugging Face files beyond what the family shares. */
export type FamilyHfSpec<T extends string, C extends LlamaFamilyConfig, I extends ModelConfigInput> = {
  readonly type: T
  readonly className: string
  /** Its MLP width as config.json's intermediate_size gives it. */
  readonly mlpWidth: (c: C) => number
  readonly fields?: FamilyHfFields
  readonly config?: (c: C) => FamilyHfConfig
  readonly rules: FamilyHfRules
  /** Our whole config from the shared part `base` and the file's other fields (`read` reads its numbers). */
  readonly extend: (base: FamilyHfInput<T>, read: HfNumbers, j: Record<string, unknown>, file: string) => I
  /** The parameters Hugging Face stores [out, in]; @default the projections and the head */
  readonly transposed?: RegExp
}

/** An architecture's `hf` (see {@link HfNames}) from what it adds to the family's. */
export function familyHf<T extends string, C extends LlamaFamilyConfig, I extends ModelConfigInput>(
  s: FamilyHfSpec<T, C, I>,
): HfNames<C> {
  // nn.Linear weights: [out, in] in the files, [in, out] here
  const transposed = s.transposed ?? /(_proj|lm_head)\.weight$/
  return {
    modelType: s.type,
    className: s.className,
    fields: familyHfFields(s.fields ?? {}),
    toConfig: (c) => familyHfConfig(s, c, s.mlpWidth(c), s.config?.(c) ?? {}),
    fromConfig: (j, file) => s.extend(familyFromHf(s.type, s.className, s.rules, j, file), hfNumbers(j, file), j, file),
    transposed: (name) => transposed.test(name),
    // a tensor the model would not use (a bias, an extra head) is refused rather than dropped
    unusedOk: familyUnusedOk,
  }
}
