/** @module `artifacts.json` from a step's side: writing the references it committed, and reading another step's main
 * one from a path. A step's output is a local folder or, on a prefix in an object store, a storage URL
 * (`s3://bucket/marin/<step>_<hash8>`): both go through the prefix's storage, whose writes are atomic (a killed
 * writer leaves the old object or none, never a part). */
import { mkdir, readdir, readFile } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { openStorage, prefixDir } from '@marin/rigging'
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

/**
 * Makes a step's output ready for writing: creates the folder of a local output; an output in an object store needs
 * none (its objects are written by name).
 */
export async function prepareOutput(outputPath: string): Promise<void> {
  const dir = prefixDir(outputPath)
  if (dir !== undefined) await mkdir(dir, { recursive: true })
}

/**
 * Copies every file under the local folder `dir` to the same relative path under `outputPath` (a storage URL; each
 * object written whole), for a step whose tools write local files (trackers) while its output is in an object store.
 */
export async function publishFolder(dir: string, outputPath: string): Promise<string[]> {
  const out = await openStorage(outputPath)
  const files = (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile())
  const written: string[] = []
  for (const f of files) {
    const path = join(f.parentPath, f.name)
    const rel = relative(dir, path).split('\\').join('/')
    await out.write(rel, await readFile(path))
    written.push(rel)
  }
  return written.sort()
}

/** Writes `artifacts.json` into `outputPath` (a local folder or a storage URL), the references in the typed form. */
export async function writeArtifacts(outputPath: string, artifacts: StepArtifactsInput): Promise<void> {
  await (await openStorage(outputPath)).write(ARTIFACTS_FILE, formatStepArtifacts(artifacts))
}

/** The text of `path` (a local path or a storage URL of a file). */
async function readPathText(path: string): Promise<string> {
  const cut = path.lastIndexOf('/')
  if (cut < 0) return (await openStorage('.')).readText(path)
  return (await openStorage(path.slice(0, cut) || '/')).readText(path.slice(cut + 1))
}

/**
 * The main artifact in `artifacts.json` at `path` (a step output or the file itself), as `NAME@VERSION`.
 * A step that puts `other.artifact()` in its config gets the `ArtifactRef` without reading a file.
 */
export async function mainArtifact(path: string): Promise<string> {
  const file = path.endsWith(ARTIFACTS_FILE) ? path : `${path.replace(/\/+$/, '')}/${ARTIFACTS_FILE}`
  let text: string
  try {
    text = await readPathText(file)
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
