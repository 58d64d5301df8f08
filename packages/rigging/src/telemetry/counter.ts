/** @module Counters: values that only go up. */
import { RiggingError } from '../errors.js'
import { Family } from './family.js'
import type { CounterSnapshot, Labels } from './types.js'

/** One series of a counter with its labels fixed. */
export type BoundCounter = { inc(by?: number): void; value(): number }

/** A value that only goes up (requests served, bytes read). Name it `…_total`. */
export class Counter extends Family<{ value: number }> {
  readonly type = 'counter'
  protected init() {
    return { value: 0 }
  }
  /** Adds `by` (≥ 0) to the series of `labels`. @default by 1 */
  inc(by = 1, labels?: Labels): void {
    this.add(this.state(labels), by)
  }
  /**
   * The series of `labels`, bound: labels are checked once, not on every call.
   * @example const done = jobs.with({ state: 'done' }); done.inc()
   */
  with(labels: Labels): BoundCounter {
    const s = this.state(labels)
    return { inc: (by = 1) => this.add(s, by), value: () => s.value }
  }
  private add(s: { value: number }, by: number): void {
    this.checkValue(by, 'increment')
    if (by < 0)
      throw new RiggingError(
        'TELEMETRY_INVALID',
        `metric ${this.name}: a counter cannot decrease (got ${by}); use a gauge`,
      )
    s.value += by
  }
  /** The current value; 0 for a label set never seen (without creating its series). */
  value(labels?: Labels): number {
    return this.state(labels, false)?.value ?? 0
  }
  snapshot(): CounterSnapshot {
    return {
      type: 'counter',
      name: this.name,
      help: this.help,
      samples: [...this.series.values()].map((s) => ({ labels: s.labels, value: s.state.value })),
    }
  }
}
