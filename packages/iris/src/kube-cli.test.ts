/**
 * `iris cluster start --platform k8s` as a real process against the loopback Kubernetes API; `iris logs` shows
 * the Pod's output. Short commands (submit, logs, bad usage) run the CLI's own code in this process
 * (`runIrisHere`); the controllers are processes, since the tests stop them with signals.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { IrisClient } from './client.js'
import { FakeKubeApi } from './internal/kube-api.js'
import { runIrisHere, startIris } from './internal/test-processes.js'
import { ATTEMPT_ANNOTATION } from './kube-pod-spec.js'

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
    const sub = await runIrisHere(
      ['submit', '--job-name', 'hello', '--resources', 'cpu=1,memory=1Gi', '--', 'echo', 'hi'],
      env,
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
    const logs = await runIrisHere(['logs', jobId], env)
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
  const bad = await runIrisHere(['cluster', 'start', '--platform', 'nomad'])
  expect(bad.code).toBe(2)
  expect(bad.stderr).toMatch(/--platform/)
  const noNs = await runIrisHere(['cluster', 'start', '--platform', 'k8s'])
  expect(noNs.code).toBe(2)
  expect(noNs.stderr).toMatch(/--namespace/)
})

test.each([
  ['SIGKILL', 'runs on after the restart', false],
  ['SIGKILL', 'ends while the controller is down', true],
  ['SIGTERM', 'runs on after the restart', false],
] as const)(
  'a controller stopped with %s and started again adopts its Pod that %s: the job finishes once',
  async (signal, _, endsWhileDown) => {
    const dir = mkdtempSync(join(tmpdir(), 'iris-k8sadopt-'))
    const api = await FakeKubeApi.start()
    const kubelet = api.startKubelet({ namespace: 'ml', root: dir })
    const kubeconfig = join(dir, 'kubeconfig')
    writeFileSync(kubeconfig, api.kubeConfigYaml('ml'), { mode: 0o600 })
    const prefix = join(dir, 'prefix')
    const args = ['cluster', 'start', '--platform', 'k8s', '--namespace', 'ml', '--kubeconfig', kubeconfig]
    const start = async (name: string) => {
      const p = startIris([...args, '--prefix', prefix, '--port', '0'], { logDir: dir, name })
      const m = await p.waitFor(/k8s cluster \(namespace ml\) on (\S+) /)
      const token = readFileSync(join(prefix, 'iris', 'token'), 'utf8').trim()
      return { p, client: new IrisClient({ controller: m[1]!, token }) }
    }
    let first: Awaited<ReturnType<typeof start>> | undefined
    let second: Awaited<ReturnType<typeof start>> | undefined
    const go = join(dir, 'go')
    try {
      first = await start('first')
      const task =
        'console.log("started"); console.error("on stderr"); ' +
        'const t = setInterval(() => { ' +
        'if (require("fs").existsSync(process.argv[1])) { console.log("done"); clearInterval(t) } }, 50)'
      const jobId = await first.client.submit({ name: 'adopted', command: [process.execPath, '-e', task, go] })
      // The task runs and its first lines reached the controller.
      for await (const l of first.client.logs(jobId, { follow: true })) if (l.line === 'on stderr') break
      expect((await first.client.status(jobId)).state).toBe('RUNNING')
      first.client.close()
      first.p.child.kill(signal)
      await first.p.exited
      // The Pod outlives its controller.
      expect(api.pods('ml').map((p) => p.status?.phase)).toEqual(['Running'])
      if (endsWhileDown) {
        writeFileSync(go, '')
        await api.waitForPod((p) => p.status?.phase === 'Succeeded', 'the pod to end')
      }
      second = await start('second')
      if (!endsWhileDown) {
        expect((await second.client.status(jobId)).state).toBe('RUNNING')
        writeFileSync(go, '')
      }
      const job = await second.client.wait(jobId, { timeoutMs: 60_000 })
      expect(job.state).toBe('SUCCEEDED')
      // One Pod, one attempt, and each line of its output once.
      expect(kubelet.started).toHaveLength(1)
      expect(api.calls.filter((c) => c.method === 'POST' && c.path.endsWith('/pods'))).toHaveLength(1)
      expect((await second.client.attempts(jobId)).map((a) => a.state)).toEqual(['SUCCEEDED'])
      const lines: string[] = []
      for await (const l of second.client.logs(jobId)) lines.push(`${l.stream}: ${l.line}`)
      expect(lines.sort()).toEqual(['stderr: on stderr', 'stdout: done', 'stdout: started'])
    } finally {
      first?.client.close()
      second?.client.close()
      if (first && first.p.child.exitCode === null && first.p.child.signalCode === null) first.p.child.kill('SIGKILL')
      second?.p.child.kill('SIGTERM')
      await second?.p.exited
      await kubelet.close()
      await api.close()
    }
  },
  120_000,
)
