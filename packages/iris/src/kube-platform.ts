/**
 * @module The options of the k8s platform from plain values (`iris cluster start --platform k8s`, and
 * `LocalCluster`/`JobScheduler({ local: { kubernetes } })` in code): loads the kubeconfig and parses volumes.
 * The Kubernetes client library is loaded only here, when the platform is asked for.
 */
import { resolve } from 'node:path'
import { IrisError } from './errors.js'
import type { LocalClusterOptions } from './local-cluster.js'

export type KubernetesPlatformOptions = {
  /** Namespace of task Pods. */
  namespace: string
  /** A kubeconfig file. @default KUBECONFIG, ~/.kube/config, then the Pod's service account */
  kubeconfig?: string
  /** Image of tasks whose job names none. @default 'marin-ts:latest' */
  image?: string
  /** PersistentVolumeClaims mounted into every task Pod, as `CLAIM:/absolute/path`. */
  volumes?: readonly string[]
  /** Finished Pods are deleted this long after they end. @default an hour */
  podTtlMs?: number
  /** The controller address task Pods use. @default the bound address */
  advertise?: string
  /** `tagged`: stderr lines kept apart from stdout (the image needs `/bin/sh` and `mkfifo`); `merged`: the job's
   * command alone, all output shown as stdout. @default 'tagged' */
  stderr?: 'tagged' | 'merged'
  /** The finestore store as task Pods see it (e.g. `file:///data/.marin/store` on a volume): `--mount` works. */
  mountStore?: string
}

/**
 * @example
 * const scheduler = new JobScheduler({ local: { kubernetes: await kubernetesPlatform({ namespace: 'ml' }) } })
 */
export async function kubernetesPlatform(
  o: KubernetesPlatformOptions,
): Promise<NonNullable<LocalClusterOptions['kubernetes']>> {
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(o.namespace))
    throw new IrisError('BAD_REQUEST', `namespace "${o.namespace}" is not a Kubernetes namespace name (a-z, 0-9, -)`)
  const { KubeConfig } = await import('@kubernetes/client-node')
  const kubeConfig = new KubeConfig()
  try {
    if (o.kubeconfig) kubeConfig.loadFromFile(resolve(o.kubeconfig))
    else kubeConfig.loadFromDefault()
  } catch (err) {
    throw new IrisError('BAD_REQUEST', `kubeconfig ${o.kubeconfig ?? '(default)'}: ${(err as Error).message}`)
  }
  if (o.stderr !== undefined && o.stderr !== 'tagged' && o.stderr !== 'merged')
    throw new IrisError('BAD_REQUEST', `stderr "${o.stderr}" is tagged or merged`)
  const volumes = (o.volumes ?? []).map((v) => {
    const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?):(\/.*)$/.exec(v)
    if (!m) throw new IrisError('BAD_REQUEST', `volume "${v}" is CLAIM:/absolute/path (a PersistentVolumeClaim name)`)
    return { name: m[1]!, claimName: m[1]!, mountPath: m[3]! }
  })
  return {
    kubeConfig,
    namespace: o.namespace,
    defaultImage: o.image ?? 'marin-ts:latest',
    volumes,
    ...(o.podTtlMs !== undefined ? { podTtlMs: o.podTtlMs } : {}),
    ...(o.advertise ? { advertise: o.advertise } : {}),
    ...(o.stderr ? { stderr: o.stderr } : {}),
    ...(o.mountStore ? { mountStore: o.mountStore } : {}),
  }
}
