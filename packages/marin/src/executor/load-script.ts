/** @module Importing an experiment script: its default export must be an `Experiment`; a script that throws is reported
 * with its own stack. */
import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { MarinError } from '../errors.js'
import { isExperiment, type Experiment } from './experiment.js'
import { LOADING } from './main.js'

/**
 * Imports `file` and returns its default-exported Experiment. Nothing runs:
 * only the script's top level (which builds steps) is evaluated.
 */
export async function loadExperiment(file: string): Promise<Experiment> {
  const path = resolve(file)
  if (!existsSync(path))
    throw new MarinError(
      'SCRIPT_INVALID',
      `experiment script ${file} does not exist; pass the path of a .ts or .js file`,
    )
  let mod: { default?: unknown }
  const g = globalThis as Record<symbol, unknown>
  // While a script is imported by `marin run` or a step job, its own `experiment.main()` stays quiet.
  g[LOADING] = ((g[LOADING] as number | undefined) ?? 0) + 1
  try {
    mod = (await import(pathToFileURL(path).href)) as { default?: unknown }
  } catch (err) {
    const detail = err instanceof Error ? (err.stack ?? err.message) : String(err)
    throw new MarinError(
      'SCRIPT_FAILED',
      `experiment script ${file} threw while building its steps; nothing was run:\n${detail}`,
      { cause: err },
    )
  } finally {
    g[LOADING] = (g[LOADING] as number) - 1
  }
  const exp = mod.default
  if (!isExperiment(exp)) {
    throw new MarinError(
      'SCRIPT_INVALID',
      `experiment script ${file} must \`export default\` an Experiment ` +
        `(new Experiment({ name, steps })); its default export is ` +
        `${exp === undefined ? 'missing' : typeof exp}`,
    )
  }
  exp.script ??= path
  try {
    void exp.steps
  } catch (err) {
    const detail = err instanceof Error ? (err.stack ?? err.message) : String(err)
    throw new MarinError(
      'SCRIPT_FAILED',
      `experiment script ${file} threw while building its steps; nothing was run:\n${detail}`,
      { cause: err },
    )
  }
  return exp
}
