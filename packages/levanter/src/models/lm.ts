/**
 * @module Causal language models: {@link createModel} and {@link specsOf} build or describe the
 * model a config names through its registered architecture (models/registry.ts); the built-in
 * ones (GPT-2, Llama) are registered on import.
 */
import './builtin.js'
import { LevanterError } from '../errors.js'
import { CausalLM } from './causal-lm.js'
import { ModelConfig } from './config.js'
import type { ModelConfigInput } from './config.js'
import type { ParamSpec } from './param-spec.js'
import { architectureOf, findArchitecture } from './registry.js'
import type { Architecture } from './registry.js'

export { CausalLM } from './causal-lm.js'
export { Gpt2LM } from './gpt2.js'
export { LlamaLM } from './llama.js'

/** A config checked by its architecture's schema: BAD_CONFIG naming the fields otherwise. */
export function parseModelConfig(config: ModelConfigInput): ModelConfig {
  if (typeof config?.type === 'string') architectureOf(config.type) // an unknown type: name the registered ones
  const parsed = ModelConfig.safeParse(config)
  if (!parsed.success)
    throw new LevanterError(
      'BAD_CONFIG',
      `model config: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    )
  return parsed.data
}

/** Build the model a config names (its `type`: a registered architecture). */
export function createModel(config: ModelConfigInput, seed = 0): CausalLM {
  const c = parseModelConfig(config)
  const model = architectureOf(c.type).create(c, seed)
  if (!(model instanceof CausalLM))
    throw new LevanterError('BAD_CONFIG', `architecture "${c.type}": create() must return a CausalLM`)
  return model
}

/** The parameters the model a config names has, in its order, without building it (nothing allocated). */
export function specsOf(config: ModelConfigInput): ParamSpec[] {
  const c = parseModelConfig(config)
  return architectureOf(c.type).specs(c)
}

/** URL of the module that defines the architecture `type` (its `module`), for processes that must load it. */
export const architectureModule = (type: string): string | undefined => findArchitecture(type)?.module

/**
 * The architecture `type` names, importing `module` first (the URL its definition recorded) when it
 * is not registered in this process: how a replica process that receives only a config finds a
 * user's architecture. BAD_CONFIG, as {@link architectureOf}, when it is still unknown.
 */
export async function loadArchitecture(type: string, module?: string): Promise<Architecture> {
  if (!findArchitecture(type) && module) {
    try {
      await import(module)
    } catch (err) {
      throw new LevanterError(
        'BAD_CONFIG',
        `architecture "${type}": its module ${module} does not load (${(err as Error).message}); ` +
          'check the file exists and imports without error',
      )
    }
  }
  return architectureOf(type)
}
