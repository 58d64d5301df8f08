/** @module The long-running commands of `iris`: controller, worker and `cluster start --local`. Loaded when one runs.
 * */
import { join, resolve } from 'node:path'
import { localMarinPrefix, MARIN_LAYOUT, marinPrefix, prefixPath } from '@marin/rigging'
import { UsageError } from '@marin/rigging/cli'
import { Option, type Command } from 'commander'
import { DEFAULT_CONTROLLER, intArg, tlsCaOption, tlsOf, tokenOf, type CliIo } from './cli-io.js'
import { startController } from './controller-server.js'
import { ensureTokenFile, readTokenFile, tokenPathFor } from './credentials.js'
import { parseDuration } from './duration.js'
import { grpcLink } from './grpc-link.js'
import { checkAdvertise, localAddressToward } from './cli-advertise.js'
import { isIrisError } from './errors.js'
import { kubernetesPlatform } from './kube-platform.js'
import { LocalCluster } from './local-cluster.js'
import { checkMountPath, parseMount } from './mount-spec.js'
import { finestoreMounts } from './mounts.js'
import { parseResources } from './resources.js'
import { Worker } from './worker.js'

export function defineController(cmd: Command, io: CliIo): void {
  cmd
    .option('--host <host>', 'interface to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0 picks one)', intArg('a port'), 10000)
    .option('--state <path>', 'SQLite state file (default: <prefix>/iris/iris.sqlite)')
    .option('--prefix <dir>', 'marin prefix (default: $MARIN_PREFIX, then ./.marin)')
    .option('--advertise <address>', 'address workers and tasks use to reach this controller')
    .addOption(new Option('--token-env <name>', 'environment variable holding the cluster token').default('IRIS_TOKEN'))
    .option(
      '--token-file <path>',
      'file holding the cluster token (default: a 0600 file "token" beside the state, made if missing)',
    )
    .option('--no-auth', 'serve without any token: anyone who reaches the port may run commands as this account')
    .option('--tls-cert <path>', 'serve TLS with this certificate chain (PEM); needs --tls-key')
    .option('--tls-key <path>', 'private key (PEM) of --tls-cert')
    .option('--heartbeat <duration>', 'longest a worker heartbeat waits for work', '5s')
    .option('--worker-timeout <duration>', 'a worker silent this long is lost', '30s')
    .action(async (o) => {
      if (Boolean(o.tlsCert) !== Boolean(o.tlsKey))
        throw new UsageError('controller: --tls-cert and --tls-key go together; pass both PEM files or neither')
      const statePath = resolve(
        o.state ?? join(localMarinPrefix({ prefix: o.prefix, env: io.env }), MARIN_LAYOUT.irisState),
      )
      let token: string | undefined
      let tokenNote = 'no auth: the API is open to anyone who reaches it'
      if (o.auth) {
        const given = o.tokenFile !== undefined ? tokenOf(o, io) : io.env[o.tokenEnv] || undefined
        if (given) {
          token = given
          tokenNote = `token from ${o.tokenFile ?? `$${o.tokenEnv}`}`
        } else {
          const path = tokenPathFor(statePath)
          token = ensureTokenFile(path)
          tokenNote = `token in ${path}`
        }
      }
      const server = await startController({
        statePath,
        host: o.host,
        port: o.port,
        heartbeatMs: parseDuration(o.heartbeat, '--heartbeat'),
        workerTimeoutMs: parseDuration(o.workerTimeout, '--worker-timeout'),
        ...(o.advertise ? { advertise: o.advertise } : {}),
        ...(token ? { token } : {}),
        ...(o.tlsCert ? { tls: { certFile: resolve(o.tlsCert), keyFile: resolve(o.tlsKey) } } : {}),
      })
      io.out(
        `iris controller listening on ${server.address} (state ` +
          `${statePath}; ${tokenNote}; ${o.tlsCert ? 'TLS' : 'plaintext'})`,
      )
      await io.stopped
      await server.close({ graceMs: 2000 })
    })
}

export function defineWorker(cmd: Command, io: CliIo): void {
  cmd
    .addOption(
      new Option('--controller <address>', 'controller host:port').default(
        io.env.IRIS_CONTROLLER || DEFAULT_CONTROLLER,
      ),
    )
    .addOption(new Option('--token-env <name>', 'environment variable holding the cluster token').default('IRIS_TOKEN'))
    .option(
      '--token-file <path>',
      'file holding the cluster token (default: IRIS_TOKEN_FILE, then <MARIN_PREFIX>/iris/token)',
    )
    .addOption(tlsCaOption(io))
    .option('--work-dir <dir>', 'where task directories go (default: <prefix>/iris/work)')
    .option('--worker-id <id>', 'stable worker id (default: hostname plus a random suffix)')
    .option(
      '--advertise <host[:port]>',
      'address the controller and other hosts reach this worker at (default: the local address of the ' +
        'connection to the controller)',
    )
    .option('--resources <spec>', 'what this worker offers (default: all cpus and memory, gpu=0)')
    .option('--kill-grace <duration>', 'time between SIGTERM and SIGKILL', '10s')
    .option('--cleanup-ttl <duration>', 'delete finished task directories after this long', '1d')
    .option('--store <url>', 'finestore root for --mount (default: <prefix>/store)')
    .option('--retry-delay <duration>', 'pause after a failed call to the controller', '1s')
    .action(async (o) => {
      const token = tokenOf(o, io)
      const resources = o.resources ? parseResources(o.resources, { cpu: 1, memory: 0, gpu: 0 }) : undefined
      const tls = tlsOf(o)
      const link = grpcLink(o.controller, { ...(token ? { token } : {}), ...(tls ? { tls } : {}) })
      const store = o.store ?? prefixPath(marinPrefix({ env: io.env }), MARIN_LAYOUT.store)
      const address: string | (() => Promise<string>) = o.advertise
        ? await checkAdvertise(o.advertise, o.controller)
        : () => localAddressToward(o.controller)
      const worker = new Worker({
        link,
        controllerAddress: o.controller,
        workDir: o.workDir ?? join(localMarinPrefix({ env: io.env }), MARIN_LAYOUT.irisWork),
        ...(o.workerId ? { workerId: o.workerId } : {}),
        address,
        ...(resources ? { resources } : {}),
        killGraceMs: parseDuration(o.killGrace, '--kill-grace'),
        cleanupTtlMs: parseDuration(o.cleanupTtl, '--cleanup-ttl'),
        retryDelayMs: parseDuration(o.retryDelay, '--retry-delay'),
        materialize: finestoreMounts(store),
        // Tasks reach a TLS controller with the same CA; their token is their job's own.
        ...(tls ? { extraEnv: { IRIS_TLS_CA: tls.caFile! } } : {}),
      })
      await worker.start()
      io.out(`iris worker ${worker.workerId} registered with ${o.controller} as ${worker.address ?? '?'}`)
      await io.stopped
      await worker.stop({ killTasks: true })
      link.close()
    })
}

/** `iris cluster start --local`: a controller and workers in this process; `--platform k8s`: tasks as Pods. */
export function defineCluster(cmd: Command, io: CliIo): void {
  cmd
    .command('start')
    .description('start a controller and workers in this process, or a controller that runs tasks as Kubernetes Pods')
    .option('--local', 'run everything in this process (same as --platform local)')
    .option('--platform <platform>', 'local: workers in this process; k8s: each task a Pod in --namespace')
    .option('--namespace <ns>', 'k8s: the namespace of task Pods')
    .option('--kubeconfig <path>', 'k8s: kubeconfig file (default: KUBECONFIG, ~/.kube/config, then in-cluster)')
    .option('--image <image>', 'k8s: image of tasks whose job names none', 'marin-ts:latest')
    .option('--volume <claim:path>', 'k8s: mount a PersistentVolumeClaim into every task Pod (repeatable)', collect, [])
    .option('--pod-ttl <duration>', 'k8s: delete finished Pods this long after they end', '1h')
    .option('--advertise <address>', 'k8s: the controller address task Pods use (default: the bound address)')
    .option(
      '--mount-store <url>',
      'k8s: the finestore store as task Pods see it (e.g. file:///data/.marin/store on a --volume); enables --mount',
    )
    .addOption(
      new Option('--pod-stderr <mode>', 'k8s: tagged (stderr apart from stdout; needs /bin/sh) or merged')
        .choices(['tagged', 'merged'])
        .default('tagged'),
    )
    .option('--host <host>', 'interface the controller listens on', '127.0.0.1')
    .option(
      '--token-file <path>',
      'file holding the cluster token (default: <prefix>/iris/token, made 0600 if missing)',
    )
    .option('--prefix <dir>', 'where state and task directories go (default: $MARIN_PREFIX, then ./.marin)')
    .option('--port <port>', 'controller port (0 picks one)', intArg('a port'), 10000)
    .option('--workers <n>', 'number of workers', intArg('a worker count', 1), 1)
    .option('--resources <spec>', 'resources of each worker (default: the whole machine)')
    .action(async (o) => {
      const platform = o.platform ?? (o.local ? 'local' : undefined)
      if (platform === undefined)
        throw new UsageError(
          'cluster start: give --local (or --platform local), or --platform k8s --namespace NS; start "iris ' +
            'controller" and "iris worker" on hosts for a cluster of hosts',
        )
      if (platform !== 'local' && platform !== 'k8s')
        throw new UsageError(`cluster start: --platform is local or k8s, not "${platform}"`)
      if (platform === 'k8s' && !o.namespace)
        throw new UsageError('cluster start: --platform k8s needs --namespace NS (the namespace of task Pods)')
      const prefix = localMarinPrefix({ prefix: o.prefix, env: io.env })
      const resources = o.resources ? parseResources(o.resources, { cpu: 1, memory: 0, gpu: 0 }) : undefined
      const kubernetes = platform === 'k8s' ? await kubernetesOf(o) : undefined
      const c = await LocalCluster.start({
        prefix,
        port: o.port,
        host: o.host,
        ...(o.tokenFile ? { token: readTokenFile(resolve(o.tokenFile), '--token-file') } : {}),
        workers: o.workers,
        ...(resources ? { resources } : {}),
        ...(kubernetes ? { kubernetes } : {}),
        materialize: finestoreMounts(prefixPath(marinPrefix({ prefix }), MARIN_LAYOUT.store)),
      })
      io.out(
        `iris ${kubernetes ? `k8s cluster (namespace ${o.namespace})` : 'local cluster'} on ${c.address} ` +
          `(prefix ${c.prefix}); export IRIS_CONTROLLER=${c.address} IRIS_TOKEN_FILE=${c.tokenFile}`,
      )
      await io.stopped
      // Task Pods outlive the controller: the next start on this prefix adopts them (an upgrade restarts none).
      await c.stop({ keepPods: kubernetes !== undefined })
    })
}

/** `iris materialize`: what the init container of a task Pod with `--mount` runs (`kube-pods.ts`). */
export function defineMaterialize(cmd: Command, io: CliIo): void {
  cmd
    .requiredOption('--store <url>', 'the finestore store to read')
    .requiredOption('--dest <dir>', 'the task directory; each mount lands at <dir>/<path>')
    .argument('<mounts...>', 'ARTIFACT[@VERSION]:path, as in iris submit --mount')
    .action(async (mounts: string[], o: { store: string; dest: string }) => {
      const materialize = finestoreMounts(o.store)
      for (const text of mounts) {
        const m = parseMount(text)
        await materialize(m, join(resolve(o.dest), checkMountPath(m.path)))
        io.out(`mounted ${text}`)
      }
    })
}

const collect = (v: string, all: string[] = []) => [...all, v]

async function kubernetesOf(o: Record<string, string | string[] | undefined>) {
  try {
    return await kubernetesPlatform({
      namespace: o.namespace as string,
      image: o.image as string,
      volumes: o.volume as string[],
      podTtlMs: parseDuration(o.podTtl as string, '--pod-ttl'),
      stderr: o.podStderr as 'tagged' | 'merged',
      ...(o.mountStore ? { mountStore: o.mountStore as string } : {}),
      ...(o.kubeconfig ? { kubeconfig: o.kubeconfig as string } : {}),
      ...(o.advertise ? { advertise: o.advertise as string } : {}),
    })
  } catch (err) {
    if (isIrisError(err, 'BAD_REQUEST'))
      throw new UsageError(`cluster start: ${err.message} (--namespace, --kubeconfig, --volume, --pod-stderr)`)
    throw err
  }
}
