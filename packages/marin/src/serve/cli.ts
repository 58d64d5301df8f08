/** @module `marin serve`: load a checkpoint and serve it with the OpenAI-compatible API until SIGINT/SIGTERM. */
import fs from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Command } from 'commander'
import { UsageError } from '@marin/rigging/cli'
import { initBackend } from '@marin/levanter'
import { intArg, prefixOf } from '../cli/io.js'
import type { CliIo, Run } from '../cli/io.js'
import { DEFAULT_MAX_PREFILL_TOKENS } from './engine.js'
import { loadModel } from './load-model.js'
import { startServer } from './server.js'

export function serveCommand(cmd: Command, io: CliIo, run: Run): void {
  cmd
    .requiredOption(
      '--model-checkpoint <ref>',
      'directory (config.json + model.safetensors [+ tokenizer.json]) or finestore ARTIFACT[@VERSION]',
    )
    .option('--tokenizer <path>', 'tokenizer.json, when the checkpoint carries none')
    .option(
      '--architecture <module>',
      'module to import before loading, one that registers the architecture of a checkpoint levanter does not ' +
        'define (registerArchitecture); repeatable',
      (m: string, all: string[]) => [...all, m],
      [] as string[],
    )
    .option('--port <n>', 'port (0: any free port)', intArg('a port', 0), 8000)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--api-key-file <path>', 'file holding the bearer key clients must send')
    .option('--max-batch <n>', 'sequences decoded together', intArg('a batch size'), 16)
    .option(
      '--max-prefill-tokens <n>',
      'prompt tokens prefilled per scheduler step (a longer prompt in chunks of this size), so new prompts do not ' +
        'stall running ones',
      intArg('a token count'),
      DEFAULT_MAX_PREFILL_TOKENS,
    )
    .option('--max-tokens <n>', 'largest max_tokens accepted (default: the context length)', intArg('a token count'))
    .option('--max-body-bytes <n>', 'largest request body', intArg('a byte count'), 1 << 20)
    .option(
      '--max-sequences-per-request <n>',
      'most sequences (prompts × n) one request may ask for; more get 400',
      intArg('a sequence count'),
      256,
    )
    .option(
      '--max-queued-sequences <n>',
      'most sequences waiting for a slot; a request that does not fit gets 429 with Retry-After',
      intArg('a sequence count'),
      1024,
    )
    .option(
      '--weights <fp32|bf16>',
      'the weights decode steps read: fp32, or bf16 copies made at start (half the bytes a token reads; a CPU with ' +
        'AVX512_BF16 and an architecture with a native decode step)',
      'fp32',
    )
    .option('--name <id>', 'model id to report (default: from the checkpoint)')
    .action(
      (o: {
        modelCheckpoint: string
        tokenizer?: string
        architecture: string[]
        port: number
        host: string
        apiKeyFile?: string
        maxBatch: number
        maxTokens?: number
        maxBodyBytes: number
        maxSequencesPerRequest: number
        maxQueuedSequences: number
        maxPrefillTokens: number
        weights: string
        name?: string
      }) =>
        run(async () => {
          if (o.maxSequencesPerRequest > o.maxQueuedSequences) {
            throw new UsageError(
              `--max-sequences-per-request ${o.maxSequencesPerRequest} is ` +
                `above --max-queued-sequences ${o.maxQueuedSequences}: a request ` +
                `at the cap could never be queued; raise the queue bound or ` +
                `lower the cap`,
            )
          }
          if (o.weights !== 'fp32' && o.weights !== 'bf16')
            throw new UsageError(`--weights ${o.weights}: give fp32 or bf16`)
          const weights: 'fp32' | 'bf16' = o.weights
          let apiKey: string | undefined
          if (o.apiKeyFile !== undefined) {
            if (!fs.existsSync(o.apiKeyFile)) throw new UsageError(`--api-key-file ${o.apiKeyFile}: no such file`)
            apiKey = fs.readFileSync(o.apiKeyFile, 'utf8').trim()
          }
          for (const m of o.architecture) {
            if (!fs.existsSync(m)) throw new UsageError(`--architecture ${m}: no such file`)
            await import(pathToFileURL(path.resolve(m)).href)
          }
          await initBackend()
          const loaded = await loadModel({
            checkpoint: o.modelCheckpoint,
            prefix: prefixOf(io),
            ...(o.tokenizer ? { tokenizerPath: o.tokenizer } : {}),
          })
          const server = await startServer({
            model: loaded.model,
            tokenizer: loaded.tokenizer,
            ...(loaded.chatTemplate ? { chatTemplate: loaded.chatTemplate } : {}),
            name: o.name ?? loaded.name,
            port: o.port,
            host: o.host,
            maxBatch: o.maxBatch,
            maxBodyBytes: o.maxBodyBytes,
            maxSequencesPerRequest: o.maxSequencesPerRequest,
            maxQueuedSequences: o.maxQueuedSequences,
            maxPrefillTokens: o.maxPrefillTokens,
            weights,
            ...(apiKey !== undefined ? { apiKey } : {}),
            ...(o.maxTokens !== undefined ? { maxTokensCap: o.maxTokens } : {}),
          })
          io.out(`serving ${o.name ?? loaded.name} at ${server.url}/v1`)
          await new Promise<void>((resolve) => {
            const stop = () => resolve()
            process.once('SIGINT', stop)
            process.once('SIGTERM', stop)
          })
          await server.close()
          io.out('stopped')
          return 0
        }),
    )
}
