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

// Control characters in a file name reach the terminals and logs that list a version's files.
const CONTROL = /\p{Cc}/u
// `files` is a plain JSON object: this key would set the object's prototype instead of naming a file.
const PROTO_KEY = '__proto__'

/** Why `path` is not a valid file path of a version, or `undefined` when it is. */
function filePathProblem(path: string): string | undefined {
  if (path.length === 0) return 'it is empty'
  if (path.length > 1024) return `it is ${path.length} characters long (at most 1024)`
  if (path.startsWith('/')) return 'it is absolute'
  if (path.includes('\\')) return 'it contains "\\"'
  if (CONTROL.test(path)) return 'it contains a control character'
  if (path === PROTO_KEY) return `"${PROTO_KEY}" is reserved`
  const bad = path.split('/').find((s) => s === '' || s === '.' || s === '..')
  if (bad === undefined) return undefined
  return bad === '' ? 'it has an empty segment' : `it has a "${bad}" segment`
}

/**
 * Throws `INVALID_PATH` unless `path` is relative, `/`-separated, without empty, `.` or `..` segments, backslashes
 * or control characters. The one rule for file paths: applied when a file is staged and to every path a manifest
 * holds when it is read (`parseManifest`), so a path read back can always be joined to a folder.
 */
export function checkFilePath(path: string): string {
  const problem = filePathProblem(path)
  if (problem !== undefined) {
    throw new FinestoreError(
      'INVALID_PATH',
      `file path ${JSON.stringify(path)} is invalid (${problem}): use a relative "/"-separated ` +
        `path without "", "." or ".." segments (e.g. "shards/part-0.jsonl")`,
    )
  }
  return path
}

/**
 * Throws `INVALID_PATH` when the files of one version cannot all be written to a folder: two paths that name the
 * same file where case or Unicode form is not told apart (macOS, Windows), or a file that is also a folder of
 * another (`a` and `a/b`). Checked at commit and before a version is written out (`view.materialize`); `owner`
 * (an artifact or `name@version`) opens the message.
 */
export function checkFileSet(paths: Iterable<string>, owner: string): void {
  const byKey = new Map<string, string>()
  const all: string[] = []
  for (const p of paths) {
    try {
      checkFilePath(p)
    } catch (err) {
      throw new FinestoreError('INVALID_PATH', `${owner}: ${(err as Error).message}`, false, { cause: err })
    }
    const key = foldPath(p)
    const other = byKey.get(key)
    if (other !== undefined) {
      throw new FinestoreError(
        'INVALID_PATH',
        `${owner}: files ${JSON.stringify(other)} and ${JSON.stringify(p)} differ only in case or Unicode form, ` +
          'so they are one file on macOS and Windows; keep only one of them',
      )
    }
    byKey.set(key, p)
    all.push(p)
  }
  for (const p of all) {
    const segments = foldPath(p).split('/')
    for (let i = 1; i < segments.length; i++) {
      const file = byKey.get(segments.slice(0, i).join('/'))
      if (file === undefined) continue
      throw new FinestoreError(
        'INVALID_PATH',
        `${owner}: ${JSON.stringify(file)} is a file and also a folder of ${JSON.stringify(p)}, ` +
          'so they cannot both be written to a folder; rename or remove one of them',
      )
    }
  }
}

// What file systems that ignore case and Unicode form (APFS, HFS+, NTFS) see as the same name.
const foldPath = (path: string): string => path.normalize('NFC').toLowerCase()

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
