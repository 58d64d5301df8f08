/**
 * infra/ is what `kube-manifests.ts` makes, and every Kubernetes manifest in it is valid against the Kubernetes
 * OpenAPI types shipped with @kubernetes/client-node (internal/kube-schema.ts); references between them resolve.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { describe, expect, test } from 'vitest'
import { parseAllDocuments } from 'yaml'
import { checkName, checkQuantity, validateObject } from './internal/kube-schema.js'
import { infraFiles } from './kube-manifests.js'
import { KUBE_RBAC_RULES } from './kube-pods.js'
import { PRIORITIES } from './states.js'

const INFRA = resolve(import.meta.dirname, '..', '..', '..', 'infra')
type Doc = { apiVersion: string; kind: string; metadata: { name: string }; [k: string]: unknown }
const docs: { file: string; doc: Doc }[] = readdirSync(join(INFRA, 'k8s'))
  .filter((f) => f.endsWith('.yaml'))
  .flatMap((f) =>
    parseAllDocuments(readFileSync(join(INFRA, 'k8s', f), 'utf8')).map((d) => ({ file: f, doc: d.toJS() as Doc })),
  )
const walk = (v: unknown, visit: (k: string, v: unknown) => void): void => {
  if (Array.isArray(v)) v.forEach((x) => walk(x, visit))
  else if (v && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) {
      visit(k, x)
      walk(x, visit)
    }
}

test('infra/ is what kube-manifests.ts generates (run: pnpm exec tsx infra/generate.ts)', () => {
  const files = infraFiles()
  for (const [path, text] of Object.entries(files)) expect(readFileSync(join(INFRA, path), 'utf8'), path).toBe(text)
  const k8s = readdirSync(join(INFRA, 'k8s')).map((f) => `k8s/${f}`)
  expect(k8s.sort()).toEqual(
    Object.keys(files)
      .filter((p) => p.startsWith('k8s/'))
      .sort(),
  )
})

describe('every manifest validates against the Kubernetes OpenAPI types', () => {
  test.each(docs.map((d) => [`${d.file} ${d.doc.kind}/${d.doc.metadata?.name}`, d.doc] as const))('%s', (_n, doc) => {
    expect(validateObject(doc)).toEqual([])
    expect(checkName(doc.metadata.name), doc.metadata.name).toBe(true)
    walk(doc, (k, v) => {
      if ((k === 'requests' || k === 'limits') && v && typeof v === 'object')
        for (const q of Object.values(v)) expect(checkQuantity(String(q)), `quantity ${q}`).toBe(true)
    })
  })
})

test('the validator catches unknown fields, missing required fields and wrong types', () => {
  const pod = (spec: unknown) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec })
  expect(validateObject(pod({ containers: [{ name: 'c', image: 'i' }] }))).toEqual([])
  expect(validateObject(pod({ containers: [{ name: 'c', imagee: 'i' }] }))).toEqual([
    'Pod.spec.containers[0].imagee: no such field in V1Container',
  ])
  expect(validateObject(pod({ containers: [{ image: 'i' }] }))).toEqual([
    'Pod.spec.containers[0].name: required by V1Container',
  ])
  expect(validateObject(pod({ containers: [{ name: 'c', ports: [{ containerPort: '80' }] }] }))[0]).toMatch(
    /containerPort: expected a number/,
  )
  expect(validateObject(pod({ containers: {} }))[0]).toMatch(/containers: expected an array/)
  expect(() => validateObject({ apiVersion: 'v9', kind: 'Pod' })).toThrow(/no OpenAPI type/)
  expect(checkQuantity('500m') && checkQuantity('16Gi') && !checkQuantity('16 GB')).toBe(true)
})

test('references resolve (claims, secrets, accounts, PriorityClasses); RBAC is what the platform calls', () => {
  const named = (kind: string) => new Set(docs.filter((d) => d.doc.kind === kind).map((d) => d.doc.metadata.name))
  const claims = named('PersistentVolumeClaim')
  walk(
    docs.map((d) => d.doc),
    (k, v) => {
      if (k === 'claimName') expect(claims.has(v as string), `PVC ${v}`).toBe(true)
      if (k === 'serviceAccountName') expect(named('ServiceAccount').has(v as string), `ServiceAccount ${v}`).toBe(true)
      // The one Secret made by hand (OPS.md says how).
      if (k === 'secretName') expect(v).toBe('iris-token')
    },
  )
  const classes = named('PriorityClass')
  for (const p of PRIORITIES) expect(classes.has(`iris-${p}`), p).toBe(true)
  const role = docs.find((d) => d.doc.kind === 'Role')!.doc as unknown as { rules: unknown }
  expect(role.rules).toEqual(KUBE_RBAC_RULES)
  // Every --volume the controller gives task Pods is a claim defined here.
  const ctrl = JSON.stringify(
    docs.find((d) => d.doc.kind === 'Deployment' && d.doc.metadata.name === 'iris-controller')!.doc,
  )
  for (const m of ctrl.matchAll(/"--volume","([a-z0-9-]+):/g)) expect(claims.has(m[1]!), m[1]).toBe(true)
  // GPU workers ask Kubernetes for the GPUs they offer to iris.
  const gpu = JSON.stringify(docs.find((d) => d.doc.metadata.name === 'iris-worker-gpu')!.doc)
  expect(gpu).toContain('"nvidia.com/gpu":"1"')
  expect(gpu).toContain('gpu=1')
})

test('the Dockerfile installs pnpm with npm, is multi-stage, and ignores what must not be copied', () => {
  const df = readFileSync(join(INFRA, 'Dockerfile'), 'utf8')
  expect(df).not.toMatch(/corepack/)
  expect(df).toMatch(/^RUN npm install -g pnpm@\d+\.\d+\.\d+$/m)
  expect(df.match(/^FROM /gm)!.length).toBeGreaterThanOrEqual(3)
  expect(df).toMatch(/^FROM nvidia\/cuda:\S+ AS gpu$/m)
  expect(df).toMatch(/libvulkan1/)
  const ignore = readFileSync(join(INFRA, 'Dockerfile.dockerignore'), 'utf8').split('\n')
  for (const p of ['**/node_modules', '**/.marin', 'site', '.git']) expect(ignore).toContain(p)
})
