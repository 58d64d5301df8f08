/**
 * The k8s platform against a loopback Kubernetes API (`internal/kube-api.ts`), through the real
 * `@kubernetes/client-node`: jobs become Pods, Pod output becomes `iris logs`, kill deletes the Pod, evicted and
 * lost Pods are retried within the worker-loss budget, OOMKilled is shown, and a watch that gets 410 Gone lists
 * again.
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { V1Pod } from '@kubernetes/client-node'
import { afterEach, beforeEach, expect, test } from 'vitest'
import type { IrisClient } from './client.js'
import type { JobStatus } from './records.js'
import { FakeKubeApi } from './internal/kube-api.js'
import { ATTEMPT_ANNOTATION, KUBE_RBAC_RULES, podManifests, STDERR_WRAPPER } from './kube-pod-spec.js'
import { JobScheduler } from './job-scheduler.js'
import { kubernetesPlatform } from './kube-platform.js'
import { LocalCluster } from './local-cluster.js'
import { IRIS_BIN } from './internal/test-processes.js'
import { openStore } from '@marin/finestore'

const NS = 'iris-test'
let api: FakeKubeApi
let cluster: LocalCluster
let iris: IrisClient

beforeEach(async () => {
  api = await FakeKubeApi.start()
  cluster = await LocalCluster.start({
    prefix: mkdtempSync(join(tmpdir(), 'iris-k8s-')),
    heartbeatMs: 200,
    killGraceMs: 1000,
    kubernetes: {
      kubeConfig: api.kubeConfig(NS),
      namespace: NS,
      defaultImage: 'marin-ts:test',
      advertise: 'iris-controller:10000',
      volumes: [{ name: 'data', claimName: 'marin-data', mountPath: '/data' }],
      rewatchDelayMs: 50,
    },
  })
  iris = cluster.client()
})

afterEach(async () => {
  iris.close()
  await cluster.stop()
  await api.close()
  // Every call the platform made is one the controller's Role (infra/k8s/iris-controller.yaml) grants.
  for (const c of api.calls) {
    const m = /^\/api\/v1\/namespaces\/[^/]+\/(pods|secrets)(\/[^/]+)?(\/log)?$/.exec(c.path)
    expect(m, c.path).not.toBeNull()
    const resource = m![3] ? 'pods/log' : m![1]!
    const verb =
      { POST: 'create', DELETE: 'delete' }[c.method] ?? (c.query.watch === 'true' ? 'watch' : m![2] ? 'get' : 'list')
    const granted = KUBE_RBAC_RULES.some(
      (r) => (r.resources as readonly string[]).includes(resource) && (r.verbs as readonly string[]).includes(verb),
    )
    expect(granted, `${c.method} ${c.path} needs ${verb} ${resource}`).toBe(true)
  }
})

const attemptOf = (p: V1Pod) => p.metadata!.annotations![ATTEMPT_ANNOTATION]!
const nameOf = (p: V1Pod) => p.metadata!.name!
const podFor = (jobId: string, attempt = 1) =>
  api.waitForPod(
    (p) => attemptOf(p).startsWith(jobId) && p.metadata!.labels!['iris.marin.dev/attempt'] === String(attempt),
    `pod of ${jobId} attempt ${attempt}`,
  )

test('a job becomes a Pod whose spec matches the request; secrets reach it only as Secret references', async () => {
  process.env.K8S_TEST_HF = 'hf-secret-value'
  const id = await iris.submit({
    name: 'train',
    command: ['node', 'train.js', '--steps', '10'],
    resources: 'cpu=2.5,memory=4Gi,gpu=1',
    image: 'ghcr.io/marin/train:1',
    priority: 'production',
    env: { SEED: '7' },
    secrets: { HF_TOKEN: 'env:K8S_TEST_HF' },
  })
  const pod = await podFor(id)
  const spec = pod.spec!
  const c = spec.containers[0]!
  expect(pod.metadata!.namespace).toBe(NS)
  expect(spec.restartPolicy).toBe('Never')
  expect(spec.priorityClassName).toBe('iris-production')
  expect(spec.automountServiceAccountToken).toBe(false)
  expect(c.image).toBe('ghcr.io/marin/train:1')
  // The job's command is the container's args; the container's command is the wrapper that tags stderr lines.
  expect(c.command).toEqual(['/bin/sh', '-c', STDERR_WRAPPER, 'iris-task'])
  expect(c.args).toEqual(['node', 'train.js', '--steps', '10'])
  expect(c.resources).toEqual({
    requests: { cpu: '2500m', memory: String(4 * 2 ** 30), 'nvidia.com/gpu': '1' },
    limits: { cpu: '2500m', memory: String(4 * 2 ** 30), 'nvidia.com/gpu': '1' },
  })
  const env = Object.fromEntries(c.env!.map((e) => [e.name, e]))
  expect(env.SEED).toEqual({ name: 'SEED', value: '7' })
  expect(env.IRIS_JOB_ID!.value).toBe(id)
  expect(env.IRIS_CONTROLLER!.value).toBe('iris-controller:10000')
  expect(env.HF_TOKEN).toEqual({
    name: 'HF_TOKEN',
    valueFrom: { secretKeyRef: { name: nameOf(pod), key: 'HF_TOKEN' } },
  })
  expect(env.IRIS_TOKEN).toEqual({
    name: 'IRIS_TOKEN',
    valueFrom: { secretKeyRef: { name: nameOf(pod), key: 'IRIS_TOKEN' } },
  })
  // No secret value and no token anywhere in the Pod object.
  const text = JSON.stringify(pod)
  expect(text).not.toContain('hf-secret-value')
  expect(text).not.toMatch(/iris-job\./)
  const secret = api.secret(NS, nameOf(pod))!
  expect(Buffer.from((secret.data as Record<string, string>).HF_TOKEN!, 'base64').toString()).toBe('hf-secret-value')
  expect(Buffer.from((secret.data as Record<string, string>).IRIS_TOKEN!, 'base64').toString()).toMatch(/^iris-job\./)
  expect(c.volumeMounts).toContainEqual({ name: 'data', mountPath: '/data' })
  expect(spec.volumes).toContainEqual({ name: 'data', persistentVolumeClaim: { claimName: 'marin-data' } })
})

test('pod output flows into iris logs and the job succeeds with the pod', async () => {
  const id = await iris.submit({ name: 'hello', command: ['echo', 'hi'] })
  const pod = await podFor(id)
  api.run(NS, nameOf(pod))
  api.appendLog(NS, nameOf(pod), 'hello from the pod')
  api.appendLog(NS, nameOf(pod), 'second line')
  const seen: string[] = []
  for await (const l of iris.logs(id, { follow: true })) {
    seen.push(l.line)
    if (seen.length === 1) api.exit(NS, nameOf(pod), 0)
  }
  expect(seen).toEqual(['hello from the pod', 'second line'])
  expect((await iris.wait(id, { timeoutMs: 30_000 })).state).toBe('SUCCEEDED')
})

test('why a pod waits shows in iris logs', async () => {
  const id = await iris.submit({ name: 'pull', command: ['true'], image: 'nope:1' })
  const pod = await podFor(id)
  api.setStatus(NS, nameOf(pod), {
    phase: 'Pending',
    containerStatuses: [
      {
        name: 'task',
        ready: false,
        restartCount: 0,
        image: 'nope:1',
        imageID: '',
        state: { waiting: { reason: 'ImagePullBackOff', message: 'Back-off pulling image "nope:1"' } },
      },
    ],
  })
  for await (const l of iris.logs(id, { follow: true })) {
    expect(l.line).toBe(`[iris] pod ${nameOf(pod)} is waiting: ImagePullBackOff: Back-off pulling image "nope:1"`)
    expect(l.stream).toBe('stderr')
    break
  }
  await iris.kill(id)
})

test('kill deletes the pod and its secret', async () => {
  const id = await iris.submit({ name: 'sleepy', command: ['sleep', '1000'] })
  const pod = await podFor(id)
  api.run(NS, nameOf(pod))
  expect(api.secret(NS, nameOf(pod))).toBeDefined()
  await iris.kill(id)
  await api.waitFor(() => (api.pods(NS).some((p) => nameOf(p) === nameOf(pod)) ? undefined : true), 'pod deleted')
  await api.waitFor(() => (api.secret(NS, nameOf(pod)) ? undefined : true), 'secret deleted')
  expect(api.calls).toContainEqual(
    expect.objectContaining({ method: 'DELETE', path: `/api/v1/namespaces/${NS}/pods/${nameOf(pod)}` }),
  )
  expect((await iris.wait(id, { timeoutMs: 30_000 })).state).toBe('KILLED')
})

test('an evicted pod is retried within the worker-loss budget; the reason is shown', async () => {
  const id = await iris.submit({ name: 'evictee', command: ['true'], maxRetriesWorker: 1 })
  const first = await podFor(id, 1)
  api.run(NS, nameOf(first))
  api.evict(NS, nameOf(first))
  const second = await podFor(id, 2)
  api.run(NS, nameOf(second))
  api.exit(NS, nameOf(second), 0)
  const job = await iris.wait(id, { timeoutMs: 30_000 })
  expect(job.state).toBe('SUCCEEDED')
  const attempts = await iris.attempts(id)
  expect(attempts.map((a) => a.state)).toEqual(['WORKER_FAILED', 'SUCCEEDED'])
  expect(attempts[0]!.error).toMatch(/Evicted: The node was low on resource: memory/)
})

test('a pod lost with its node is retried; when the budget is spent the job fails', async () => {
  const id = await iris.submit({ name: 'nodeloss', command: ['true'], maxRetriesWorker: 1 })
  const first = await podFor(id, 1)
  api.run(NS, nameOf(first))
  api.remove(NS, nameOf(first))
  const second = await podFor(id, 2)
  api.run(NS, nameOf(second))
  api.evict(NS, nameOf(second))
  const job = await iris.wait(id, { timeoutMs: 30_000 })
  expect(job.state).toBe('FAILED')
  const attempts = await iris.attempts(id)
  expect(attempts.map((a) => a.state)).toEqual(['WORKER_FAILED', 'WORKER_FAILED'])
  expect(attempts[0]!.error).toMatch(/deleted before it finished/)
})

test('a pod deleted while the watch was down is found gone by the relist and retried', async () => {
  const id = await iris.submit({ name: 'unseen', command: ['true'], maxRetriesWorker: 1 })
  const first = await podFor(id, 1)
  api.run(NS, nameOf(first))
  await api.waitFor(
    () => (api.calls.some((c) => c.path.endsWith(`/${nameOf(first)}/log`)) ? true : undefined),
    'log follow',
  )
  // Both before the platform hears of either: its next watch is 410 Gone, and the list lacks the Pod.
  api.compact()
  api.remove(NS, nameOf(first))
  const second = await podFor(id, 2)
  api.run(NS, nameOf(second))
  api.exit(NS, nameOf(second), 0)
  expect((await iris.wait(id, { timeoutMs: 30_000 })).state).toBe('SUCCEEDED')
  expect((await iris.attempts(id))[0]!.error).toMatch(/deleted before it finished/)
  expect(api.calls).toContainEqual(
    expect.objectContaining({ method: 'GET', path: `/api/v1/namespaces/${NS}/pods/${nameOf(first)}` }),
  )
})

test('OOMKilled fails the task with the reason', async () => {
  const id = await iris.submit({ name: 'hungry', command: ['true'], resources: 'memory=1Gi' })
  const pod = await podFor(id)
  api.run(NS, nameOf(pod))
  api.exit(NS, nameOf(pod), 137, 'OOMKilled')
  const job = await iris.wait(id, { timeoutMs: 30_000 })
  expect(job.state).toBe('FAILED')
  expect((await iris.attempts(id))[0]!.error).toMatch(/^OOMKilled: .*1073741824 bytes/)
})

test('after 410 Gone the watch lists again and still sees the pod end', async () => {
  const id = await iris.submit({ name: 'gone', command: ['true'] })
  const pod = await podFor(id)
  api.run(NS, nameOf(pod))
  api.compact()
  const before = api.calls.length
  api.exit(NS, nameOf(pod), 3)
  const job = await iris.wait(id, { timeoutMs: 30_000 })
  expect(job.state).toBe('FAILED')
  expect(job.tasks[0]!.exitCode).toBe(3)
  // The stale watch was answered 410 Gone, so the platform listed the pods again.
  const after = api.calls.slice(before)
  expect(
    after.some((c) => c.method === 'GET' && c.path === `/api/v1/namespaces/${NS}/pods` && c.query.watch !== 'true'),
  ).toBe(true)
})

test('JobScheduler runs jobs as Pods with kubernetesPlatform (a kubeconfig file, a PVC volume)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'iris-k8s-sched-'))
  writeFileSync(join(dir, 'kubeconfig'), api.kubeConfigYaml('sched'), { mode: 0o600 })
  await expect(kubernetesPlatform({ namespace: 'Bad_NS' })).rejects.toThrow(/not a Kubernetes namespace name/)
  await expect(kubernetesPlatform({ namespace: 'sched', volumes: ['data'] })).rejects.toThrow(/CLAIM:\/absolute\/path/)
  const scheduler = new JobScheduler({
    prefix: join(dir, 'prefix'),
    local: {
      kubernetes: await kubernetesPlatform({
        namespace: 'sched',
        kubeconfig: join(dir, 'kubeconfig'),
        volumes: ['marin-data:/data'],
      }),
    },
  })
  try {
    const [job] = await scheduler.submit({ name: 'step', command: ['node', 'step.js'] })
    const pod = await api.waitForPod((p) => p.metadata!.namespace === 'sched', 'the scheduler pod')
    expect(pod.spec!.containers[0]!.image).toBe('marin-ts:latest')
    api.run('sched', nameOf(pod))
    api.exit('sched', nameOf(pod), 0)
    expect((await job!.wait({ timeoutMs: 30_000 })).state).toBe('SUCCEEDED')
  } finally {
    await scheduler.close()
  }
})

test('stdout and stderr of a Pod reach iris logs as separate streams (the container runs the wrapper)', async () => {
  const root = mkdtempSync(join(tmpdir(), 'iris-kubelet-'))
  const kubelet = api.startKubelet({ namespace: NS, root, claims: { 'marin-data': root } })
  try {
    const script =
      'console.log("out 1"); console.error("err 1"); console.log("out 2"); ' +
      'process.stderr.write("err \\\\ 2 no newline"); process.exitCode = 3'
    const id = await iris.submit({ name: 'streams', command: [process.execPath, '-e', script] })
    const job = await iris.wait(id, { timeoutMs: 30_000 })
    expect(job.state).toBe('FAILED')
    expect(job.tasks[0]!.exitCode).toBe(3)
    const lines: string[] = []
    for await (const l of iris.logs(id)) lines.push(`${l.stream}: ${l.line}`)
    // The order between the two streams is not kept (two pipes, as for a process on a worker); within one it is.
    expect(lines.filter((l) => l.startsWith('stdout'))).toEqual(['stdout: out 1', 'stdout: out 2'])
    expect(lines.filter((l) => l.startsWith('stderr'))).toEqual(['stderr: err 1', 'stderr: err \\ 2 no newline'])
  } finally {
    await kubelet.close()
  }
})

test('with stderr "merged" the container runs the job command itself', () => {
  const assignment = {
    attemptId: 'j-1/0/1',
    jobId: 'j-1',
    taskIndex: 0,
    attempt: 1,
    numTasks: 1,
    spec: { command: ['echo', 'hi'], resources: { cpu: 1, memory: 1, gpu: 0 }, priority: 'batch', mounts: [] },
  } as never
  const opts = { namespace: NS, platformId: 'p', defaultImage: 'i', killGraceMs: 1000 }
  const merged = podManifests({ assignment, env: {}, secretEnv: {} }, { ...opts, stderr: 'merged' }).pod
  expect(merged.spec!.containers[0]!.command).toEqual(['echo', 'hi'])
  expect(merged.spec!.containers[0]!.args).toBeUndefined()
  const tagged = podManifests({ assignment, env: {}, secretEnv: {} }, opts).pod
  expect(tagged.spec!.containers[0]!.args).toEqual(['echo', 'hi'])
})

/** Polls the job's status until `pred` holds (the state changes on the controller's side, not as an event here). */
async function until(id: string, pred: (j: JobStatus) => boolean, what: string): Promise<JobStatus> {
  const end = Date.now() + 20_000
  for (;;) {
    const j = await iris.status(id)
    if (pred(j)) return j
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(j.tasks)} ${j.state}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

test('a Pending pod is PENDING with why it waits; Running is RUNNING; then the pod ends the job', async () => {
  const root = mkdtempSync(join(tmpdir(), 'iris-kubelet-'))
  const kubelet = api.startKubelet({
    namespace: NS,
    root,
    claims: { 'marin-data': root },
    holdPending: { reason: 'ImagePullBackOff', message: 'Back-off pulling image "marin-ts:test"' },
  })
  try {
    const id = await iris.submit({
      name: 'pending',
      command: [process.execPath, '-e', 'setInterval(() => {}, 1000)'],
    })
    const pending = await until(id, (j) => j.tasks[0]!.error !== undefined, 'the waiting reason')
    expect(pending.state).toBe('PENDING')
    expect(pending.tasks[0]!.state).toBe('ASSIGNED')
    expect(pending.tasks[0]!.error).toBe('Pending: ImagePullBackOff: Back-off pulling image "marin-ts:test"')
    expect((await iris.attempts(id))[0]!.state).toBe('ASSIGNED')
    kubelet.release()
    const running = await until(id, (j) => j.state !== 'PENDING', 'the job to run')
    expect(running.state).toBe('RUNNING')
    expect(running.tasks[0]!.state).toBe('RUNNING')
    expect(running.tasks[0]!.error).toBeUndefined()
    const [attempt] = await iris.attempts(id)
    expect(attempt!.state).toBe('RUNNING')
    expect(attempt!.startedAt).toBeDefined()
    await iris.kill(id)
    expect((await iris.wait(id, { timeoutMs: 30_000 })).state).toBe('KILLED')
  } finally {
    await kubelet.close()
  }
})

test('--mount on Pods: an init container materializes the artifact from the store on a shared volume', async () => {
  const data = mkdtempSync(join(tmpdir(), 'iris-k8s-data-'))
  const store = await openStore({ url: `file://${join(data, 'store')}` })
  await store.commit('datasets/tiny', async (txn) => {
    await txn.put('train.txt', 'one\ntwo\n')
  })
  await store.commit('datasets/tiny', async (txn) => {
    await txn.put('train.txt', 'version two\n')
  })
  store.close()
  const own = await LocalCluster.start({
    prefix: mkdtempSync(join(tmpdir(), 'iris-k8s-mounts-')),
    heartbeatMs: 200,
    kubernetes: {
      kubeConfig: api.kubeConfig('mounts'),
      namespace: 'mounts',
      defaultImage: 'marin-ts:test',
      volumes: [{ name: 'data', claimName: 'marin-data', mountPath: '/data' }],
      mountStore: 'file:///data/store',
      mountCommand: [process.execPath, IRIS_BIN],
      rewatchDelayMs: 50,
    },
  })
  const kubelet = api.startKubelet({ namespace: 'mounts', root: data, claims: { 'marin-data': data } })
  const client = own.client()
  try {
    const read =
      'const fs = require("fs"); console.log(fs.readFileSync(process.env.IRIS_MOUNT_IN_DATA + "/train.txt", "utf8"))'
    const id = await client.submit({
      name: 'mounted',
      command: [process.execPath, '-e', read],
      mounts: ['datasets/tiny@1:in/data'],
      image: 'python:3.12',
    })
    const job = await client.wait(id, { timeoutMs: 60_000 })
    const lines: string[] = []
    for await (const l of client.logs(id)) lines.push(l.line)
    expect(job.state, JSON.stringify(job.tasks)).toBe('SUCCEEDED')
    expect(lines).toEqual(['one', 'two', ''])
    const pod = api.pods('mounts')[0]!
    const init = pod.spec!.initContainers![0]!
    expect(init.image).toBe('marin-ts:test')
    expect(init.args).toEqual([
      'materialize',
      '--store',
      'file:///data/store',
      '--dest',
      '/workspace',
      'datasets/tiny@1:in/data',
    ])
    expect(init.volumeMounts).toEqual([
      { name: 'workspace', mountPath: '/workspace' },
      { name: 'data', mountPath: '/data' },
    ])
    const env = Object.fromEntries(pod.spec!.containers[0]!.env!.map((e) => [e.name, e.value]))
    expect(env.IRIS_MOUNT_IN_DATA).toBe('/workspace/in/data')
    expect(JSON.parse(env.IRIS_MOUNTS!)).toEqual({ 'in/data': '/workspace/in/data' })
    // A mount that cannot be materialized fails the attempt with the init container's reason.
    const bad = await client.submit({ name: 'nomount', command: ['true'], mounts: ['datasets/none:data'] })
    const failed = await client.wait(bad, { timeoutMs: 60_000 })
    expect(failed.state).toBe('FAILED')
    expect(failed.tasks[0]!.error).toMatch(/^mount failed \(init container exit 1\): .*datasets\/none/s)
  } finally {
    client.close()
    await kubelet.close()
    await own.stop()
  }
})

test('a job with --mount is refused on Pods with a reason naming the option; no Pod is made', async () => {
  const id = await iris.submit({ name: 'mounted', command: ['true'], mounts: ['dataset@1:data'] })
  const job = await iris.wait(id, { timeoutMs: 30_000 })
  expect(job.state).toBe('FAILED')
  expect(job.tasks[0]!.error).toMatch(/--mount.*no --mount-store/)
  expect(api.calls.filter((c) => c.method === 'POST' && c.path.endsWith('/pods'))).toEqual([])
})

test('a job that names a warm runner runs its own command in the Pod (no runner on Pods)', async () => {
  const id = await iris.submit({
    name: 'warm',
    command: ['node', 'step.js', 'a'],
    runner: { command: ['node', 'warm-runner.js'] },
  })
  const pod = await podFor(id)
  expect(pod.spec!.containers[0]!.args).toEqual(['node', 'step.js', 'a'])
  expect(JSON.stringify(pod.spec)).not.toContain('warm-runner.js')
  await iris.kill(id)
})
