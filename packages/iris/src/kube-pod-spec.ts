/**
 * @module What iris's Kubernetes platform asks of the API, as plain data: the labels and annotations of its
 * objects, the RBAC rules it needs, the Secret and Pod of one attempt (`podManifests`, pure) and what a Pod's
 * status means for its attempt (`podVerdict`). `kube-pods.ts` sends and watches them.
 */
import type { KubeConfig, V1EnvVar, V1Pod } from '@kubernetes/client-node'
import type { TaskAssignment } from './protocol.js'
/** Labels iris puts on its Pods and Secrets. */
export const KUBE_LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  platform: 'iris.marin.dev/platform',
  job: 'iris.marin.dev/job',
  task: 'iris.marin.dev/task',
  attempt: 'iris.marin.dev/attempt',
} as const

/** The annotation holding the full attempt id (labels are too short for it). */
export const ATTEMPT_ANNOTATION = 'iris.marin.dev/attempt-id'

/** The annotation holding the job's secret specs (`{"HF_TOKEN":"env:HF_TOKEN"}`: references, never values), so
 * that a controller that adopts the Pod can resolve them again and keep their values out of `iris logs`. */
export const SECRET_SPECS_ANNOTATION = 'iris.marin.dev/secret-specs'

/** A Pod of this platform found at start: the attempt it runs, to be adopted (`KubePods.adopt`). */
export type FoundPod = {
  attemptId: string
  jobId: string
  taskIndex: number
  attempt: number
  /** The job's secret specs (from `SECRET_SPECS_ANNOTATION`). */
  secrets: Record<string, string>
  pod: V1Pod
}

/** Log lines of a Pod are numbered by their place in its log (so that a log read again from its start after a
 * controller restart is stored once); iris's own notes about the Pod are numbered above them, by their time. */
export const NOTE_LINE_BASE = 2 ** 41

/**
 * The Kubernetes API calls this platform makes, as RBAC rules: the controller's Role grants exactly these
 * (`kube-manifests.ts`). Secrets are only created and deleted, never read back; a Pod is read only when a list
 * no longer shows it.
 */
export const KUBE_RBAC_RULES = [
  { apiGroups: [''], resources: ['pods'], verbs: ['create', 'delete', 'get', 'list', 'watch'] },
  { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
  { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'delete'] },
] as const

/** The PriorityClass of each priority band (`kube-manifests.ts` defines them). */
export const PRIORITY_CLASS_VALUES = { production: 100_000, interactive: 50_000, batch: 10_000 } as const

/** The container name of every task Pod. */
export const TASK_CONTAINER = 'task'

/**
 * The container command of a task Pod (`/bin/sh -c STDERR_WRAPPER iris-task CMD…`): Kubernetes merges a
 * container's stdout and stderr in its log API, so the wrapper runs the task with its stderr into a FIFO and writes
 * each line read from it to the container's stderr with `STDERR_MARK` before it; the platform reads marked lines
 * as stderr. The task's stdout is the container's stdout, untouched. SIGTERM (the Pod deleted) is passed on to the
 * task, and the wrapper exits with the task's exit code. Needs `/bin/sh` and `mkfifo` in the image and a writable
 * `$TMPDIR` (or `/tmp`); `stderr: 'merged'` runs the command alone.
 */
export const STDERR_WRAPPER = [
  // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansion
  'f="${TMPDIR:-/tmp}/.iris-stderr.$$"',
  'rm -f "$f"; mkfifo "$f" || exit 126',
  `while IFS= read -r l || [ -n "$l" ]; do printf '\\036%s\\n' "$l"; done <"$f" >&2 & r=$!`,
  `p=; trap 't=1; [ -n "$p" ] && kill -TERM "$p" 2>/dev/null' TERM INT`,
  '"$@" 2>"$f" & p=$!',
  '[ -n "$t" ] && kill -TERM "$p" 2>/dev/null',
  'while :; do wait "$p"; c=$?; kill -0 "$p" 2>/dev/null || break; done',
  'wait "$r"',
  'rm -f "$f"',
  'exit "$c"',
].join('\n')

/** What starts every stderr line in a task Pod's log (ASCII record separator). */
export const STDERR_MARK = '\u001e'

/** A PersistentVolumeClaim mounted into every task Pod. */
export type KubeVolume = { name: string; claimName: string; mountPath: string; readOnly?: boolean }

export type KubePodsOptions = {
  kubeConfig: KubeConfig
  namespace: string
  /** Names this platform's Pods (label `iris.marin.dev/platform`): two controllers in a namespace never touch
   * each other's. */
  platformId: string
  /** Image of tasks whose job names none. */
  defaultImage: string
  /** Mounted into every task Pod (the shared data volume, e.g. `marin-data` at `/data`). @default none */
  volumes?: readonly KubeVolume[]
  /** Finished Pods (and their Secrets) are deleted this long after they end. @default an hour */
  podTtlMs?: number
  /** Service account of task Pods; its API token is never mounted. @default the namespace's default */
  serviceAccountName?: string
  /** Pause before watching again after the watch ends or fails. @default 1000 */
  rewatchDelayMs?: number
  /** `tagged`: the container runs `STDERR_WRAPPER`, so `iris logs` tells stderr from stdout; `merged`: the job's
   * command alone (for images without `/bin/sh`), every line shown as stdout. @default 'tagged' */
  stderr?: 'tagged' | 'merged'
  /** The finestore store as task Pods see it (`file:///data/.marin/store` on the shared volume): jobs with
   * `--mount` get an init container that materializes their artifacts into `/workspace` from it. Without it they
   * are refused. */
  mountStore?: string
  /** How the init container starts the iris CLI, in the platform's image.
   * @default ['node', '/opt/marin-ts/packages/iris/bin/iris.js'] */
  mountCommand?: readonly string[]
}

/** The iris CLI in the image `infra/Dockerfile` builds. */
const IMAGE_IRIS = ['node', '/opt/marin-ts/packages/iris/bin/iris.js']

/** What `run` needs besides the assignment: the environment split into plain values and secret values. */
export type PodTaskInput = {
  assignment: TaskAssignment
  /** Plain variables (the job's env and the IRIS_* variables). */
  env: Record<string, string>
  /** Values that must not appear in the Pod spec: the job token and resolved secrets. */
  secretEnv: Record<string, string>
  /** `lineNo`: the line's place in the Pod's log, or `NOTE_LINE_BASE` + its time for iris's notes. */
  onLine: (stream: 'stdout' | 'stderr', line: string, ts: number, lineNo: number) => void
  /** The Pod waits (phase Pending), with why (`ImagePullBackOff: …`, `Unschedulable: …`) once the API says. */
  onPending?: (note: string | undefined) => void
  /** The Pod's phase became Running (called once). */
  onRunning?: () => void
}

/** A Kubernetes object name for an attempt: DNS-1123, at most 63 characters, unique per attempt id. */
export function podName(attemptId: string): string {
  const clean = attemptId
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
  let h = 0
  for (const c of attemptId) h = (Math.imul(h, 31) + c.charCodeAt(0)) >>> 0
  const suffix = h.toString(36).padStart(7, '0').slice(-7)
  return `iris-${clean.slice(0, 63 - 5 - 8)}-${suffix}`.replace(/-+/g, '-')
}

export const labelValue = (v: string) =>
  v
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .slice(0, 63)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '')

/** The Kubernetes quantity for cpus: whole cores as a number, fractions in millicores. */
export function cpuQuantity(cpu: number): string {
  return Number.isInteger(cpu) ? String(cpu) : `${Math.ceil(cpu * 1000)}m`
}

/** The Secret and Pod of one attempt (pure: what `run` sends). */
export function podManifests(
  input: Omit<PodTaskInput, 'onLine'>,
  opts: Pick<
    KubePodsOptions,
    | 'namespace'
    | 'platformId'
    | 'defaultImage'
    | 'volumes'
    | 'serviceAccountName'
    | 'stderr'
    | 'mountStore'
    | 'mountCommand'
  > & {
    killGraceMs: number
  },
): {
  secret?: {
    apiVersion: 'v1'
    kind: 'Secret'
    metadata: V1Pod['metadata']
    type: 'Opaque'
    data: Record<string, string>
  }
  pod: V1Pod
} {
  const a = input.assignment
  const name = podName(a.attemptId)
  const labels = {
    [KUBE_LABELS.managedBy]: 'iris',
    [KUBE_LABELS.platform]: labelValue(opts.platformId),
    [KUBE_LABELS.job]: labelValue(a.jobId),
    [KUBE_LABELS.task]: String(a.taskIndex),
    [KUBE_LABELS.attempt]: String(a.attempt),
  }
  const specs = a.spec.secrets ?? {}
  const annotations = {
    [ATTEMPT_ANNOTATION]: a.attemptId,
    ...(Object.keys(specs).length > 0 ? { [SECRET_SPECS_ANNOTATION]: JSON.stringify(specs) } : {}),
  }
  const metadata = { name, namespace: opts.namespace, labels, annotations }
  const secretNames = Object.keys(input.secretEnv).sort()
  const env: V1EnvVar[] = [
    ...Object.entries(input.env)
      .filter(([k]) => !(k in input.secretEnv))
      .map(([k, value]) => ({ name: k, value })),
    ...secretNames.map((k) => ({ name: k, valueFrom: { secretKeyRef: { name, key: k } } })),
  ]
  const r = a.spec.resources
  const requests: Record<string, string> = { cpu: cpuQuantity(r.cpu), memory: String(r.memory) }
  const limits: Record<string, string> = { ...requests }
  if (r.gpu > 0) requests['nvidia.com/gpu'] = limits['nvidia.com/gpu'] = String(r.gpu)
  const volumes = opts.volumes ?? []
  const volumeMounts = [
    { name: 'workspace', mountPath: '/workspace' },
    ...volumes.map((v) => ({
      name: v.name,
      mountPath: v.mountPath,
      ...(v.readOnly ? { readOnly: true } : {}),
    })),
  ]
  // `--mount`: materialized by the iris CLI (`iris materialize`) in an init container of the platform's image,
  // from the store on a volume, into the workspace; the task finds them as on a worker (IRIS_MOUNT_*, IRIS_MOUNTS).
  const mounts = a.spec.mounts
  if (mounts.length > 0) {
    if (!opts.mountStore) throw new Error('podManifests: a job with mounts needs mountStore')
    for (const m of mounts) env.push({ name: mountEnvName(m.path), value: `/workspace/${m.path}` })
    env.push({
      name: 'IRIS_MOUNTS',
      value: JSON.stringify(Object.fromEntries(mounts.map((m) => [m.path, `/workspace/${m.path}`]))),
    })
  }
  const initContainers =
    mounts.length > 0
      ? [
          {
            name: 'mounts',
            image: opts.defaultImage,
            command: [...(opts.mountCommand ?? IMAGE_IRIS)],
            args: [
              'materialize',
              '--store',
              opts.mountStore!,
              '--dest',
              '/workspace',
              ...mounts.map((m) => `${m.version === undefined ? m.artifact : `${m.artifact}@${m.version}`}:${m.path}`),
            ],
            // Why a mount failed is the container's last output (`terminated.message`).
            terminationMessagePolicy: 'FallbackToLogsOnError',
            volumeMounts,
          },
        ]
      : undefined
  const pod: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata,
    spec: {
      restartPolicy: 'Never',
      priorityClassName: `iris-${a.spec.priority}`,
      // Tasks talk to iris with their job token, never to the Kubernetes API.
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      ...(opts.serviceAccountName ? { serviceAccountName: opts.serviceAccountName } : {}),
      terminationGracePeriodSeconds: Math.ceil(opts.killGraceMs / 1000),
      containers: [
        {
          name: TASK_CONTAINER,
          image: a.spec.image ?? opts.defaultImage,
          ...(opts.stderr === 'merged'
            ? { command: [...a.spec.command] }
            : { command: ['/bin/sh', '-c', STDERR_WRAPPER, 'iris-task'], args: [...a.spec.command] }),
          workingDir: '/workspace',
          env,
          resources: { requests, limits },
          volumeMounts,
        },
      ],
      ...(initContainers ? { initContainers } : {}),
      volumes: [
        { name: 'workspace', emptyDir: {} },
        ...volumes.map((v) => ({
          name: v.name,
          persistentVolumeClaim: { claimName: v.claimName, ...(v.readOnly ? { readOnly: true } : {}) },
        })),
      ],
    },
  }
  if (secretNames.length === 0) return { pod }
  const data = Object.fromEntries(secretNames.map((k) => [k, Buffer.from(input.secretEnv[k]!).toString('base64')]))
  return { secret: { apiVersion: 'v1', kind: 'Secret', metadata, type: 'Opaque', data }, pod }
}

/** The variable naming a mount's path, as on a worker (`data/ckpt` → `IRIS_MOUNT_DATA_CKPT`). */
const mountEnvName = (path: string) => `IRIS_MOUNT_${path.replace(/[^A-Za-z0-9]/g, '_').toUpperCase()}`

/** Reasons Kubernetes gives when a Pod ends through no fault of its task: retried as a lost worker. */
const DISRUPTIONS = new Set([
  'Evicted',
  'Preempting',
  'NodeLost',
  'NodeShutdown',
  'Terminated',
  'DeletionByTaintManager',
  'TerminationByKubelet',
  'UnexpectedAdmissionError',
  'NodeAffinity',
  'OutOfcpu',
  'OutOfmemory',
])

export type PodVerdict =
  | { final: false; running: boolean; note?: string }
  | { final: true; state: 'SUCCEEDED' | 'FAILED' | 'WORKER_FAILED'; exitCode?: number; error?: string }

const limitOf = (pod: V1Pod) => pod.spec?.containers?.[0]?.resources?.limits?.memory

/** What a Pod's status means for its attempt. */
export function podVerdict(pod: V1Pod): PodVerdict {
  const st = pod.status ?? {}
  const c = st.containerStatuses?.find((s) => s.name === TASK_CONTAINER)
  const term = c?.state?.terminated
  const disruption =
    (st.reason && DISRUPTIONS.has(st.reason) ? st.reason : undefined) ??
    st.conditions?.find((x) => x.type === 'DisruptionTarget' && x.status === 'True')?.reason
  if (st.phase === 'Succeeded') return { final: true, state: 'SUCCEEDED', exitCode: term?.exitCode ?? 0 }
  if (st.phase === 'Failed') {
    if (disruption && term?.reason !== 'OOMKilled')
      return {
        final: true,
        state: 'WORKER_FAILED',
        error: `pod ${pod.metadata?.name} ${disruption}${st.message ? `: ${st.message}` : ''}`,
      }
    const init = st.initContainerStatuses?.find((s) => s.state?.terminated && s.state.terminated.exitCode !== 0)?.state
      ?.terminated
    if (init && !term)
      return {
        final: true,
        state: 'FAILED',
        exitCode: init.exitCode,
        error: `mount failed (init container exit ${init.exitCode})${init.message ? `: ${init.message.trim()}` : ''}`,
      }
    const why = term?.reason ?? st.reason ?? 'Failed'
    const exitCode = term?.exitCode
    const detail = term?.message ?? st.message
    return {
      final: true,
      state: 'FAILED',
      ...(exitCode !== undefined ? { exitCode } : {}),
      error:
        why === 'OOMKilled'
          ? `OOMKilled: the task used more than its memory limit (${limitOf(pod)} bytes)`
          : `pod ${why}${exitCode !== undefined ? ` (exit ${exitCode})` : ''}${detail ? `: ${detail}` : ''}`,
    }
  }
  if (st.phase === 'Running') return { final: false, running: true }
  const waiting = c?.state?.waiting
  const unsched = st.conditions?.find((x) => x.type === 'PodScheduled' && x.status === 'False')
  const note = waiting?.reason
    ? `${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`
    : unsched?.reason
      ? `${unsched.reason}${unsched.message ? `: ${unsched.message}` : ''}`
      : undefined
  return { final: false, running: false, ...(note ? { note } : {}) }
}
