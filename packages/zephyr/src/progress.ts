/**
 * @module Progress of a stage: a redrawn bar on a terminal, otherwise one log
 * line every few seconds (so CI logs and job logs stay readable).
 */
import { logger } from '@marin/rigging'

const log = logger('zephyr')

export type ProgressMode = 'auto' | 'bar' | 'log' | 'off'

export class StageProgress {
  private done = 0
  private records = 0
  private lastLog = Date.now()
  private readonly mode: 'bar' | 'log' | 'off'

  constructor(
    private readonly stage: number,
    private readonly stages: number,
    name: string,
    private readonly total: number,
    mode: ProgressMode = 'auto',
    private readonly intervalMs = 5000,
  ) {
    this.mode = mode === 'auto' ? (process.stderr.isTTY ? 'bar' : 'log') : mode
    if (this.mode === 'log') log.info({ stage: stage, shards: total, name }, 'stage started')
    this.render()
  }

  /** One more shard finished, having output `records`. */
  shardDone(records: number): void {
    this.done++
    this.records += records
    this.render()
  }

  private render(): void {
    if (this.mode === 'bar') {
      const width = 30
      const filled = this.total ? Math.round((this.done / this.total) * width) : width
      const bar = '█'.repeat(filled) + '░'.repeat(width - filled)
      process.stderr.write(
        `\r[stage ${this.stage + 1}/${this.stages}] ${bar} ${this.done}/` +
          `${this.total} shards, ${this.records} records  `,
      )
    } else if (this.mode === 'log' && Date.now() - this.lastLog >= this.intervalMs) {
      this.lastLog = Date.now()
      log.info({ stage: this.stage, done: this.done, shards: this.total, records: this.records }, 'stage progress')
    }
  }

  finish(timeMs: number): void {
    if (this.mode === 'bar') process.stderr.write('\n')
    else if (this.mode === 'log')
      log.info(
        { stage: this.stage, shards: this.total, records: this.records, timeMs: Math.round(timeMs) },
        'stage finished',
      )
  }
}
