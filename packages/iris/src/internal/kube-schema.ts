/**
 * @module Test support: checks a Kubernetes object against the OpenAPI types that `@kubernetes/client-node`
 * 1.4.0 ships (generated from the Kubernetes v1.34 OpenAPI spec): every field must exist in its type (a typo is an
 * error, as with `kubectl apply --validate=strict`), have the type's JSON type, and every field the spec requires
 * must be there (required-ness is read from the generated `.d.ts`, where optional fields carry `?`). Not checked:
 * formats beyond integers (quantities and names are checked by `checkQuantity` and `checkName`), enums, and
 * cross-field rules the API server applies.
 */
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as k8s from '@kubernetes/client-node'

type Attr = { name: string; baseName: string; type: string; format: string }
type Model = { attributeTypeMap: Attr[] }

const MODELS_DIR = join(dirname(fileURLToPath(import.meta.resolve('@kubernetes/client-node'))), 'gen', 'models')
const requiredCache = new Map<string, Set<string>>()

/** Fields the generated type declares without `?`. */
function requiredOf(model: string): Set<string> {
  let r = requiredCache.get(model)
  if (!r) {
    const dts = readFileSync(join(MODELS_DIR, `${model}.d.ts`), 'utf8')
    r = new Set([...dts.matchAll(/^ {4}'([A-Za-z0-9_$]+)': /gm)].map((m) => m[1]!))
    requiredCache.set(model, r)
  }
  return r
}

/** The model of `apiVersion` + `kind`: `apps/v1` Deployment → `V1Deployment`. */
export function modelFor(apiVersion: string, kind: string): string {
  const version = apiVersion.split('/').pop()!
  const name = `${version[0]!.toUpperCase()}${version.slice(1)}${kind}`
  if (!((k8s as unknown as Record<string, unknown>)[name] as Model | undefined)?.attributeTypeMap)
    throw new Error(`no OpenAPI type for ${apiVersion} ${kind}`)
  return name
}

/** Problems with `obj` as a Kubernetes object (empty when it is valid). */
export function validateObject(obj: { apiVersion?: unknown; kind?: unknown }): string[] {
  if (typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string') return ['apiVersion and kind are required']
  const errs: string[] = []
  check(obj, modelFor(obj.apiVersion, obj.kind), obj.kind, errs)
  return errs
}

function check(v: unknown, type: string, path: string, errs: string[], format = ''): void {
  const fail = (what: string) => errs.push(`${path}: ${what}, got ${JSON.stringify(v)?.slice(0, 80)}`)
  if (v === null || v === undefined) return void fail(`expected ${type}`)
  const arr = /^Array<(.+)>$/.exec(type)
  if (arr) {
    if (!Array.isArray(v)) return void fail('expected an array')
    v.forEach((x, i) => check(x, arr[1]!, `${path}[${i}]`, errs))
    return
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type)
  if (map) {
    if (typeof v !== 'object' || Array.isArray(v)) return void fail('expected an object')
    for (const [k, x] of Object.entries(v)) check(x, map[1]!, `${path}.${k}`, errs)
    return
  }
  switch (type) {
    case 'string':
      if (typeof v !== 'string') fail('expected a string')
      return
    case 'number':
      if (typeof v !== 'number' || ((format === 'int32' || format === 'int64') && !Number.isInteger(v)))
        fail(`expected a number${format ? ` (${format})` : ''}`)
      return
    case 'boolean':
      if (typeof v !== 'boolean') fail('expected a boolean')
      return
    case 'Date':
      if (typeof v !== 'string' || Number.isNaN(Date.parse(v))) fail('expected a date-time string')
      return
    case 'IntOrString':
      if (typeof v !== 'string' && !Number.isInteger(v)) fail('expected an integer or a string')
      return
    case 'any':
    case 'object':
      return
  }
  const model = (k8s as unknown as Record<string, Model | undefined>)[type]
  if (!model?.attributeTypeMap) return void errs.push(`${path}: unknown OpenAPI type ${type}`)
  if (typeof v !== 'object' || Array.isArray(v)) return void fail(`expected a ${type} object`)
  const attrs = new Map(model.attributeTypeMap.map((a) => [a.baseName, a]))
  for (const [k, x] of Object.entries(v)) {
    const a = attrs.get(k)
    if (!a) errs.push(`${path}.${k}: no such field in ${type}`)
    else check(x, a.type, `${path}.${k}`, errs, a.format)
  }
  for (const req of requiredOf(type)) {
    const a = model.attributeTypeMap.find((x) => x.name === req)
    if (a && !(a.baseName in v)) errs.push(`${path}.${a.baseName}: required by ${type}`)
  }
}

/** A Kubernetes resource quantity (`500m`, `4`, `16Gi`, `1e3`). */
export function checkQuantity(q: string): boolean {
  return /^[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?\d+)?$/.test(q)
}

/** A DNS-1123 name, as most object names must be. */
export function checkName(n: string): boolean {
  return n.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(n)
}
