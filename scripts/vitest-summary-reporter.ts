/**
 * @module Ends a vitest run with one line CI can read:
 * `vitest: N passed, N failed, N skipped`.
 */
import type { Reporter, TestModule } from 'vitest/node'

export function summarize(modules: ReadonlyArray<TestModule>): { passed: number; failed: number; skipped: number } {
  const counts = { passed: 0, failed: 0, skipped: 0 }
  for (const mod of modules) {
    let seen = 0
    for (const test of mod.children.allTests()) {
      seen++
      const state = test.result().state
      if (state === 'passed') counts.passed++
      else if (state === 'failed') counts.failed++
      else counts.skipped++
    }
    // A file that failed to load has no tests but must still fail the run.
    if (seen === 0 && mod.state() === 'failed') counts.failed++
  }
  return counts
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, errors: ReadonlyArray<unknown>): void {
    const c = summarize(modules)
    // Errors outside any test (unhandled rejections, crashed workers) count as failures.
    const failed = c.failed + errors.length
    process.stdout.write(`\nvitest: ${c.passed} passed, ${failed} failed, ${c.skipped} skipped\n`)
  }
}
