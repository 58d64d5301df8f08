/** @module @marin/marin/serve: an OpenAI-compatible server for a checkpoint (hono), with continuous batching. */
export { startServer } from './server.js'
export type { RunningServer, ServeOptions } from './server.js'
export { loadModel } from './load-model.js'
export type { LoadModelOptions, LoadedModel } from './load-model.js'
export { Engine } from './engine.js'
export type { EngineOptions, FinishReason, SequenceRequest, SequenceResult, TokenEvent } from './engine.js'
export { createApp } from './app.js'
export type { AppOptions } from './app.js'
