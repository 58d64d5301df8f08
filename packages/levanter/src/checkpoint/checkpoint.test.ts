import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { Dataset } from '../data/dataset.js'
import { isLevanterError } from '../errors.js'
import { Pipeline } from '../pipeline.js'
import { Gpt2LM } from '../models/lm.js'
import { CHILD_MODEL, CHILD_TOKENS, childTrainer } from '../test-support/train-child.js'
import { Checkpointer } from './checkpointer.js'
import { decodeSafetensors, encodeSafetensors } from './safetensors.js'

const child = fileURLToPath(new URL('../test-support/train-child.ts', import.meta.url))

beforeAll(async () => {
  await initBackend()
})

function waitForLine(file: string, pred: (l: Record<string, number>) => boolean, ms = 60_000): Promise<void> {
  const t0 = Date.now()
  return new Promise((resolve, reject) => {
    const tick = () => {
      const lines = fs.existsSync(file)
        ? fs
            .readFileSync(file, 'utf8')
            .trim()
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l))
        : []
      if (lines.some(pred)) return resolve()
      if (Date.now() - t0 > ms) return reject(new Error(`timed out waiting in ${file}`))
      setTimeout(tick, 50)
    }
    tick()
  })
}

/** Trains the child model here for `maxSteps` (checkpointing into `store` if given), each loss pushed to `losses`. */
const trainHere = (maxSteps: number, store?: string, losses: number[] = []) =>
  new Pipeline({
    dataset: Dataset.fromTokens(CHILD_TOKENS, { evalFraction: 0 }),
    model: new Gpt2LM(CHILD_MODEL, 1),
    trainer: childTrainer(store, { hooks: [{ every: 1, run: ({ loss }) => void losses.push(loss) }] }),
    maxSteps,
  }).run()

/** Saves step `s` of a one-tensor "model" `w` (all its values in one flat tensor). */
const saveTiny = (ck: Checkpointer, s: number, w: Map<string, Float32Array>) =>
  ck.save(
    { step: s, dataPosition: s, rng: { seed: 0 }, optimizerCount: s, config: { model: {}, trainer: {} }, metrics: {} },
    { weights: w, optimizer: new Map(), count: s },
    new Map([...w].map(([k, d]) => [k, [d.length]])),
  )

/** Where, on disk, the blob of a checkpoint file lies in the local store at `storeDir`. */
async function blobFile(ck: Checkpointer, storeDir: string, file: string): Promise<string> {
  const blob = (await ck.store.open(ck.artifact)).entry(file).blob
  return path.join(storeDir, 'blobs', 'sha256', blob.slice(0, 2), blob)
}

describe('safetensors', () => {
  test('round trip with metadata, 8-byte aligned data', () => {
    const t = new Map([
      ['a', { shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6.5]) }],
      ['b', { shape: [1], data: new Int32Array([-7]) }],
    ])
    const bytes = encodeSafetensors(t, { format: 'pt' })
    const headerLen = Number(new DataView(bytes.buffer).getBigUint64(0, true))
    expect((8 + headerLen) % 8).toBe(0)
    const back = decodeSafetensors(bytes)
    expect(back.metadata).toEqual({ format: 'pt' })
    expect(Array.from(back.tensors.get('a')!.data)).toEqual([1, 2, 3, 4, 5, 6.5])
    expect(back.tensors.get('b')!.data).toBeInstanceOf(Int32Array)
    expect(() => decodeSafetensors(bytes.subarray(0, 30), 'x.safetensors')).toThrow(
      /x.safetensors: .* the file is truncated/,
    )
    // A Node Buffer from a shared pool (its slice is a view, its buffer much larger), at an odd offset.
    const pooled = Buffer.concat([Buffer.from([9, 9, 9]), Buffer.from(bytes)]).subarray(3)
    expect(pooled.byteOffset).not.toBe(0)
    const fromPool = decodeSafetensors(pooled)
    expect(Array.from(fromPool.tensors.get('a')!.data)).toEqual([1, 2, 3, 4, 5, 6.5])
    expect(Array.from(fromPool.tensors.get('b')!.data)).toEqual([-7])
  })
})

describe('checkpoints', () => {
  test('keep policy: multiples of keepEvery stay, otherwise only the latest few', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-keep-'))
    const ck = await Checkpointer.open({ store: dir, run: 'k', keepEvery: 3, keepLatest: 2 })
    const w = new Map([['x', new Float32Array([1])]])
    for (let s = 1; s <= 7; s++) await saveTiny(ck, s, w)
    expect(await ck.steps()).toEqual([3, 5, 6, 7])
    expect((await ck.load(5))!.manifest.optimizerCount).toBe(5)
    await expect(ck.load(4)).rejects.toSatisfy((e) => isLevanterError(e, 'CHECKPOINT_NOT_FOUND'))
    ck.close()
  })

  test('resume after killing the training process gives the same losses, bit for bit', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-resume-'))
    const store = path.join(dir, 'store'),
      out = path.join(dir, 'losses.jsonl')
    // Uninterrupted reference run, in this process, without checkpoints.
    const ref: number[] = []
    await trainHere(8, undefined, ref)
    // A training process that checkpoints every step, killed (SIGKILL) at step 4.
    // (on another native thread count than this process's: the bits do not depend on it)
    const p = spawn(process.execPath, ['--import', 'tsx', child, store, out, '4'], {
      stdio: 'ignore',
      env: { ...process.env, LEVANTER_BACKEND: 'wasm', LEVANTER_THREADS: '1' },
    })
    await waitForLine(out, (l) => l.waiting === 4)
    p.kill('SIGKILL')
    await new Promise((r) => p.once('exit', r))
    // Resume in a new process.
    const q = spawn(process.execPath, ['--import', 'tsx', child, store, out], {
      stdio: 'ignore',
      env: { ...process.env, LEVANTER_BACKEND: 'wasm', LEVANTER_THREADS: '3' },
    })
    const code = await new Promise((r) => q.once('exit', r))
    expect(code).toBe(0)
    const lines = fs
      .readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .filter((l) => 'loss' in l)
    expect(lines.map((l) => l.step)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
    lines.forEach((l, i) => expect(l.loss).toBe(ref[i])) // bit-exact: the kernels are deterministic
  }, 90_000)

  test('a damaged newest checkpoint is skipped with a warning; training ' +
    'resumes from the newest intact one', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-damaged-'))
    const store = path.join(dir, 'store')
    const ref: number[] = []
    await trainHere(6, undefined, ref)
    // Train 4 steps with a checkpoint every step: 3 (a multiple of keepEvery) and the two latest others are kept.
    await trainHere(4, store)
    // Flip one byte in the blob of step 4's weights, on disk, as a failing disk would.
    const ck = await Checkpointer.open({ store, run: 'resume' })
    expect(await ck.steps()).toEqual([2, 3, 4])
    const file = await blobFile(ck, store, 'step-000000004/model.safetensors')
    ck.close()
    const bytes = fs.readFileSync(file)
    bytes[bytes.length - 3]! ^= 0x40
    fs.writeFileSync(file, bytes)
    // Resuming skips step 4, names it, and continues from step 3 with the same losses as an uninterrupted run.
    const losses: number[] = []
    const result = await trainHere(6, store, losses)
    expect(result.resumedFrom).toBe(3)
    expect(result.damagedCheckpoints.map((d) => d.step)).toEqual([4])
    expect(result.damagedCheckpoints[0]!.reason).toMatch(/step-000000004\/model\.safetensors/)
    losses.forEach((l, i) => expect(Math.abs(l - ref[3 + i]!)).toBeLessThan(1e-6))
    expect(losses).toHaveLength(3)
  }, 90_000)

  test('when every kept checkpoint is damaged, loading fails naming each one', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lev-all-damaged-'))
    const ck = await Checkpointer.open({ store: dir, run: 'd', keepLatest: 2 })
    const w = new Map([['x', new Float32Array([1, 2, 3])]])
    for (let s = 1; s <= 2; s++) await saveTiny(ck, s, w)
    // Both steps share the weights blob (same bytes); truncating it damages both.
    fs.truncateSync(await blobFile(ck, dir, 'step-000000002/model.safetensors'), 10)
    const err = await ck.load().then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(isLevanterError(err, 'CHECKPOINT_DAMAGED')).toBe(true)
    expect(String((err as Error).message)).toMatch(/step-000000002.*step-000000001/)
    // Asking for one step explicitly reports that step's own error.
    await expect(ck.load(1)).rejects.toThrow(/step-000000001\/model\.safetensors/)
    ck.close()
  })
})
