/**
 * @module Ends a vitest run with the ten slowest test files (import and tests, each file's own
 * time: files run two at a time, so these add up to more than the run) and one line CI can read:
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

/** The `n` slowest files: path relative to the run's root, and seconds to import and run. */
export function slowest(modules: ReadonlyArray<TestModule>, n = 10): { file: string; seconds: number }[] {
  return modules
    .map((m) => {
      const d = m.diagnostic()
      const root = m.project.config.root
      const file = m.moduleId.startsWith(`${root}/`) ? m.moduleId.slice(root.length + 1) : m.moduleId
      return {
        file: `${m.project.name ? `${m.project.name}/` : ''}${file}`,
        seconds: (d.collectDuration + d.duration) / 1000,
      }
    })
    .sort((a, b) => b.seconds - a.seconds)
    .slice(0, n)
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, errors: ReadonlyArray<unknown>): void {
    const slow = slowest(modules)
    if (slow.length > 0) {
      process.stdout.write('\nslowest test files (import + tests):\n')
      for (const { file, seconds } of slow) process.stdout.write(`  ${seconds.toFixed(1).padStart(7)} s  ${file}\n`)
    }
    const c = summarize(modules)
    // Errors outside any test (unhandled rejections, crashed workers) count as failures.
    const failed = c.failed + errors.length
    process.stdout.write(`\nvitest: ${c.passed} passed, ${failed} failed, ${c.skipped} skipped\n`)
  }
}
