/**
 * @module Step versions. The version of a step is the sha256 of the canonical
 * JSON of `{ name, config: <versioned fields only>, dependencies: [<name_hash>...] }`.
 * Nothing else goes in: not the prefix, not the machine, not key order, not
 * unversioned fields. The output folder is `<name>_<hash8>`.
 */
import { stepDirName } from '@marin/rigging'
import { canonicalJson, sha256 } from './canonical-json.js'
import { dependenciesOf, isConfigLike } from './graph.js'
import { PendingArtifact } from './artifacts.js'
import { isArtifactInput, isOutputRef, type Step } from './step.js'
import { isVersioned } from './versioned.js'

/** Everything that went into a step's version. */
export type StepVersion = {
  readonly name: string
  /** Full sha256 hex. */
  readonly hash: string
  /** `<name>_<hash8>`: the output folder under the prefix. */
  readonly nameHash: string
  /** The versioned part of the config, as hashed. */
  readonly config: unknown
  /** Versioned fields flattened to `path → canonical JSON`, for `explain`. */
  readonly fields: Readonly<Record<string, string>>
  /** `name_hash` of each dependency, sorted. */
  readonly dependencies: readonly string[]
}

const DROP = Symbol('drop')

/** The versioned part of a config: versioned values, dependency references, and the structure leading to them. */
function versionedPart(v: unknown, inVersioned: boolean, depName: (s: Step) => string): unknown {
  if (isOutputRef(v)) return { $output: depName(v.step) + (v.subPath ? `/${v.subPath}` : '') }
  if (isVersioned(v)) return versionedPart(v.value, true, depName)
  if (isConfigLike(v)) return versionedPart(v.values, true, depName)
  if (Array.isArray(v)) {
    const items = v.map((x) => versionedPart(x, inVersioned, depName))
    if (inVersioned) return items.map((x) => (x === DROP ? null : x))
    return items.some((x) => x !== DROP) ? items.map((x) => (x === DROP ? null : x)) : DROP
  }
  if (typeof v === 'object' && v !== null && !(v instanceof Date)) {
    const out: Record<string, unknown> = {}
    for (const [k, x] of Object.entries(v)) {
      const r = versionedPart(x, inVersioned, depName)
      if (r !== DROP) out[k] = r
    }
    return inVersioned || Object.keys(out).length > 0 ? out : DROP
  }
  return inVersioned ? v : DROP
}

function flatten(v: unknown, path: string, out: Record<string, string>): void {
  if (typeof v === 'object' && v !== null && !Array.isArray(v) && !('$output' in v && Object.keys(v).length === 1)) {
    const keys = Object.keys(v)
    if (keys.length === 0 && path) out[path] = '{}'
    for (const k of keys.sort()) flatten((v as Record<string, unknown>)[k], path ? `${path}.${k}` : k, out)
    return
  }
  out[path || '(config)'] = canonicalJson(v, path || 'config')
}

/** Versions of `steps`, which must be in dependency order (see `topoSort`). */
export function computeVersions(steps: readonly Step[]): Map<Step, StepVersion> {
  const versions = new Map<Step, StepVersion>()
  const depName = (s: Step) => {
    const v = versions.get(s)
    if (!v) throw new Error(`internal: step "${s.name}" versioned before its dependency`)
    return v.nameHash
  }
  for (const s of steps) {
    const part = versionedPart(s.config, false, depName)
    const config = part === DROP ? {} : part
    const dependencies = [...new Set(dependenciesOf(s.config).map(depName))].sort()
    const hash = sha256(canonicalJson({ name: s.name, config, dependencies }, `step "${s.name}" config`))
    const fields: Record<string, string> = {}
    flatten(config, '', fields)
    versions.set(s, {
      name: s.name,
      hash,
      nameHash: stepDirName(s.name, hash.slice(0, 8)),
      config,
      fields,
      dependencies,
    })
  }
  return versions
}

/** The config the step function receives: versioned values unwrapped, references replaced by `pathOf(nameHash,
 * subPath)`, artifact inputs by a `PendingArtifact` (read when the step starts). */
export function resolveConfig(
  config: unknown,
  versions: Map<Step, StepVersion>,
  pathOf: (nameHash: string, subPath: string) => string,
): unknown {
  const walk = (v: unknown): unknown => {
    if (isArtifactInput(v)) {
      const nameHash = versions.get(v.step)!.nameHash
      return new PendingArtifact(v.step.name, nameHash, v.artifactIndex, pathOf(nameHash, v.subPath))
    }
    if (isOutputRef(v)) return pathOf(versions.get(v.step)!.nameHash, v.subPath)
    if (isVersioned(v)) return walk(v.value)
    if (isConfigLike(v)) return walk(v.values)
    if (Array.isArray(v)) return v.map(walk)
    if (typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype) {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]))
    }
    return v
  }
  return walk(config)
}
