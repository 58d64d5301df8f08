/**
 * @module Glob patterns over storage listings (`*`, `**`, `?`, `{a,b}`, `[abc]`).
 * Node 20 has no `fs.glob`, and object stores need listing by prefix anyway.
 */

const GLOB_CHARS = /[*?[{]/

export function hasGlob(path: string): boolean {
  return GLOB_CHARS.test(path)
}

/** The folder part of a pattern before its first glob character, e.g. `data/in/` for `data/in/*.jsonl`. */
export function globPrefix(pattern: string): string {
  const i = pattern.search(GLOB_CHARS)
  if (i < 0) return pattern
  return pattern.slice(0, pattern.lastIndexOf('/', i) + 1)
}

/** A RegExp matching whole object paths. `*` stays within one folder; `**` crosses folders. */
export function globToRegExp(pattern: string): RegExp {
  let re = ''
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!
    if (c === '*') {
      if (pattern[i + 1] === '*') {
        i++
        if (pattern[i + 1] === '/') {
          i++
          re += '(?:.*/)?'
        } else re += '.*'
      } else re += '[^/]*'
    } else if (c === '?') re += '[^/]'
    else if (c === '{') {
      const end = pattern.indexOf('}', i)
      if (end < 0) re += '\\{'
      else {
        re += `(?:${pattern
          .slice(i + 1, end)
          .split(',')
          .map(escape)
          .join('|')})`
        i = end
      }
    } else if (c === '[') {
      const end = pattern.indexOf(']', i)
      if (end < 0) re += '\\['
      else {
        const body = pattern
          .slice(i + 1, end)
          .replace(/^!/, '^')
          .replace(/\\/g, '\\\\')
        re += `[${body}]`
        i = end
      }
    } else re += escapeRegExp(c)
  }
  return new RegExp(`^${re}$`)
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
}
