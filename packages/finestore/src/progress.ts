/**
 * @module Progress of a long CLI task (such as `finestore verify`): a bar
 * redrawn in place on a terminal, otherwise one line every few seconds, so
 * that logs of scheduled jobs stay readable.
 */

/** `6.0 KiB`, `1.2 GiB`, `17 B`. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let i = 0
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024
    i++
  }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`
}

export type ProgressOptions = {
  /** Where the text goes (stderr, so that stdout stays the command's result). */
  readonly write: (s: string) => void
  /** Redraw one bar in place (a terminal) instead of printing lines. */
  readonly tty: boolean
  /** Least time between two lines (or two redraws). @default 5000 lines, 100 bar */
  readonly everyMs?: number
  readonly now?: () => number
}

const WIDTH = 30

export class Progress {
  readonly #everyMs: number
  readonly #now: () => number
  #last: number

  constructor(
    private readonly label: string,
    private readonly unit: string,
    private readonly total: number,
    private readonly totalBytes: number,
    private readonly opts: ProgressOptions,
  ) {
    this.#everyMs = opts.everyMs ?? (opts.tty ? 100 : 5000)
    this.#now = opts.now ?? Date.now
    this.#last = this.#now()
    this.#render(0, 0)
  }

  /** `done` items and `bytes` so far; shown if enough time passed since the last time. */
  update(done: number, bytes: number): void {
    const now = this.#now()
    if (now - this.#last < this.#everyMs) return
    this.#last = now
    this.#render(done, bytes)
  }

  /** Ends the bar's line; lines need nothing more (the caller prints the result). */
  finish(): void {
    if (this.opts.tty) this.opts.write('\n')
  }

  #render(done: number, bytes: number): void {
    const counts = `${done}/${this.total} ${this.unit} (${formatBytes(bytes)} of ${formatBytes(this.totalBytes)})`
    if (!this.opts.tty) return this.opts.write(`${this.label}: ${counts}\n`)
    const filled =
      this.totalBytes > 0
        ? Math.round((bytes / this.totalBytes) * WIDTH)
        : this.total > 0
          ? Math.round((done / this.total) * WIDTH)
          : WIDTH
    this.opts.write(`\r${this.label} [${'█'.repeat(filled)}${'░'.repeat(WIDTH - filled)}] ${counts}  `)
  }
}
