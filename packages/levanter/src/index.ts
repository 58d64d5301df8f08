/** @module @marin/levanter: training on tfjs: models, optimizers, Trainer, Pipeline, checkpoints, data-parallel over
 * fray, generation. */
// first: tfjs's environment before any tensor exists (no tfjs-node banner, no per-op checks)
import './tfjs-env.js'
import pkg from '../package.json' with { type: 'json' }

export const name: string = pkg.name
export const version: string = pkg.version

// Backend and kernels
export { BACKEND_NAMES, initBackend } from './backend.js'
export type { BackendInfo, BackendName } from './backend.js'
export { registerLevanterKernels, unregisterLevanterKernels } from './kernels/register.js'
export { useDecodeKernel } from './kernels/attention.js'

// Errors
export { LEVANTER_ERROR_CODES, LevanterError, isLevanterError } from './errors.js'
export type { LevanterErrorCode } from './errors.js'

// Models
export {
  Gpt2Config,
  LlamaConfig,
  MixtralConfig,
  ModelConfig,
  Qwen3Config,
  llamaHidden,
  modelConfigFields,
} from './models/config.js'
export type {
  Gpt2ConfigInput,
  LlamaConfigInput,
  MixtralConfigInput,
  ModelConfigBase,
  ModelConfigInput,
  Qwen3ConfigInput,
  RopeScaling,
} from './models/config.js'
export { CausalLM, Gpt2LM, LlamaLM, createModel, specsOf } from './models/lm.js'
export type { ForwardArgs, ForwardResult, Placement } from './models/layers.js'
export type { ParamSpec, Shard } from './models/param-spec.js'

// Architectures: one value each (models/registry.ts); GPT-2, Llama, Qwen3 and Mixtral are registered on import
export {
  architectureOf,
  defineArchitecture,
  registerArchitecture,
  registeredArchitectures,
  transformerFlops,
} from './models/registry.js'
export type { Architecture, ArchitectureDecode, HfNames, ModelAxisDim } from './models/registry.js'
export { gpt2Architecture } from './models/gpt2.js'
export { llamaArchitecture } from './models/llama.js'
export { Qwen3LM, qwen3Architecture } from './models/qwen3.js'
export { MixtralLM, mixtralArchitecture } from './models/moe.js'
export { residual } from './models/stages.js'
export type { Stage, Stages } from './models/stages.js'
export { maskedCrossEntropy, withAuxLoss } from './loss.js'

// Data
export { Dataset } from './data/dataset.js'
export type { DatasetOptions } from './data/dataset.js'
export { MixtureDataset } from './data/mixture.js'
export type { MixtureOptions, MixtureStage, MixtureWeights } from './data/mixture.js'
export { InMemoryTokenSource } from './data/token-source.js'
export type { TokenSource } from './data/token-source.js'
export { maskCount, sliceBatch } from './data/batch.js'
export type { Batch } from './data/batch.js'

// Optimization and training
export { AdamW, AdamWConfig, globalNorm } from './optim/adamw.js'
export type { AdamWConfigInput } from './optim/adamw.js'
export { LrSchedule, learningRateAt } from './optim/schedule.js'
export type { LrScheduleInput } from './optim/schedule.js'
export { computeGrads } from './train-step.js'
export type { Grads } from './train-step.js'
export { LocalEngine } from './engine.js'
export type { Engine, StepResult, TrainTensors } from './engine.js'
export { Trainer, TrainerConfig } from './trainer.js'
export type { Hook, StepInfo, TrainerConfigInput, TrainerExtras } from './trainer.js'
export { Pipeline } from './pipeline.js'
export type { PipelineOptions, RunResult } from './pipeline.js'
export { ConsoleTracker, JsonlTracker, MemoryTracker } from './trackers.js'
export { TensorBoardTracker } from './tensorboard.js'
export { ProgressTracker, formatEta } from './progress-tracker.js'
export type { ProgressLog, ProgressTrackerOptions } from './progress-tracker.js'
export type { Tracker } from './trackers.js'
export { MeshEngine } from './parallel/mesh-engine.js'
export type { MeshEngineOptions } from './parallel/mesh-engine.js'
export type { LocalParam, MeshShape, ModelSplit, ShardedLayout } from './parallel/layout.js'
export type { MeshPlacement } from './parallel/placement.js'

// Checkpoints
export { Checkpointer } from './checkpoint/checkpointer.js'
export type { CheckpointManifest, CheckpointerOptions } from './checkpoint/checkpointer.js'
export { decodeSafetensors, encodeSafetensors } from './checkpoint/safetensors.js'
export type { SafeTensor, StoredDtype } from './checkpoint/safetensors.js'
export { checkpointSteps, modelFromCheckpoint } from './checkpoint/checkpointer.js'
export { exportHf, importHf } from './checkpoint/hf.js'
export type { ExportHfOptions, HfDtype } from './checkpoint/hf.js'
export { loadModel } from './checkpoint/load-model.js'
export type { LoadModelOptions, LoadedModel } from './checkpoint/load-model.js'

// Generation and batched decoding (rows at different positions: continuous batching)
export { decodeStepFast, generate, generateAsync, prepareDecodeWeights, score } from './generate.js'
export { logSoftmax, sampleToken, topLogprobs } from './sampling.js'
export type { SampleOptions } from './sampling.js'
export { BatchCache } from './models/batch-cache.js'
export type { LayerKv } from './models/batch-cache.js'
export { decodeStep, prefill, prefillChunk } from './models/decode.js'
export type { GenerateOptions, Generation } from './generate.js'
export type { DecodeWeights } from './kernels/native-gemv-decode.js'
export { Rng, seedFor } from './rng.js'
