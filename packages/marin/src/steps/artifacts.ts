/** @module `artifacts.json` in a step's output: the finestore versions the step committed, so a skipped step still hands them on. */
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { MarinError } from '../errors.js'

/** What `artifacts.json` holds: refs like `datasets/brown@2`, and the main one first. */
export type StepArtifacts = { readonly artifacts: readonly string[]; readonly [key: string]: unknown }

export async function writeArtifacts(outputPath: string, artifacts: StepArtifacts): Promise<void> {
  await writeFile(join(outputPath, 'artifacts.json'), `${JSON.stringify(artifacts, null, 2)}\n`)
}

/** Reads `artifacts.json` at `path` (a step output or the file itself) and returns its main ref. */
export async function mainArtifact(path: string): Promise<string> {
  const file = path.endsWith('artifacts.json') ? path : join(path, 'artifacts.json')
  let parsed: StepArtifacts
  try {
    parsed = JSON.parse(await readFile(file, 'utf8')) as StepArtifacts
  } catch (err) {
    throw new MarinError('STEP_FAILED', `${file}: cannot read the artifacts of the step before (${(err as Error).message}); run that step again with --force`, { cause: err })
  }
  const ref = parsed.artifacts?.[0]
  if (typeof ref !== 'string') throw new MarinError('STEP_FAILED', `${file}: lists no artifact; run the step that wrote it again with --force`)
  return ref
}
