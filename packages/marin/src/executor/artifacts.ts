/**
 * @module Artifact references between steps. A step that commits finestore versions lists them,
 * main one first, in `artifacts.json` in its output; a dependent step puts `other.artifact()` in
 * its config and its function receives an `ArtifactRef` (`{ kind: 'artifact', name, version }`),
 * read from that file just before it runs, so a skipped step still hands its version on.
 * `artifacts.json` holds the references in that form; the forms older step folders hold
 * (`"datasets/brown@2"`, `{ artifact, version }`) are read too.
 */
import type { Storage } from '@marin/rigging'
import { MarinError } from '../errors.js'

/** A committed finestore version: `name` is the artifact (`datasets/brown`, `models/gpt-brown`). */
export type ArtifactRef = { readonly kind: 'artifact'; readonly name: string; readonly version: number }

/** What `artifacts.json` holds: the references (main one first) and whatever else the step records. */
export type StepArtifacts = { readonly artifacts: readonly ArtifactRef[]; readonly [key: string]: unknown }

export const ARTIFACTS_FILE = 'artifacts.json'

/** A reference to version `version` of the artifact `name`. */
export function artifactRef(name: string, version: number): ArtifactRef {
  if (typeof name !== 'string' || name === '' || name.includes('@'))
    throw new MarinError(
      'BAD_CONFIG',
      `artifact name ${JSON.stringify(name)} is invalid; give a finestore artifact name such as "datasets/brown"`,
    )
  if (!Number.isInteger(version) || version < 1)
    throw new MarinError(
      'BAD_CONFIG',
      `artifact ${name}: version must be a whole number >= 1, got ${JSON.stringify(version)}`,
    )
  return { kind: 'artifact', name, version }
}

export function isArtifactRef(x: unknown): x is ArtifactRef {
  const r = x as ArtifactRef
  return (
    typeof x === 'object' &&
    x !== null &&
    r.kind === 'artifact' &&
    typeof r.name === 'string' &&
    Number.isInteger(r.version)
  )
}

/** `datasets/brown@3`, the way finestore and the CLIs print a version. */
export const formatArtifactRef = (ref: ArtifactRef): string => `${ref.name}@${ref.version}`

/** Parses `NAME@VERSION` (`datasets/brown@3`). */
export function parseArtifactRef(text: string): ArtifactRef {
  const at = text.lastIndexOf('@')
  const version = at > 0 && /^[1-9][0-9]*$/.test(text.slice(at + 1)) ? Number(text.slice(at + 1)) : undefined
  if (version === undefined)
    throw new MarinError('BAD_CONFIG', `"${text}" is not NAME@VERSION (e.g. "datasets/brown@3")`)
  return artifactRef(text.slice(0, at), version)
}

/** One entry of an `artifacts.json` list, in any of the forms written over time. */
function entryOf(e: unknown): ArtifactRef | undefined {
  if (isArtifactRef(e)) return artifactRef(e.name, e.version)
  if (typeof e === 'string') return parseArtifactRef(e)
  const o = e as { artifact?: unknown; version?: unknown }
  if (typeof o === 'object' && o !== null && typeof o.artifact === 'string' && typeof o.version === 'number')
    return artifactRef(o.artifact, o.version)
  return undefined
}

/** Parses the text of an `artifacts.json` (`file` names it in errors). */
export function parseStepArtifacts(text: string, file: string): StepArtifacts {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    throw new MarinError(
      'STEP_FAILED',
      `${file}: not JSON (${(err as Error).message}); run the step that wrote it again with --force`,
      { cause: err },
    )
  }
  const rest = Array.isArray(parsed) ? {} : ((parsed ?? {}) as Record<string, unknown>)
  const list = Array.isArray(parsed) ? parsed : rest.artifacts
  if (!Array.isArray(list) || list.length === 0)
    throw new MarinError('STEP_FAILED', `${file}: lists no artifacts; run the step that wrote it again with --force`)
  const artifacts = list.map((e: unknown, i) => {
    let ref: ArtifactRef | undefined
    try {
      ref = entryOf(e)
    } catch {
      ref = undefined
    }
    if (!ref)
      throw new MarinError(
        'STEP_FAILED',
        `${file}: entry ${i} (${JSON.stringify(e)}) is not an artifact ` +
          `reference ({ kind: 'artifact', name, version } or ` +
          `"NAME@VERSION")`,
      )
    return ref
  })
  return { ...rest, artifacts }
}

/** The text of an `artifacts.json`: references in the typed form, main one first. */
export function formatStepArtifacts(artifacts: {
  readonly artifacts: readonly (ArtifactRef | string)[]
  readonly [key: string]: unknown
}): string {
  const refs = artifacts.artifacts.map((a) =>
    typeof a === 'string' ? parseArtifactRef(a) : artifactRef(a.name, a.version),
  )
  return `${JSON.stringify({ ...artifacts, artifacts: refs }, null, 2)}\n`
}

/** Reads `<nameHash>/artifacts.json` of the step `stepName` from the prefix's storage. */
export async function readStepArtifacts(storage: Storage, nameHash: string, stepName: string): Promise<StepArtifacts> {
  const file = `${nameHash}/${ARTIFACTS_FILE}`
  let text: string
  try {
    text = await storage.readText(file)
  } catch (err) {
    throw new MarinError(
      'STEP_FAILED',
      `${file}: cannot read the artifacts of step "${stepName}" (` +
        `${(err as Error).message}); run that step again with --force`,
      { cause: err },
    )
  }
  return parseStepArtifacts(text, file)
}

const PENDING = Symbol.for('marin.pendingArtifact')

/** In a planned config: the artifact of a dependency, read when the step starts (`readArtifactInputs`). */
export class PendingArtifact {
  readonly [PENDING] = true
  constructor(
    readonly stepName: string,
    readonly nameHash: string,
    readonly index: number,
    /** The path of the dependency's `artifacts.json`, as records and `.executor_info` show it. */
    readonly path: string,
  ) {}
  toJSON(): string {
    return this.path
  }
}

const isPending = (x: unknown): x is PendingArtifact =>
  typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[PENDING] === true

/** The config with every pending artifact replaced by its `ArtifactRef`, read from the dependency's `artifacts.json`.
 * */
export async function readArtifactInputs(config: unknown, storage: Storage): Promise<unknown> {
  const walk = async (v: unknown): Promise<unknown> => {
    if (isPending(v)) {
      const { artifacts } = await readStepArtifacts(storage, v.nameHash, v.stepName)
      const ref = artifacts[v.index]
      if (!ref)
        throw new MarinError(
          'STEP_FAILED',
          `${v.nameHash}/${ARTIFACTS_FILE} lists ${artifacts.length} ` +
            `artifacts, so artifact(${v.index}) of step "${v.stepName}" does not exist`,
        )
      return ref
    }
    if (Array.isArray(v)) return Promise.all(v.map(walk))
    if (typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype) {
      return Object.fromEntries(await Promise.all(Object.entries(v).map(async ([k, x]) => [k, await walk(x)])))
    }
    return v
  }
  return walk(config)
}
