/**
 * @module The one rule for a path inside a report site, applied to every path publishing reads
 * or writes: the site's own files, the entries of the target's manifest (which anyone with write
 * access to the target may have edited) and the run folders `runs.json` names. A path that passes
 * stays inside the target however a storage backend or an HTTP server resolves it.
 */

const MAX_PATH_CHARS = 1024

/**
 * Why `path` is not a path inside a site, or undefined when it is one: relative, `/`-separated,
 * no empty, `.` or `..` segment, no backslash, no control character, no `%` (a server may decode
 * `%2e%2e` or `%2f` after we checked), no scheme or drive (`x:`) first, and the same once
 * Unicode-normalized (a fullwidth `．．` or `／` that a server folds into `..` or `/`).
 * @example sitePathProblem('runs/e/r/../../../x.html') // 'it has a ".." segment'
 */
export function sitePathProblem(path: unknown): string | undefined {
  if (typeof path !== 'string' || path === '') return 'it is empty'
  if (path.length > MAX_PATH_CHARS) return `it is longer than ${MAX_PATH_CHARS} characters`
  return problemOf(path) ?? (path.normalize('NFKC') !== path ? problemOf(path.normalize('NFKC')) : undefined)
}

function problemOf(path: string): string | undefined {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\u0000-\u001f\u007f]/.test(path)) return 'it contains a control character'
  if (path.includes('\\')) return 'it contains a backslash'
  if (path.includes('%')) return 'it contains "%" (a server may decode it into a dot or a slash)'
  if (path.startsWith('/')) return 'it is absolute'
  const parts = path.split('/')
  if (parts[0]!.includes(':')) return 'it starts with a scheme or drive ("x:")'
  if (parts.includes('')) return 'it has an empty segment ("//" or a trailing "/")'
  if (parts.includes('..')) return 'it has a ".." segment'
  if (parts.includes('.')) return 'it has a "." segment'
  return undefined
}

/** Whether `name` can be one segment of a site path (an experiment name or a run id in `runs/<e>/<r>/`). */
export function isSiteSegment(name: unknown): name is string {
  return typeof name === 'string' && !name.includes('/') && sitePathProblem(name) === undefined
}
