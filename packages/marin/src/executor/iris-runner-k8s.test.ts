/**
 * Steps as Pods: `runExperiment(…, { kubernetes })` (`marin run --platform k8s --namespace NS`) starts a cluster
 * whose tasks are Kubernetes Pods, here against the loopback Kubernetes API of `@marin/iris/kube-testing`, whose
 * kubelet runs each Pod's command on this machine. A step becomes a Pod whose spec matches its job request; its
 * output, result and log come back.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FakeKubeApi } from '@marin/iris/kube-testing'
import { expect, test } from 'vitest'
import { script } from '../fixtures/processes.js'
import { loadExperiment } from './load-script.js'
import { runExperiment } from './run-experiment.js'

test('a marin step runs as a Pod with the k8s platform; its output, result and log come back', async () => {
  const root = mkdtempSync(join(tmpdir(), 'marin-k8s-'))
  const api = await FakeKubeApi.start()
  const counter = join(root, 'count')
  // The image's environment: PATH, and the fixture's counter file.
  const kubelet = api.startKubelet({
    namespace: 'marin',
    root,
    baseEnv: { PATH: process.env.PATH!, FIX_COUNTER: counter, LOG_LEVEL: 'info' },
  })
  writeFileSync(join(root, 'kubeconfig'), api.kubeConfigYaml('marin'), { mode: 0o600 })
  const prefix = join(root, 'prefix')
  const saved = { ...process.env }
  Object.assign(process.env, { MARIN_PREFIX: prefix, LOG_LEVEL: 'warn' })
  try {
    const experiment = await loadExperiment(script)
    const record = await runExperiment(experiment, {
      prefix,
      runOnly: /^ingest$/,
      out: () => {},
      kubernetes: { namespace: 'marin', kubeconfig: join(root, 'kubeconfig') },
    })
    expect(record.status).toBe('SUCCESS')
    expect(record.steps.find((s) => s.name === 'ingest')!.status).toBe('SUCCESS')
    // The step ran once, in the Pod's process (not in this one, not in a warm runner).
    const rows = readFileSync(counter, 'utf8').trim().split('\n')
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatch(/^ingest \d+$/)
    expect(rows[0]).not.toBe(`ingest ${process.pid}`)
    const step = readdirSync(prefix).find((d) => d.startsWith('ingest_'))!
    expect(readFileSync(join(prefix, step, 'docs.txt'), 'utf8')).toBe('tiny 1\nhello world\n')
    const jobLog = readdirSync(join(prefix, step, 'logs')).find((f) => f.endsWith('.job.log'))!
    expect(readFileSync(join(prefix, step, 'logs', jobLog), 'utf8')).toMatch(/ingested/)
    const [pod] = api.pods('marin')
    const c = pod!.spec!.containers[0]!
    expect(c.args!.slice(0, 2)).toEqual([process.execPath, '--import'])
    expect(c.args![3]).toMatch(/step-main\.ts$/)
    expect(c.args!.slice(4, 6)).toEqual([script, 'ingest'])
    expect(c.resources).toEqual({
      requests: { cpu: '1', memory: '1000000000' },
      limits: { cpu: '1', memory: '1000000000' },
    })
    expect(c.env).toContainEqual({ name: 'MARIN_STEP_CHILD', value: '1' })
    expect(kubelet.started).toEqual([pod!.metadata!.name])
    // The run's cluster keeps its state under the prefix, as a local one does.
    expect(existsSync(join(prefix, 'iris', 'iris.sqlite'))).toBe(true)
  } finally {
    process.env = saved
    await kubelet.close()
    await api.close()
    rmSync(root, { recursive: true, force: true })
  }
}, 90_000)

test('marin run --platform k8s without --namespace is bad usage (exit 2)', async () => {
  const { runMain } = await import('./main.js')
  const experiment = await loadExperiment(script)
  const err: string[] = []
  const saved = process.exitCode
  await runMain(experiment, ['--platform', 'k8s'], { out: () => {}, err: (l: string) => err.push(l), env: {} } as never)
  expect(process.exitCode).toBe(2)
  expect(err.join('\n')).toMatch(/--platform k8s needs --namespace/)
  process.exitCode = saved
})
