/** @module Artifact names, file paths inside a version, tags, and `ARTIFACT[@VERSION|@TAG]` references. */
import { FinestoreError } from './errors.js'

const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/
// These names hold an artifact's own objects, so an artifact path segment may not use them.
const RESERVED_SEGMENTS = new Set(['HEAD', 'versions', 'tags'])
const TAG = /^[A-Za-z][A-Za-z0-9._-]*$/

/** The tag that always means the artifact's HEAD. */
export const LATEST = 'latest'

/** Throws `INVALID_NAME` unless `name` is like `datasets/brown` (segments of letters, digits, `._-`). */
export function checkArtifactName(name: string): string {
  const segments = name.split('/')
  const bad = segments.find((s) => !SEGMENT.test(s) || RESERVED_SEGMENTS.has(s))
  if (name.length === 0 || name.length > 512 || bad !== undefined) {
    throw new FinestoreError(
      'INVALID_NAME',
      `artifact name "${name}" is invalid: use "/"-separated segments of letters, digits, ".", "_" or "-" ` +
        `that start with a letter or digit and are not HEAD, versions or tags (e.g. "datasets/brown")`,
    )
  }
  return name
}

/** Throws `INVALID_NAME` unless `tag` is a letter followed by letters, digits, `._-`. */
export function checkTagName(tag: string): string {
  if (!TAG.test(tag) || tag.length > 128) {
    throw new FinestoreError(
      'INVALID_NAME',
      `tag "${tag}" is invalid: start with a letter, then letters, digits, ".", "_" or "-" (e.g. "best")`,
    )
  }
  return tag
}

/** Throws `INVALID_PATH` unless `path` is relative, `/`-separated, without empty, `.` or `..` segments. */
export function checkFilePath(path: string): string {
  const segments = path.split('/')
  if (
    path.length === 0 ||
    path.length > 1024 ||
    path.includes('\\') ||
    path.includes('\0') ||
    segments.some((s) => s === '' || s === '.' || s === '..')
  ) {
    throw new FinestoreError(
      'INVALID_PATH',
      `file path "${path}" is invalid: use a relative "/"-separated ` +
        `path without "", "." or ".." segments (e.g. ` +
        `"shards/part-0.jsonl")`,
    )
  }
  return path
}

/** A parsed `ARTIFACT[@VERSION|@TAG]`. No selector means HEAD. */
export type ArtifactRef = {
  readonly artifact: string
  /** A version number, a tag name, or `undefined` for HEAD (same as the tag `latest`). */
  readonly selector?: number | string
}

/**
 * Parses `datasets/brown`, `datasets/brown@3` or `datasets/brown@best`.
 * @example parseRef('datasets/brown@3') // { artifact: 'datasets/brown', selector: 3 }
 */
export function parseRef(ref: string): ArtifactRef {
  const at = ref.lastIndexOf('@')
  const artifact = at < 0 ? ref : ref.slice(0, at)
  const sel = at < 0 ? undefined : ref.slice(at + 1)
  try {
    checkArtifactName(artifact)
  } catch (err) {
    throw new FinestoreError('INVALID_REF', `reference "${ref}" is invalid: ${(err as Error).message}`)
  }
  if (sel === undefined || sel === LATEST) return { artifact }
  if (/^[1-9][0-9]*$/.test(sel)) return { artifact, selector: Number(sel) }
  if (TAG.test(sel)) return { artifact, selector: sel }
  throw new FinestoreError(
    'INVALID_REF',
    `reference "${ref}" is invalid: after "@" put a version number (1, 2, …) or a tag name (e.g. "${artifact}@3")`,
  )
}

/** `name@version`, the canonical way to print a version. */
export const formatRef = (artifact: string, version: number): string => `${artifact}@${version}`
