/**
 * FrayIrisClient with `platform: 'k8s'`: the client starts a controller whose tasks are Kubernetes Pods, here
 * against the loopback Kubernetes API of `@marin/iris/kube-testing`, whose kubelet runs each Pod's command on this
 * machine. A fray job becomes a Pod whose spec matches the request, and its result and output come back.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FakeKubeApi } from '@marin/iris/kube-testing'
import { expect, test } from 'vitest'
import { FrayIrisClient } from './iris-client.js'

const fixture = new URL('./fixtures/job-fn.ts', import.meta.url).href

test('a fray job submitted through FrayIrisClient({ iris: { platform: "k8s" } }) runs as a Pod', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fray-k8s-'))
  const api = await FakeKubeApi.start()
  const kubelet = api.startKubelet({ namespace: 'fray', root: dir })
  writeFileSync(join(dir, 'kubeconfig'), api.kubeConfigYaml('fray'), { mode: 0o600 })
  const client = new FrayIrisClient({
    iris: { platform: 'k8s', namespace: 'fray', kubeconfig: join(dir, 'kubeconfig'), prefix: join(dir, 'prefix') },
  })
  try {
    const marker = join(dir, 'marker')
    const job = await client.submit({
      name: 'callable',
      entrypoint: { module: fixture, export: 'writeMarker', args: [marker, 'hello'] },
      resources: { cpu: 2, memory: '1G' },
    })
    expect(await job.wait({ timeoutMs: 60_000 })).toBe('succeeded')
    expect(readFileSync(`${marker}.0`, 'utf8')).toBe('hello 1')
    expect(await job.logs()).toContain('wrote hello')
    const [pod] = api.pods('fray')
    const c = pod!.spec!.containers[0]!
    expect(c.args![0]).toBe(process.execPath)
    expect(c.args!.at(-1)).toMatch(/job-main\.ts$/)
    expect(c.resources).toEqual({
      requests: { cpu: '2', memory: String(1e9) },
      limits: { cpu: '2', memory: String(1e9) },
    })
    const spec = JSON.parse(c.env!.find((e) => e.name === 'FRAY_JOB_SPEC')!.value!)
    expect(spec).toEqual({ module: fixture, export: 'writeMarker', args: [marker, 'hello'] })
    expect(kubelet.started).toEqual([pod!.metadata!.name])
  } finally {
    await client.shutdown()
    await kubelet.close()
    await api.close()
  }
}, 90_000)
