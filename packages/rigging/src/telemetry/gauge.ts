/** @module Gauges: values that go up and down. */
import { Family } from './family.js'
import type { GaugeSnapshot, Labels } from './types.js'

/** One series of a gauge with its labels fixed. */
export type BoundGauge = { set(value: number): void; inc(by?: number): void; dec(by?: number): void; value(): number }

/** A value that goes up and down (queue length, memory in use). */
export class Gauge extends Family<{ value: number }> {
  readonly type = 'gauge'
  protected init() {
    return { value: 0 }
  }
  set(value: number, labels?: Labels): void {
    this.checkValue(value, 'value')
    this.state(labels).value = value
  }
  inc(by = 1, labels?: Labels): void {
    this.checkValue(by, 'increment')
    this.state(labels).value += by
  }
  /** The series of `labels`, bound: labels are checked once, not on every call. */
  with(labels: Labels): BoundGauge {
    const s = this.state(labels)
    const add = (by: number) => {
      this.checkValue(by, 'increment')
      s.value += by
    }
    return {
      set: (value) => {
        this.checkValue(value, 'value')
        s.value = value
      },
      inc: (by = 1) => add(by),
      dec: (by = 1) => add(-by),
      value: () => s.value,
    }
  }
  dec(by = 1, labels?: Labels): void {
    this.inc(-by, labels)
  }
  /** The current value; 0 for a label set never seen (without creating its series). */
  value(labels?: Labels): number {
    return this.state(labels, false)?.value ?? 0
  }
  snapshot(): GaugeSnapshot {
    return {
      type: 'gauge',
      name: this.name,
      help: this.help,
      samples: [...this.series.values()].map((s) => ({ labels: s.labels, value: s.state.value })),
    }
  }
}
