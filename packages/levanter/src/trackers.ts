/**
 * @module Where metrics go: a tracker interface, JSONL (default), console and memory trackers. The
 * TensorBoard tracker (tensorboard.ts) implements the interface from its own file, which imports this one.
 */
import fs from 'node:fs'
import path from 'node:path'
import { logger } from '@marin/rigging'

/** Anything that records `{ step, ...metrics }`; implement it to send metrics elsewhere. */
export interface Tracker {
  log(step: number, metrics: Readonly<Record<string, number>>): void | Promise<void>
  close?(): void | Promise<void>
}

/** One JSON line per call: `{"step": 10, "train/loss": 3.2, ...}`, appended to `file`. */
export class JsonlTracker implements Tracker {
  constructor(readonly file: string) {
    fs.mkdirSync(path.dirname(file), { recursive: true })
  }
  log(step: number, metrics: Readonly<Record<string, number>>): void {
    fs.appendFileSync(this.file, JSON.stringify({ step, ...metrics }) + '\n')
  }
}

/** Metrics as info lines of the `levanter` logger. */
export class ConsoleTracker implements Tracker {
  readonly #log = logger('levanter')
  log(step: number, metrics: Readonly<Record<string, number>>): void {
    this.#log.info({ step, ...metrics }, 'metrics')
  }
}

/** Keeps every line in memory (`rows`), for callers that read metrics back. */
export class MemoryTracker implements Tracker {
  readonly rows: ({ step: number } & Record<string, number>)[] = []
  log(step: number, metrics: Readonly<Record<string, number>>): void {
    this.rows.push({ step, ...metrics })
  }
}
