/**
 * @module The one source of `infra/`: the Kubernetes manifests (controller with its RBAC and state volume, CPU
 * workers, GPU workers, the shared data volume, the PriorityClasses of the bands), the image's Dockerfile and its
 * `.dockerignore`, and the systemd units of bare hosts. `pnpm exec tsx infra/generate.ts` writes them; a test
 * checks the files are what this makes and validates every manifest against the Kubernetes OpenAPI types.
 */
import { stringify } from 'yaml'
import { KUBE_RBAC_RULES, PRIORITY_CLASS_VALUES } from './kube-pod-spec.js'
import { PRIORITIES } from './states.js'

type Obj = Record<string, unknown>

const IMAGE = 'marin-ts:latest'
const GPU_IMAGE = 'marin-ts-gpu:latest'
const TOKEN_SECRET = 'iris-token'
const DATA_CLAIM = 'marin-data'
/** How every worker (a Pod or a systemd unit) authenticates, ends its tasks (SIGTERM, then SIGKILL after the grace;
 * the unit's TimeoutStopSec and the Pod's terminationGracePeriodSeconds leave room for it) and keeps finished
 * tasks' files. */
const WORKER_LIFECYCLE_ARGS = ['--token-file', '/etc/iris/token', '--kill-grace', '30s', '--cleanup-ttl', '1d']

const tokenVolume = {
  name: 'token',
  secret: { secretName: TOKEN_SECRET, defaultMode: 0o400, items: [{ key: 'token', path: 'token' }] },
}
const podEnv = [
  { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
  { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
  { name: 'MARIN_PREFIX', value: '/data/.marin' },
  { name: 'LOG_FORMAT', value: 'json' },
]

function controller(): Obj[] {
  const labels = { app: 'iris-controller' }
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'iris-controller' } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'iris-controller' },
      rules: KUBE_RBAC_RULES.map((r) => ({
        apiGroups: [...r.apiGroups],
        resources: [...r.resources],
        verbs: [...r.verbs],
      })),
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'iris-controller' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'iris-controller' },
      subjects: [{ kind: 'ServiceAccount', name: 'iris-controller' }],
    },
    {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'iris-controller-state' },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '10Gi' } } },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'iris-controller', labels },
      spec: {
        replicas: 1,
        // Never two controllers on one state file: the old pod stops before the new one starts.
        strategy: { type: 'Recreate' },
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: 'iris-controller',
            containers: [
              {
                name: 'controller',
                image: IMAGE,
                env: podEnv,
                args: [
                  'cluster',
                  'start',
                  '--platform',
                  'k8s',
                  '--namespace',
                  '$(POD_NAMESPACE)',
                  '--host',
                  '0.0.0.0',
                  '--port',
                  '10000',
                  '--prefix',
                  '/var/lib/iris',
                  '--token-file',
                  '/etc/iris/token',
                  '--advertise',
                  'iris-controller:10000',
                  '--image',
                  IMAGE,
                  '--volume',
                  `${DATA_CLAIM}:/data`,
                  // The store the CPU and GPU workers use, as task Pods see it: `--mount` works on Pods too.
                  '--mount-store',
                  'file:///data/.marin/store',
                  '--pod-ttl',
                  '1h',
                ],
                ports: [{ containerPort: 10000, name: 'grpc' }],
                volumeMounts: [
                  { name: 'state', mountPath: '/var/lib/iris' },
                  { name: 'token', mountPath: '/etc/iris', readOnly: true },
                ],
                readinessProbe: { tcpSocket: { port: 'grpc' }, periodSeconds: 5 },
                resources: { requests: { cpu: '500m', memory: '512Mi' }, limits: { memory: '2Gi' } },
              },
            ],
            volumes: [{ name: 'state', persistentVolumeClaim: { claimName: 'iris-controller-state' } }, tokenVolume],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'iris-controller' },
      spec: { selector: labels, ports: [{ name: 'grpc', port: 10000, targetPort: 'grpc' }] },
    },
  ]
}

function workers(kind: 'cpu' | 'gpu'): Obj {
  const labels = { app: `iris-worker-${kind}` }
  const gpu = kind === 'gpu'
  const limits = gpu ? { cpu: '8', memory: '32Gi', 'nvidia.com/gpu': '1' } : { cpu: '4', memory: '16Gi' }
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: `iris-worker-${kind}`, labels },
    spec: {
      replicas: gpu ? 1 : 2,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          // Long enough for the worker to SIGTERM its tasks and wait their grace period.
          terminationGracePeriodSeconds: 60,
          automountServiceAccountToken: false,
          ...(gpu ? { tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }] } : {}),
          containers: [
            {
              name: 'worker',
              image: gpu ? GPU_IMAGE : IMAGE,
              env: [
                ...podEnv,
                // Dawn (levanter's WebGPU backend) reaches the GPU through Vulkan: the NVIDIA runtime mounts the
                // driver's Vulkan ICD only with the graphics capability.
                ...(gpu ? [{ name: 'NVIDIA_DRIVER_CAPABILITIES', value: 'compute,utility,graphics' }] : []),
              ],
              args: [
                'worker',
                '--controller',
                'iris-controller:10000',
                '--worker-id',
                '$(POD_NAME)',
                '--work-dir',
                '/scratch/iris/work',
                '--resources',
                gpu ? 'cpu=8,memory=32Gi,gpu=1' : 'cpu=4,memory=16Gi,gpu=0',
                '--store',
                'file:///data/.marin/store',
                ...WORKER_LIFECYCLE_ARGS,
              ],
              resources: { requests: limits, limits },
              volumeMounts: [
                { name: 'scratch', mountPath: '/scratch' },
                { name: 'data', mountPath: '/data' },
                { name: 'token', mountPath: '/etc/iris', readOnly: true },
              ],
            },
          ],
          volumes: [
            { name: 'scratch', emptyDir: {} },
            { name: 'data', persistentVolumeClaim: { claimName: DATA_CLAIM } },
            tokenVolume,
          ],
        },
      },
    },
  }
}

function data(): Obj {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: DATA_CLAIM },
    // Shared by the controller's task Pods and every worker: a ReadWriteMany class (NFS, Filestore, EFS …).
    spec: { accessModes: ['ReadWriteMany'], resources: { requests: { storage: '1Ti' } } },
  }
}

function priorityClasses(): Obj[] {
  return PRIORITIES.map((p) => ({
    apiVersion: 'scheduling.k8s.io/v1',
    kind: 'PriorityClass',
    metadata: { name: `iris-${p}` },
    value: PRIORITY_CLASS_VALUES[p],
    globalDefault: false,
    // Only production preempts; the other bands wait for room.
    preemptionPolicy: p === 'production' ? 'PreemptLowerPriority' : 'Never',
    description: `iris tasks of the ${p} band`,
  }))
}

const DOCKERFILE = `# The marin-ts workspace image: every package from source, run through tsx. Generated from
# packages/iris/src/kube-manifests.ts; do not edit by hand. Build from the repository root:
#   docker build -f infra/Dockerfile -t marin-ts .                  (CPU)
#   docker build -f infra/Dockerfile --target gpu -t marin-ts-gpu . (CUDA + Vulkan, for levanter's WebGPU backend)
# The image's entry point is the iris CLI; Kubernetes and systemd pass the subcommand.

FROM node:20-bookworm-slim AS build
# build tools for better-sqlite3's native addon
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \\
 && rm -rf /var/lib/apt/lists/*
RUN npm install -g pnpm@12.4.2
WORKDIR /opt/marin-ts
COPY . .
RUN pnpm install --frozen-lockfile

FROM node:20-bookworm-slim AS cpu
# util-linux gives setpriv, which iris uses so that a task dies with its worker; ca-certificates for object stores.
RUN apt-get update \\
 && apt-get install -y --no-install-recommends util-linux ca-certificates \\
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/marin-ts /opt/marin-ts
WORKDIR /opt/marin-ts
ENV MARIN_PREFIX=/data/.marin \\
    LOG_FORMAT=json
VOLUME ["/data"]
EXPOSE 10000
ENTRYPOINT ["node", "/opt/marin-ts/packages/iris/bin/iris.js"]
CMD ["controller", "--host", "0.0.0.0", "--port", "10000", "--prefix", "/data/.marin"]

# GPU workers: CUDA's base image with the Vulkan loader; the NVIDIA container runtime adds the driver and its
# Vulkan ICD (NVIDIA_DRIVER_CAPABILITIES must include graphics), which Dawn uses.
FROM nvidia/cuda:12.6.3-base-ubuntu24.04 AS gpu
RUN apt-get update \\
 && apt-get install -y --no-install-recommends libvulkan1 vulkan-tools util-linux ca-certificates \\
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/node /usr/local/bin/node
COPY --from=build /opt/marin-ts /opt/marin-ts
WORKDIR /opt/marin-ts
ENV MARIN_PREFIX=/data/.marin \\
    LOG_FORMAT=json \\
    NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics
VOLUME ["/data"]
ENTRYPOINT ["node", "/opt/marin-ts/packages/iris/bin/iris.js"]
CMD ["worker", "--resources", "cpu=8,memory=32Gi,gpu=1"]

FROM cpu
`

// BuildKit reads <Dockerfile>.dockerignore beside the Dockerfile.
const DOCKERIGNORE = `# Generated from packages/iris/src/kube-manifests.ts.
**/node_modules
**/.marin
site
.git
**/*.log
**/.vitest-tmp
**/dist
**/native/build
`

/** A systemd unit: its sections in order, each a list of `Key=value` pairs (a key may repeat). */
export type SystemdUnit = { header: string; sections: [string, [string, string][]][] }

const IRIS_JS = '/opt/marin-ts/packages/iris/bin/iris.js'

/** The systemd units of `infra/systemd`, by file name (`infraFiles` renders them). */
export function systemdUnits(): Record<string, SystemdUnit> {
  const after: [string, string][] = [
    ['After', 'network-online.target'],
    ['Wants', 'network-online.target'],
  ]
  const common: [string, string][] = [
    ['User', 'iris'],
    ['Environment', 'LOG_FORMAT=json'],
    ['Environment', 'MARIN_PREFIX=/var/lib/marin'],
    ['WorkingDirectory', '/opt/marin-ts'],
  ]
  const install: [string, [string, string][]] = ['Install', [['WantedBy', 'multi-user.target']]]
  return {
    'iris-controller.service': {
      header:
        'iris controller on a bare host. Install the workspace at /opt/marin-ts\n' +
        '(pnpm install), put the token in /etc/iris/token (mode 0600, owner iris),\n' +
        'then: systemctl enable --now iris-controller',
      sections: [
        ['Unit', [['Description', 'iris controller (job scheduler state and API)'], ...after]],
        [
          'Service',
          [
            ...common,
            [
              'ExecStart',
              [
                '/usr/bin/node',
                IRIS_JS,
                'controller',
                '--host',
                '0.0.0.0',
                '--port',
                '10000',
                '--state',
                '/var/lib/iris/iris.sqlite',
                '--token-file',
                '/etc/iris/token',
                '--worker-timeout',
                '60s',
              ].join(' '),
            ],
            // SIGTERM lets in-flight calls finish; the state is consistent at any instant anyway.
            ['KillSignal', 'SIGTERM'],
            ['TimeoutStopSec', '30'],
            ['Restart', 'always'],
            ['RestartSec', '2'],
            ['StateDirectory', 'iris'],
          ],
        ],
        install,
      ],
    },
    'iris-worker.service': {
      header:
        "iris worker on a bare host. Set the controller's address in\n" +
        '/etc/iris/worker.env (IRIS_CONTROLLER=controller-host:10000), the token in\n' +
        '/etc/iris/token, then: systemctl enable --now iris-worker',
      sections: [
        ['Unit', [['Description', 'iris worker (runs tasks for the iris controller)'], ...after]],
        [
          'Service',
          [
            ['EnvironmentFile', '/etc/iris/worker.env'],
            ...common,
            [
              'ExecStart',
              [
                '/usr/bin/node',
                IRIS_JS,
                'worker',
                '--controller',
                // biome-ignore lint/suspicious/noTemplateCurlyInString: systemd expands it from EnvironmentFile
                '${IRIS_CONTROLLER}',
                '--work-dir',
                '/var/lib/iris-worker/work',
                '--store',
                'file:///var/lib/marin/store',
                ...WORKER_LIFECYCLE_ARGS,
              ].join(' '),
            ],
            // The worker SIGTERMs its tasks and waits up to --kill-grace for them; the rest of the group is
            // SIGKILLed after TimeoutStopSec.
            ['KillSignal', 'SIGTERM'],
            ['KillMode', 'mixed'],
            ['TimeoutStopSec', '60'],
            ['Restart', 'always'],
            ['RestartSec', '2'],
            ['StateDirectory', 'iris-worker'],
          ],
        ],
        install,
      ],
    },
  }
}

/** The text of a unit file. */
export function renderUnit(u: SystemdUnit): string {
  const lines = [
    ...u.header.split('\n').map((l) => `# ${l}`),
    '# Generated from packages/iris/src/kube-manifests.ts; do not edit by hand.',
  ]
  for (const [name, keys] of u.sections) {
    lines.push(`[${name}]`, ...keys.map(([k, v]) => `${k}=${v}`))
    if (name !== u.sections.at(-1)![0]) lines.push('')
  }
  return `${lines.join('\n')}\n`
}

const yamlOf = (header: string, docs: Obj[]) =>
  `# ${header}\n# Generated from packages/iris/src/kube-manifests.ts; do not edit by hand.\n` +
  docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n')

/** Every generated file of `infra/`, by path relative to it. */
export function infraFiles(): Record<string, string> {
  return {
    Dockerfile: DOCKERFILE,
    'Dockerfile.dockerignore': DOCKERIGNORE,
    'k8s/iris-controller.yaml': yamlOf(
      'The iris controller: it runs tasks as Pods in its namespace. First:\n' +
        '#   kubectl create secret generic iris-token --from-literal=token="$(openssl rand -hex 32)"',
      controller(),
    ),
    'k8s/iris-worker-cpu.yaml': yamlOf(
      'iris CPU workers: each pod registers with the controller and runs tasks as processes.',
      [workers('cpu')],
    ),
    'k8s/iris-worker-gpu.yaml': yamlOf('iris GPU workers: one GPU each, CUDA + Vulkan image.', [workers('gpu')]),
    'k8s/marin-data.yaml': yamlOf('The shared data volume: the marin prefix (finestore store, step outputs).', [
      data(),
    ]),
    'k8s/priority-classes.yaml': yamlOf('The PriorityClasses of iris priority bands.', priorityClasses()),
    ...Object.fromEntries(Object.entries(systemdUnits()).map(([f, u]) => [`systemd/${f}`, renderUnit(u)])),
  }
}
