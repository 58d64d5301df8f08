/** @module The built-in architectures, registered on import: one line each. */
import { gpt2Architecture } from './gpt2.js'
import { llamaArchitecture } from './llama.js'
import { mixtralArchitecture } from './moe.js'
import { qwen3Architecture } from './qwen3.js'
import { registerArchitecture } from './registry.js'

registerArchitecture(gpt2Architecture)
registerArchitecture(llamaArchitecture)
registerArchitecture(qwen3Architecture)
registerArchitecture(mixtralArchitecture)
