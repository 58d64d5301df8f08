/**
 * infra/ is what `kube-manifests.ts` makes, and every Kubernetes manifest in it is valid against the Kubernetes
 * OpenAPI types shipped with @kubernetes/client-node (internal/kube-schema.ts); references between them resolve.
 */
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { describe, expect, test } from 'vitest'
import { parseAllDocuments } from 'yaml'
import { checkName, checkQuantity, validateObject } from './internal/kube-schema.js'
import { infraFiles } from './kube-manifests.js'
import { KUBE_RBAC_RULES } from './kube-pod-spec.js'
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
  for (const dir of ['k8s', 'systemd']) {
    const onDisk = readdirSync(join(INFRA, dir)).map((f) => `${dir}/${f}`)
    expect(onDisk.sort()).toEqual(
      Object.keys(files)
        .filter((p) => p.startsWith(`${dir}/`))
        .sort(),
    )
  }
})

/** Problems of a unit file: syntax, sections and keys systemd does not know here, required keys, values. */
function unitProblems(text: string): string[] {
  const known: Record<string, Set<string>> = {
    Unit: new Set(['Description', 'After', 'Wants', 'Requires', 'Documentation']),
    Service: new Set([
      ...['User', 'Group', 'Environment', 'EnvironmentFile', 'WorkingDirectory', 'ExecStart', 'KillSignal'],
      ...['KillMode', 'TimeoutStopSec', 'Restart', 'RestartSec', 'StateDirectory', 'Type'],
    ]),
    Install: new Set(['WantedBy']),
  }
  const out: string[] = []
  const seen: Record<string, Record<string, string>> = {}
  let section: string | undefined
  for (const [i, line] of text.split('\n').entries()) {
    if (line === '' || line.startsWith('#')) continue
    const sec = /^\[(\w+)\]$/.exec(line)
    if (sec) {
      section = sec[1]!
      if (!known[section]) out.push(`line ${i + 1}: unknown section [${section}]`)
      seen[section] = {}
      continue
    }
    const kv = /^([A-Za-z]+)=(.*)$/.exec(line)
    if (!kv || !section) {
      out.push(`line ${i + 1}: not Key=value in a section: ${line}`)
      continue
    }
    if (!known[section]?.has(kv[1]!)) out.push(`line ${i + 1}: unknown key ${kv[1]} in [${section}]`)
    seen[section]![kv[1]!] = kv[2]!
  }
  for (const [sec, key] of [
    ['Unit', 'Description'],
    ['Service', 'ExecStart'],
    ['Service', 'User'],
    ['Service', 'Restart'],
    ['Install', 'WantedBy'],
  ] as const)
    if (seen[sec]?.[key] === undefined) out.push(`[${sec}] needs ${key}`)
  const exec = seen.Service?.ExecStart
  if (exec !== undefined && !exec.startsWith('/')) out.push(`ExecStart must start with an absolute path: ${exec}`)
  const restart = seen.Service?.Restart
  if (restart !== undefined && !['no', 'always', 'on-failure', 'on-abnormal', 'on-abort'].includes(restart))
    out.push(`Restart=${restart} is not a restart policy`)
  for (const k of ['TimeoutStopSec', 'RestartSec'])
    if (seen.Service?.[k] !== undefined && !/^\d+$/.test(seen.Service[k]!)) out.push(`${k} is not seconds`)
  return out
}

describe('the systemd units', () => {
  const units = readdirSync(join(INFRA, 'systemd')).filter((f) => f.endsWith('.service'))
  test.each(units)('%s has the keys it needs and only keys systemd knows', (f) => {
    expect(unitProblems(readFileSync(join(INFRA, 'systemd', f), 'utf8'))).toEqual([])
  })

  test('the unit check catches unknown keys, a missing ExecStart and a bad Restart', () => {
    expect(unitProblems('[Unit]\nDescription=x\n[Service]\nExecStrt=/bin/true\nUser=u\nRestart=sometimes\n')).toEqual([
      'line 4: unknown key ExecStrt in [Service]',
      '[Service] needs ExecStart',
      '[Install] needs WantedBy',
      'Restart=sometimes is not a restart policy',
    ])
  })

  // systemd's own check, where this machine has it (and the node the units start, which it checks exists).
  const analyze = spawnSync('systemd-analyze', ['--version']).status === 0 && existsSync('/usr/bin/node')
  test.skipIf(!analyze)('systemd-analyze verify accepts every unit without a warning', () => {
    const dir = mkdtempSync(join(tmpdir(), 'iris-units-'))
    for (const f of units) copyFileSync(join(INFRA, 'systemd', f), join(dir, f))
    const r = spawnSync('systemd-analyze', ['verify', ...units.map((f) => join(dir, f))], { encoding: 'utf8' })
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
  })
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
