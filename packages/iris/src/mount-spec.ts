/** @module `--mount ARTIFACT[@VERSION]:path`: parse and check where a mount may land. */
import { isAbsolute, normalize } from 'node:path'
import { IrisError } from './errors.js'

/** A finestore artifact version to materialize read-only at `path` inside the task's directory. */
export type Mount = { artifact: string; version?: string; path: string }

/**
 * Parses `ARTIFACT[@VERSION]:path`. The path is relative to the task's directory and may not leave it.
 * @example parseMount('tokenized/fineweb@v3:data') // { artifact: 'tokenized/fineweb', version: 'v3', path: 'data' }
 */
export function parseMount(text: string): Mount {
  const colon = text.lastIndexOf(':')
  if (colon <= 0 || colon === text.length - 1) {
    throw new IrisError('BAD_MOUNT', `mount "${text}": expected ARTIFACT[@VERSION]:path, e.g. my-dataset@3:data`)
  }
  const ref = text.slice(0, colon)
  const path = text.slice(colon + 1)
  const at = ref.lastIndexOf('@')
  const artifact = at > 0 ? ref.slice(0, at) : ref
  const version = at > 0 ? ref.slice(at + 1) : undefined
  if (artifact === '' || version === '') {
    throw new IrisError(
      'BAD_MOUNT',
      `mount "${text}": artifact name or version is empty; expected ARTIFACT[@VERSION]:path`,
    )
  }
  checkMountPath(path, text)
  return version === undefined ? { artifact, path } : { artifact, version, path }
}

/** Refuses absolute paths and paths that climb out of the task directory. */
export function checkMountPath(path: string, context = path): string {
  const n = normalize(path)
  if (isAbsolute(path) || n === '..' || n.startsWith('../') || n === '.') {
    throw new IrisError(
      'BAD_MOUNT',
      `mount "${context}": path "${path}" must be a relative path ` +
        `inside the task directory, e.g. data or inputs/ckpt`,
    )
  }
  return n
}
