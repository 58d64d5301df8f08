/** @module `artifacts.json` from a step's side: writing the references it committed, and reading another step's main
 * one from a path. */
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { MarinError } from '../errors.js'
import {
  ARTIFACTS_FILE,
  formatArtifactRef,
  formatStepArtifacts,
  parseStepArtifacts,
  type ArtifactRef,
} from '../executor/artifacts.js'

/** What a step lists: references (or `NAME@VERSION` strings) with the main one first, and anything else it records. */
export type StepArtifactsInput = {
  readonly artifacts: readonly (ArtifactRef | string)[]
  readonly [key: string]: unknown
}

/** Writes `artifacts.json` into `outputPath`, the references in the typed form. */
export async function writeArtifacts(outputPath: string, artifacts: StepArtifactsInput): Promise<void> {
  await writeFile(join(outputPath, ARTIFACTS_FILE), formatStepArtifacts(artifacts))
}

/**
 * The main artifact in `artifacts.json` at `path` (a step output or the file itself), as `NAME@VERSION`.
 * A step that puts `other.artifact()` in its config gets the `ArtifactRef` without reading a file.
 */
export async function mainArtifact(path: string): Promise<string> {
  const file = path.endsWith(ARTIFACTS_FILE) ? path : join(path, ARTIFACTS_FILE)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    throw new MarinError(
      'STEP_FAILED',
      `${file}: cannot read the artifacts of the step before (` +
        `${(err as Error).message}); run that step again with --force`,
      { cause: err },
    )
  }
  return formatArtifactRef(parseStepArtifacts(text, file).artifacts[0]!)
}
