/** @module What counters, gauges and histograms share: validated label names and one series per label set. */
import { RiggingError } from '../errors.js'
import type { Labels, MetricOptions } from './types.js'

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/

/** What counters, gauges and histograms share: validated labels and one series per label set. */
export abstract class Family<S> {
  readonly help: string
  readonly labelNames: readonly string[]
  protected readonly series = new Map<string, { labels: Record<string, string>; state: S }>()
  private unlabelled: S | undefined

  constructor(
    readonly name: string,
    opts: MetricOptions,
    reserved: readonly string[] = [],
  ) {
    this.help = opts.help
    this.labelNames = [...(opts.labelNames ?? [])].sort()
    for (const l of this.labelNames) {
      if (!LABEL_NAME.test(l) || l.startsWith('__') || reserved.includes(l)) {
        throw new RiggingError(
          'TELEMETRY_INVALID',
          `metric ${name}: label name "${l}" is not allowed; use letters, ` +
            `digits and "_" (not starting with "__"` +
            `${reserved.length ? `, not ${reserved.join(', ')}` : ''})`,
        )
      }
    }
  }

  protected abstract init(): S

  protected state(labels: Labels | undefined): S
  protected state(labels: Labels | undefined, create: false): S | undefined
  protected state(labels: Labels | undefined, create = true): S | undefined {
    if (labels === undefined && this.unlabelled !== undefined) return this.unlabelled
    // Hot path: read the declared names in their (sorted) order; no per-call sort.
    const names = this.labelNames
    const given = labels === undefined ? 0 : Object.keys(labels).length
    let id = ''
    let ok = given === names.length
    for (let i = 0; ok && i < names.length; i++) {
      const v = labels![names[i]!]
      if (v === undefined) ok = false
      else id += (i === 0 ? '' : '\u0000') + String(v)
    }
    if (!ok) {
      const keys = labels === undefined ? [] : Object.keys(labels).sort()
      throw new RiggingError(
        'TELEMETRY_INVALID',
        `metric ${this.name}: got labels [${keys.join(', ')}], but it ` +
          `was declared with [${names.join(', ')}]; pass exactly those`,
      )
    }
    let entry = this.series.get(id)
    if (entry === undefined && !create) return undefined
    if (entry === undefined) {
      const text: Record<string, string> = {}
      for (const k of names) text[k] = String(labels![k])
      entry = { labels: text, state: this.init() }
      this.series.set(id, entry)
    }
    if (labels === undefined) this.unlabelled = entry.state // the common no-label case skips the lookup next time
    return entry.state
  }

  protected checkValue(value: number, what: string): void {
    if (!Number.isFinite(value))
      throw new RiggingError('TELEMETRY_INVALID', `metric ${this.name}: ${what} ${value} is not a finite number`)
  }
}
