/**
 * `iris cluster start --platform k8s` as a real process against the loopback Kubernetes API; `iris logs` shows
 * the Pod's output.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { IrisClient } from './client.js'
import { FakeKubeApi } from './internal/kube-api.js'
import { runIris, startIris } from './internal/test-processes.js'
import { ATTEMPT_ANNOTATION } from './kube-pods.js'

test('iris cluster start --platform k8s runs a submitted job as a Pod and iris logs shows its output', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'iris-k8scli-'))
  const api = await FakeKubeApi.start()
  const kubeconfig = join(dir, 'kubeconfig')
  writeFileSync(kubeconfig, api.kubeConfigYaml('ml'), { mode: 0o600 })
  const prefix = join(dir, 'prefix')
  const cluster = startIris(
    [
      'cluster',
      'start',
      '--platform',
      'k8s',
      '--namespace',
      'ml',
      '--kubeconfig',
      kubeconfig,
      '--prefix',
      prefix,
      '--port',
      '0',
      '--image',
      'marin-ts:1',
      '--volume',
      'marin-data:/data',
    ],
    { logDir: dir, name: 'cluster' },
  )
  let client: IrisClient | undefined
  try {
    const m = await cluster.waitFor(/k8s cluster \(namespace ml\) on (\S+) /)
    const env = { IRIS_CONTROLLER: m[1]!, IRIS_TOKEN_FILE: join(prefix, 'iris', 'token') }
    client = new IrisClient({ controller: m[1]!, token: readFileSync(env.IRIS_TOKEN_FILE, 'utf8').trim() })
    const sub = await runIris(
      ['submit', '--job-name', 'hello', '--resources', 'cpu=1,memory=1Gi', '--', 'echo', 'hi'],
      { logDir: dir, name: 'submit', env },
    )
    expect(sub.code, sub.stderr).toBe(0)
    const jobId = /hello-[0-9a-f]{8}/.exec(sub.stdout)![0]
    const pod = await api.waitForPod(
      (p) => p.metadata!.annotations![ATTEMPT_ANNOTATION]!.startsWith(jobId),
      'the job pod',
    )
    expect(pod.metadata!.namespace).toBe('ml')
    expect(pod.spec!.containers[0]!.image).toBe('marin-ts:1')
    expect(pod.spec!.volumes).toContainEqual({ name: 'marin-data', persistentVolumeClaim: { claimName: 'marin-data' } })
    api.run('ml', pod.metadata!.name!)
    api.appendLog('ml', pod.metadata!.name!, 'hi')
    api.exit('ml', pod.metadata!.name!, 0)
    expect((await client.wait(jobId, { timeoutMs: 30_000 })).state).toBe('SUCCEEDED')
    const logs = await runIris(['logs', jobId], { logDir: dir, name: 'logs', env })
    expect(logs.code, logs.stderr).toBe(0)
    expect(logs.stdout).toContain('hi')
  } finally {
    client?.close()
    cluster.child.kill('SIGTERM')
    await cluster.exited
    await api.close()
  }
})

test('cluster start: a bad platform, or k8s without a namespace, is bad usage (exit 2) naming the flag', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'iris-k8scli-'))
  const bad = await runIris(['cluster', 'start', '--platform', 'nomad'], { logDir: dir, name: 'bad' })
  expect(bad.code).toBe(2)
  expect(bad.stderr).toMatch(/--platform/)
  const noNs = await runIris(['cluster', 'start', '--platform', 'k8s'], { logDir: dir, name: 'nons' })
  expect(noNs.code).toBe(2)
  expect(noNs.stderr).toMatch(/--namespace/)
})
