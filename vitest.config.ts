import { basename } from 'node:path'
import { defineConfig } from 'vitest/config'
import projects from './vitest.workspace.js'
import LongestFirst from './scripts/vitest-sequencer.js'
import SummaryReporter from './scripts/vitest-summary-reporter.js'

export default defineConfig({
  test: {
    projects: projects.map((dir) => ({
      extends: true,
      test: {
        name: basename(dir),
        root: dir,
        include: ['**/*.test.ts'],
        exclude: ['**/node_modules/**', '**/fixtures/**'],
      },
    })),
    // Library logs at warn, here and in the processes tests start (they inherit the
    // environment): a test that reads info lines sets LOG_LEVEL or the level itself.
    env: { LOG_LEVEL: 'warn' },
    reporters: ['default', new SummaryReporter()],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests start real servers and child processes: two cores is the budget.
    maxWorkers: 2,
    // The slowest files start first, whatever their project, so that none starts last and holds the tail alone.
    sequence: { sequencer: LongestFirst },
  },
})
