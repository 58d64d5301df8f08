/**
 * @module One step run as an iris job, as a call: `runStepJob(argv)` with the job's arguments
 * `SCRIPT STEP NAME_HASH [--attempt ID] [--owner OWNER] [--force]` imports the experiment script (once
 * per process: a warm runner keeps it), checks that the step's version is the one the executor planned,
 * runs the step under its lease and writes a result file for the executor. `step-main.ts` calls it
 * in a process of its own, `warm-step-runner.ts` for each task of a warm runner.
 */
import { marinPrefix } from '@marin/rigging'
import { MarinError } from '../errors.js'
import { outputPathOf, prepare } from './executor.js'
import { loadExperiment } from './load-script.js'
import { openPrefixStorage } from './prefix-storage.js'
import { runStepHere, type StepResult } from './step-runner.js'
import { resultPath } from './step-job.js'

const USAGE = 'usage: step-main.ts SCRIPT STEP NAME_HASH [--attempt ID] [--owner OWNER] [--force]'

/** The arguments of a step job. */
export type StepJobArgs = {
  readonly script: string
  readonly step: string
  readonly nameHash: string
  readonly attempt?: string
  readonly owner?: string
  readonly force: boolean
}

/** Parses a step job's arguments; throws BAD_USAGE naming what is wrong. */
export function parseStepJobArgs(argv: readonly string[]): StepJobArgs {
  const [script, step, nameHash, ...rest] = argv
  if (!script || !step || !nameHash || script.startsWith('--')) throw new MarinError('BAD_USAGE', USAGE)
  const out: { attempt?: string; owner?: string; force: boolean } = { force: false }
  for (let i = 0; i < rest.length; i++) {
    const flag = rest[i]
    if (flag === '--force') out.force = true
    else if ((flag === '--attempt' || flag === '--owner') && rest[i + 1] !== undefined)
      out[flag.slice(2) as 'attempt' | 'owner'] = rest[++i]!
    else throw new MarinError('BAD_USAGE', `step job: unexpected argument ${JSON.stringify(flag)}; ${USAGE}`)
  }
  return { script, step, nameHash, ...out }
}

/** Runs the step a job names; resolves with its exit code (1 when the step failed). Never throws. */
export async function runStepJob(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const startedAt = new Date().toISOString()
  let args: StepJobArgs | undefined
  let result: StepResult
  const storage = await openPrefixStorage(marinPrefix({ env }))
  try {
    args = parseStepJobArgs(argv)
    const experiment = await loadExperiment(args.script)
    const { order, versions, configs } = prepare(experiment.steps, storage)
    const step = order.find((s) => s.name === args!.step)
    if (!step)
      throw new MarinError(
        'STEP_NOT_FOUND',
        `${args.script}: experiment "${experiment.name}" has no step "${args.step}"; ` +
          'was the script edited during the run?',
      )
    const version = versions.get(step)!
    if (version.nameHash !== args.nameHash) {
      throw new MarinError(
        'VERSION_MISMATCH',
        `${args.script}: step "${args.step}" is now ${version.nameHash}, but the executor planned ` +
          `${args.nameHash}; the script changed during the run, run it again`,
      )
    }
    result = await runStepHere({
      storage,
      step,
      version,
      config: configs.get(step),
      outputPath: outputPathOf(storage, version.nameHash),
      leaseTtlMs: Number(env.MARIN_LEASE_TTL_MS) > 0 ? Number(env.MARIN_LEASE_TTL_MS) : 60_000,
      ...(args.owner ? { owner: args.owner } : {}),
      force: args.force,
      ...(args.attempt ? { logName: `${args.attempt}.log` } : {}),
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
  if (args) {
    const attempt = { id: args.attempt ?? `${Date.now()}-${process.pid}`, owner: args.owner ?? '' }
    await storage.write(resultPath(args.nameHash, attempt), `${JSON.stringify(result, null, 2)}\n`)
  }
  return result.status === 'FAILED' ? 1 : 0
}
