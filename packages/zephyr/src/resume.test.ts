import { spawn } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { ZephyrContext } from './context.js'
import { pipeline } from './fixtures/slow-run.js'
import { tempDir } from './fixtures/tmp.js'

const script = fileURLToPath(new URL('./fixtures/slow-run.ts', import.meta.url))
const FILES = 6
const PER_FILE = 60

function setup(): string {
  const dir = tempDir()
  mkdirSync(join(dir, 'in'))
  for (let f = 0; f < FILES; f++) {
    writeFileSync(
      join(dir, 'in', `${f}.jsonl`),
      Array.from({ length: PER_FILE }, (_, i) => JSON.stringify({ id: f * PER_FILE + i })).join('\n'),
    )
  }
  return dir
}

/** Starts the pipeline in a child process and SIGKILLs it once `ready(dir)` holds. */
async function runAndKill(dir: string, mode: string, ready: () => boolean): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', script, dir, mode], {
    stdio: ['ignore', 'ignore', 'pipe'],
    cwd: process.cwd(),
  })
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)))
  for (;;) {
    if (ready()) break
    if (child.exitCode !== null) throw new Error(`the run finished before it could be killed: ${stderr}`)
    await new Promise((r) => setTimeout(r, 20))
  }
  child.kill('SIGKILL')
  expect(await exited).toBe('SIGKILL')
}

function outputs(dir: string): string[] {
  return readdirSync(join(dir, 'out'))
    .filter((f) => /^part-\d{5}-of-\d{5}\.jsonl$/.test(f))
    .sort()
}

function ids(dir: string): number[] {
  return outputs(dir)
    .flatMap((f) =>
      readFileSync(join(dir, 'out', f), 'utf8')
        .trim()
        .split('\n'),
    )
    .map((l) => (JSON.parse(l) as { id: number }).id)
    .sort((a, b) => a - b)
}

const all = Array.from({ length: FILES * PER_FILE }, (_, i) => i)

describe('resume after killing a run', () => {
  test('finished output shards are kept and the rest are written, each record once', async () => {
    const dir = setup()
    let firstDone: string[] = []
    await runAndKill(dir, 'single', () => {
      try {
        firstDone = outputs(dir)
        return firstDone.length >= 2
      } catch {
        return false
      }
    })
    expect(outputs(dir).length).toBeLessThan(FILES)
    const before = new Map(outputs(dir).map((f) => [f, readFileSync(join(dir, 'out', f), 'utf8')]))
    const r = await new ZephyrContext({ inProcess: true, progress: 'off' }).execute(pipeline(dir, 'single'), {
      skipExisting: true,
    })
    expect(r.counters[0]!.shardsSkipped).toBe(before.size)
    expect(r.counters[0]!.shards - r.counters[0]!.shardsSkipped).toBe(FILES - before.size)
    for (const [f, text] of before) expect(readFileSync(join(dir, 'out', f), 'utf8')).toBe(text)
    expect(ids(dir)).toEqual(all)
  }, 90_000)

  test('a shuffle stage resumes from its committed shards; a killed attempt leaves no duplicates', async () => {
    const dir = setup()
    const doneMarkers = () => {
      try {
        return readdirSync(join(dir, 'out'), { recursive: true }).filter((p) => /s0[/\\]done[/\\]\d+$/.test(String(p)))
          .length
      } catch {
        return 0
      }
    }
    await runAndKill(dir, 'shuffle', () => doneMarkers() >= 2)
    expect(outputs(dir)).toEqual([])
    const committed = doneMarkers()
    const r = await new ZephyrContext({ inProcess: true, progress: 'off' }).execute(pipeline(dir, 'shuffle'), {
      skipExisting: true,
    })
    expect(r.counters[0]!.shardsSkipped).toBe(committed)
    expect(r.counters[0]!.recordsIn).toBe((FILES - committed) * PER_FILE)
    expect(outputs(dir)).toHaveLength(3)
    expect(ids(dir)).toEqual(all)
    // the scratch folder is gone after a successful run
    expect(readdirSync(join(dir, 'out')).filter((f) => f.startsWith('.zephyr-scratch'))).toEqual([])
  }, 90_000)
})
