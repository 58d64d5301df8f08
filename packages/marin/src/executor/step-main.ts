/**
 * @module The program an iris job runs for one step:
 * `node --import tsx step-main.ts SCRIPT STEP NAME_HASH`. It imports the
 * experiment script, checks that the step's version is the one the executor
 * planned, runs the step under its lease and writes a result file for the executor.
 */
import { marinPrefix, scrubProcessOutput } from '@marin/rigging'
import { MarinError } from '../errors.js'
import { outputPathOf, prepare } from './executor.js'
import { loadExperiment } from './load-script.js'
import { openPrefixStorage } from './prefix-storage.js'
import { runStepHere, type StepResult } from './step-runner.js'
import { resultPath } from './step-job.js'

// This process may read secrets: what it prints (the job log the driver keeps and shows) holds none.
scrubProcessOutput()
const [script, stepName, expected] = process.argv.slice(2)
const env = process.env
const attempt = { id: env.MARIN_STEP_ATTEMPT ?? `${Date.now()}-${process.pid}`, owner: env.MARIN_STEP_OWNER ?? '' }
const storage = await openPrefixStorage(marinPrefix({ env }))
const startedAt = new Date().toISOString()
let result: StepResult
try {
  if (!script || !stepName || !expected) throw new MarinError('BAD_USAGE', 'usage: step-main.ts SCRIPT STEP NAME_HASH')
  const experiment = await loadExperiment(script)
  const { order, versions, configs } = prepare(experiment.steps, storage)
  const step = order.find((s) => s.name === stepName)
  if (!step)
    throw new MarinError(
      'STEP_NOT_FOUND',
      `${script}: experiment "${experiment.name}" has no step "` +
        `${stepName}"; was the script edited during the run?`,
    )
  const version = versions.get(step)!
  if (version.nameHash !== expected) {
    throw new MarinError(
      'VERSION_MISMATCH',
      `${script}: step "${stepName}" is now ${version.nameHash}, but ` +
        `the executor planned ${expected}; the script changed during the ` +
        `run, run it again`,
    )
  }
  result = await runStepHere({
    storage,
    step,
    version,
    config: configs.get(step),
    outputPath: outputPathOf(storage, version.nameHash),
    leaseTtlMs: Number(env.MARIN_LEASE_TTL_MS) > 0 ? Number(env.MARIN_LEASE_TTL_MS) : 60_000,
    ...(attempt.owner ? { owner: attempt.owner } : {}),
    force: env.MARIN_STEP_FORCE === '1',
    logName: `${attempt.id}.log`,
  })
} catch (err) {
  result = {
    status: 'FAILED',
    error: err instanceof Error ? (err.stack ?? err.message) : String(err),
    startedAt,
    finishedAt: new Date().toISOString(),
  }
  process.stderr.write(`${result.error}\n`)
}
if (expected) await storage.write(resultPath(expected, attempt), `${JSON.stringify(result, null, 2)}\n`)
process.exit(result.status === 'FAILED' ? 1 : 0)
