/**
 * @module Provenance: what produced a result (code version, machine, runtime, time), as a
 * plain object to store beside outputs so a run can be traced and repeated.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { hostname, userInfo } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import pkg from '../package.json' with { type: 'json' }

/** Where and from what a result was made. Plain data: JSON-serializable as is. */
export type Provenance = {
  /** `HEAD` commit, or `null` outside a git work tree (or before the first commit, or without git). */
  readonly gitSha: string | null
  /** Whether tracked files differ from `HEAD`; `null` outside a git work tree. Untracked files do not count. */
  readonly gitDirty: boolean | null
  readonly host: string
  /** The user name, or `null` when the system has none for this uid. */
  readonly user: string | null
  /** `process.version`, e.g. `v20.19.0`. */
  readonly node: string
  readonly platform: string
  readonly arch: string
  /** Versions of the installed `@marin/*` packages, by name. */
  readonly packages: Readonly<Record<string, string>>
  /** When this record was made, ISO 8601 in UTC. */
  readonly timestamp: string
}

export type ProvenanceOptions = {
  /** The directory whose git state is recorded and where package lookup starts. @default process.cwd() */
  cwd?: string
  /** The package scope whose versions are listed. @default '@marin' */
  scope?: string
}

function git(cwd: string, args: string[]): string | null {
  try {
    return execFileSync('git', args, {
      cwd,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10_000,
    }).trim()
  } catch {
    return null // not a repository, no commit yet, or no git on this machine
  }
}

function currentUser(): string | null {
  try {
    return userInfo().username
  } catch {
    // Containers often run a uid with no passwd entry.
    return process.env.USER || process.env.LOGNAME || null
  }
}

/**
 * Versions of the `scope` packages: rigging's own, then those found in `node_modules/<scope>`
 * from `cwd` upward (the nearest copy of a package wins, as in Node's resolution).
 */
export function scopedPackageVersions(cwd: string, scope = '@marin'): Record<string, string> {
  const found: Record<string, string> = {}
  if (pkg.name.startsWith(`${scope}/`)) found[pkg.name] = pkg.version
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    const scopeDir = join(dir, 'node_modules', scope)
    if (existsSync(scopeDir)) {
      for (const entry of readdirSync(scopeDir)) {
        const name = `${scope}/${entry}`
        if (Object.hasOwn(found, name)) continue
        try {
          const version = (
            JSON.parse(readFileSync(join(scopeDir, entry, 'package.json'), 'utf8')) as { version?: unknown }
          ).version
          if (typeof version === 'string') found[name] = version
        } catch {
          // A broken or partial install is not ours to judge here; leave it out.
        }
      }
    }
    if (dirname(dir) === dir) break
  }
  return Object.fromEntries(Object.entries(found).sort(([a], [b]) => (a < b ? -1 : 1)))
}

/**
 * A provenance record of this process now.
 * @example
 * writeFileSync(join(out, 'provenance.json'), JSON.stringify(provenance(), null, 2))
 */
export function provenance(opts: ProvenanceOptions = {}): Provenance {
  const cwd = opts.cwd ?? process.cwd()
  const inWorkTree = git(cwd, ['rev-parse', '--is-inside-work-tree']) === 'true'
  const sha = inWorkTree ? git(cwd, ['rev-parse', '--verify', '--quiet', 'HEAD']) : null
  const status = inWorkTree ? git(cwd, ['status', '--porcelain', '--untracked-files=no']) : null
  return {
    gitSha: sha === '' ? null : sha,
    gitDirty: status === null ? null : status !== '',
    host: hostname(),
    user: currentUser(),
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    packages: scopedPackageVersions(cwd, opts.scope),
    timestamp: new Date().toISOString(),
  }
}
