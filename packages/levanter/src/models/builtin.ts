/** @module The built-in architectures, registered on import: one line each. */
import { gpt2Architecture } from './gpt2.js'
import { llamaArchitecture } from './llama.js'
import { registerArchitecture } from './registry.js'

registerArchitecture(gpt2Architecture)
registerArchitecture(llamaArchitecture)
