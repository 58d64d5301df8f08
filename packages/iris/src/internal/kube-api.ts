/**
 * @module Test support: a Kubernetes API server on loopback with the subset iris uses (pods create, get, list,
 * watch, delete and log follow; secrets create, get, delete), with Kubernetes' semantics: every change gets a new
 * `resourceVersion`; a watch sends ADDED, MODIFIED and DELETED events after the version it was given, and an
 * ERROR event with a `410 Gone` Status when that version was compacted away; 404 for what does not exist, 409 for
 * a name that does, 401 without the bearer token. The test plays the kubelet: it sets Pod phases, appends output,
 * evicts and deletes Pods; or `startKubelet` runs each new Pod's container command as a process on this machine.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { mkdtempSync } from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { KubeConfig, type V1Pod } from '@kubernetes/client-node'

type Obj = {
  metadata: {
    name: string
    namespace: string
    resourceVersion?: string
    uid?: string
    labels?: Record<string, string>
    creationTimestamp?: string
    deletionTimestamp?: string
  }
  [k: string]: unknown
}
type Event = { rv: number; type: 'ADDED' | 'MODIFIED' | 'DELETED'; kind: 'pods' | 'secrets'; obj: Obj }

export type ApiCall = { method: string; path: string; query: Record<string, string> }

export class FakeKubeApi {
  private rv = 100
  private readonly store = { pods: new Map<string, Obj>(), secrets: new Map<string, Obj>() }
  private events: Event[] = []
  private compactedThrough = 0
  private readonly logs = new Map<string, string[]>()
  private readonly changes = new EventEmitter()
  /** Every request, in order. */
  readonly calls: ApiCall[] = []
  private readonly watches = new Set<ServerResponse>()

  private constructor(
    private readonly server: Server,
    readonly token: string,
  ) {
    this.changes.setMaxListeners(0)
  }

  static async start(token = randomBytes(16).toString('hex')): Promise<FakeKubeApi> {
    let api!: FakeKubeApi
    const server = createServer((req, res) => api.handle(req, res))
    api = new FakeKubeApi(server, token)
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    return api
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  /** A client configuration pointing at this server, with its token. */
  kubeConfig(namespace = 'default'): KubeConfig {
    const kc = new KubeConfig()
    kc.loadFromOptions({
      clusters: [{ name: 'loopback', server: this.url, skipTLSVerify: true }],
      users: [{ name: 'iris', token: this.token }],
      contexts: [{ name: 'loopback', cluster: 'loopback', user: 'iris', namespace }],
      currentContext: 'loopback',
    })
    return kc
  }

  /** The same, as a kubeconfig file's text (for `--kubeconfig` / `KUBECONFIG`). */
  kubeConfigYaml(namespace = 'default'): string {
    return this.kubeConfig(namespace).exportConfig()
  }

  async close(): Promise<void> {
    for (const w of this.watches) w.end()
    this.server.closeAllConnections()
    await new Promise<void>((r) => this.server.close(() => r()))
  }

  pods(namespace?: string): V1Pod[] {
    return [...this.store.pods.values()].filter((p) => !namespace || p.metadata.namespace === namespace) as V1Pod[]
  }

  secret(namespace: string, name: string): Obj | undefined {
    return this.store.secrets.get(`${namespace}/${name}`)
  }

  /** Resolves with the first Pod (present now or later) for which `pred` holds. */
  waitForPod(pred: (p: V1Pod) => boolean, what: string, timeoutMs = 30_000): Promise<V1Pod> {
    return this.waitFor(() => this.pods().find(pred), what, timeoutMs)
  }

  /** Resolves when `probe` returns something, checked after every change. */
  waitFor<T>(probe: () => T | undefined, what: string, timeoutMs = 30_000): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const v = probe()
        if (v === undefined) return
        clearTimeout(timer)
        this.changes.off('change', check)
        resolve(v)
      }
      const timer = setTimeout(() => {
        this.changes.off('change', check)
        reject(new Error(`timed out waiting for ${what}`))
      }, timeoutMs)
      this.changes.on('change', check)
      check()
    })
  }

  // ---- the kubelet's side ---------------------------------------------------

  /** Sets a Pod's status (merged), as the kubelet would. */
  setStatus(namespace: string, name: string, status: Record<string, unknown>): void {
    const p = this.store.pods.get(`${namespace}/${name}`)
    if (!p) throw new Error(`no pod ${namespace}/${name}`)
    this.put('pods', 'MODIFIED', { ...p, status: { ...((p.status as object) ?? {}), ...status } })
  }

  /** The task container starts. */
  run(namespace: string, name: string): void {
    this.setStatus(namespace, name, {
      phase: 'Running',
      containerStatuses: [
        {
          name: 'task',
          ready: true,
          restartCount: 0,
          image: '',
          imageID: '',
          state: { running: { startedAt: new Date().toISOString() } },
        },
      ],
    })
  }

  /** The task container ends with `exitCode` (and a reason such as OOMKilled). */
  exit(namespace: string, name: string, exitCode: number, reason?: string): void {
    this.setStatus(namespace, name, {
      phase: exitCode === 0 ? 'Succeeded' : 'Failed',
      containerStatuses: [
        {
          name: 'task',
          ready: false,
          restartCount: 0,
          image: '',
          imageID: '',
          state: {
            terminated: {
              exitCode,
              reason: reason ?? (exitCode === 0 ? 'Completed' : 'Error'),
              finishedAt: new Date().toISOString(),
            },
          },
        },
      ],
    })
  }

  /** The kubelet evicts the Pod (node pressure): phase Failed, reason Evicted. */
  evict(namespace: string, name: string): void {
    this.setStatus(namespace, name, {
      phase: 'Failed',
      reason: 'Evicted',
      message: 'The node was low on resource: memory.',
      conditions: [{ type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet' }],
      containerStatuses: [
        {
          name: 'task',
          ready: false,
          restartCount: 0,
          image: '',
          imageID: '',
          state: { terminated: { exitCode: 137, reason: 'Error' } },
        },
      ],
    })
  }

  /** The container writes a line of output. */
  appendLog(namespace: string, name: string, line: string): void {
    const key = `${namespace}/${name}`
    const l = this.logs.get(key) ?? []
    l.push(`${new Date().toISOString()} ${line}`)
    this.logs.set(key, l)
    this.changes.emit('change')
  }

  /** Forgets the event history: watches from any earlier resourceVersion now get 410 Gone. */
  compact(): void {
    // Other objects changed meanwhile: the compaction point is past every version a client has seen.
    this.compactedThrough = ++this.rv
    this.events = []
    // Open watches are closed, as an API server restart would.
    for (const w of this.watches) w.end()
  }

  /**
   * A node on this machine: every Pod of `namespace` created from now on is run (Pending, then Running) as a
   * process of its container's `command` + `args`, with the container's env (`secretKeyRef`s read from the stored
   * Secrets) over `baseEnv` (the image's environment; @default PATH only) and a `TMPDIR` of its own.
   * The image is not pulled: the command
   * must exist here. Volumes are host folders: each `emptyDir` a new folder under `root`, each PVC the folder
   * `claims` names for it (a Pod naming another claim fails with `FailedMount`); `workingDir` and env values under
   * a volume's `mountPath` are rewritten to the host folder, in args too (also as `file://` URLs). Init containers
   * run first, one after the other; one that fails fails the Pod with its last output as the message.
   * Every stdout and stderr line is appended to the Pod's
   * log (which, as in Kubernetes, merges them); the Pod ends Succeeded or Failed with the exit code. Deleting the
   * Pod SIGTERMs the process (SIGKILL after the Pod's grace period). `holdPending` keeps new Pods Pending (waiting
   * with that reason) until `release` is called.
   */
  startKubelet(o: {
    namespace: string
    root: string
    claims?: Record<string, string>
    baseEnv?: Record<string, string>
    holdPending?: { reason: string; message: string }
  }): { release(): void; close(): Promise<void>; readonly started: string[] } {
    const procs = new Map<string, ChildProcess>()
    const seen = new Set<string>()
    const started: string[] = []
    const held: string[] = []
    let hold = o.holdPending
    const launch = (key: string) => {
      const pod = this.store.pods.get(key) as (V1Pod & Obj) | undefined
      if (!pod) return
      const name = pod.metadata.name
      const c = pod.spec!.containers[0]!
      const hostPath = new Map<string, string>()
      for (const v of pod.spec!.volumes ?? []) {
        if (v.emptyDir) hostPath.set(v.name, mkdtempSync(join(o.root, `${v.name}-`)))
        else if (v.persistentVolumeClaim) {
          const dir = o.claims?.[v.persistentVolumeClaim.claimName]
          if (!dir) {
            this.setStatus(o.namespace, name, {
              phase: 'Pending',
              conditions: [{ type: 'PodScheduled', status: 'False', reason: 'FailedMount', message: v.name }],
            })
            return
          }
          hostPath.set(v.name, dir)
        }
      }
      type Container = NonNullable<V1Pod['spec']>['containers'][number]
      const spawnContainer = (ctr: Container) => {
        const mounts = (ctr.volumeMounts ?? []).map((m) => [m.mountPath, hostPath.get(m.name)!] as const)
        const mapPath = (p: string) => {
          const url = p.startsWith('file:///')
          const path = url ? p.slice('file://'.length) : p
          for (const [at, dir] of mounts)
            if (path === at || path.startsWith(`${at}/`)) return `${url ? 'file://' : ''}${dir}${path.slice(at.length)}`
          return p
        }
        const env: Record<string, string> = {
          // A container's own /tmp.
          TMPDIR: mkdtempSync(join(o.root, 'tmp-')),
          ...(o.baseEnv ?? { PATH: process.env.PATH ?? '/usr/bin:/bin' }),
        }
        for (const e of ctr.env ?? []) {
          const ref = e.valueFrom?.secretKeyRef
          if (ref) {
            const data = this.store.secrets.get(`${o.namespace}/${ref.name}`)?.data as
              | Record<string, string>
              | undefined
            env[e.name] = Buffer.from(data?.[ref.key] ?? '', 'base64').toString()
          } else env[e.name] = mapPath(e.value ?? '')
        }
        const argv = [...(ctr.command ?? []), ...(ctr.args ?? []).map(mapPath)]
        const child = spawn(argv[0]!, argv.slice(1), {
          cwd: mapPath(ctr.workingDir ?? o.root),
          env,
          stdio: ['ignore', 'pipe', 'pipe'],
          // The container: SIGKILL reaches every process in it.
          detached: true,
        })
        procs.set(key, child)
        const closed = new Promise<number>((r) =>
          child.once('close', () =>
            r(child.exitCode ?? 128 + ({ SIGTERM: 15, SIGKILL: 9 }[child.signalCode as string] ?? 1)),
          ),
        )
        return { child, closed }
      }
      const status = (ctr: string, state: object) => ({
        name: ctr,
        ready: false,
        restartCount: 0,
        image: '',
        imageID: '',
        state,
      })
      started.push(name)
      // Init containers run one after the other before the task; one that fails fails the Pod (restartPolicy
      // Never), its last output as `terminated.message` (FallbackToLogsOnError).
      const inits = pod.spec!.initContainers ?? []
      const runInit = (i: number): void => {
        if (i === inits.length) return runTask()
        const ic = inits[i]!
        const { child, closed } = spawnContainer(ic)
        const out: string[] = []
        for (const s of [child.stdout!, child.stderr!])
          createInterface({ input: s, crlfDelay: Infinity }).on('line', (l) => out.push(l))
        this.setStatus(o.namespace, name, {
          phase: 'Pending',
          initContainerStatuses: [status(ic.name, { running: { startedAt: new Date().toISOString() } })],
        })
        void closed.then((code) => {
          procs.delete(key)
          if (!this.store.pods.has(key)) return
          if (code === 0) return runInit(i + 1)
          this.setStatus(o.namespace, name, {
            phase: 'Failed',
            initContainerStatuses: [
              status(ic.name, {
                terminated: { exitCode: code, reason: 'Error', message: out.slice(-80).join('\n').slice(-2048) },
              }),
            ],
            containerStatuses: [status('task', { waiting: { reason: 'PodInitializing' } })],
          })
        })
      }
      const runTask = () => {
        const { child, closed } = spawnContainer(c)
        this.run(o.namespace, name)
        for (const s of [child.stdout!, child.stderr!])
          createInterface({ input: s, crlfDelay: Infinity }).on('line', (l) => this.appendLog(o.namespace, name, l))
        child.once('error', (err) => this.appendLog(o.namespace, name, `exec: ${err.message}`))
        void closed.then((code) => {
          procs.delete(key)
          if (this.store.pods.has(key)) this.exit(o.namespace, name, code)
        })
      }
      runInit(0)
    }
    const onChange = () => {
      for (const [key, p] of this.store.pods) {
        if (p.metadata.namespace !== o.namespace || seen.has(key)) continue
        seen.add(key)
        if (hold) {
          held.push(key)
          this.setStatus(o.namespace, p.metadata.name, {
            phase: 'Pending',
            containerStatuses: [
              { name: 'task', ready: false, restartCount: 0, image: '', imageID: '', state: { waiting: hold } },
            ],
          })
        } else setImmediate(() => launch(key))
      }
      for (const [key, child] of procs) {
        if (this.store.pods.has(key) || child.exitCode !== null || child.signalCode !== null) continue
        // As the kubelet does: SIGTERM to the container's main process, SIGKILL to all of it after the grace period.
        child.kill('SIGTERM')
        const pid = child.pid!
        setTimeout(() => killGroup(pid), 5000).unref()
      }
    }
    this.changes.on('change', onChange)
    onChange()
    return {
      started,
      release: () => {
        hold = undefined
        for (const key of held.splice(0)) launch(key)
      },
      close: async () => {
        this.changes.off('change', onChange)
        await Promise.all(
          [...procs.values()].map((c) => {
            const gone = new Promise((r) => c.once('close', r))
            killGroup(c.pid!)
            return gone
          }),
        )
      },
    }
  }

  /** Removes a Pod as the node lifecycle controller would after node loss. */
  remove(namespace: string, name: string): void {
    const p = this.store.pods.get(`${namespace}/${name}`)
    if (p) this.del('pods', p)
  }

  // ---- HTTP -----------------------------------------------------------------

  private put(kind: 'pods' | 'secrets', type: 'ADDED' | 'MODIFIED', obj: Obj): Obj {
    const rv = ++this.rv
    const stored = { ...obj, metadata: { ...obj.metadata, resourceVersion: String(rv) } }
    this.store[kind].set(`${obj.metadata.namespace}/${obj.metadata.name}`, stored)
    this.events.push({ rv, type, kind, obj: stored })
    this.changes.emit('change')
    return stored
  }

  private del(kind: 'pods' | 'secrets', obj: Obj): Obj {
    const rv = ++this.rv
    const gone = { ...obj, metadata: { ...obj.metadata, resourceVersion: String(rv) } }
    this.store[kind].delete(`${obj.metadata.namespace}/${obj.metadata.name}`)
    this.events.push({ rv, type: 'DELETED', kind, obj: gone })
    this.changes.emit('change')
    return gone
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const u = new URL(req.url ?? '/', 'http://x')
    const query = Object.fromEntries(u.searchParams)
    this.calls.push({ method: req.method ?? 'GET', path: u.pathname, query })
    this.changes.emit('change')
    if (req.headers.authorization !== `Bearer ${this.token}`) return status(res, 401, 'Unauthorized', 'Unauthorized')
    let body = ''
    req.on('data', (c: Buffer) => (body += c.toString()))
    req.on('end', () => {
      try {
        this.route(req.method ?? 'GET', u.pathname, query, body, res)
      } catch (err) {
        status(res, 500, 'InternalError', (err as Error).message)
      }
    })
  }

  private route(method: string, path: string, q: Record<string, string>, body: string, res: ServerResponse): void {
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/(pods|secrets)(?:\/([^/]+))?(?:\/(log))?$/.exec(path)
    if (!m) return status(res, 404, 'NotFound', `the server could not find the requested resource (${path})`)
    const [, ns, kind, name, sub] = m as unknown as [
      string,
      string,
      'pods' | 'secrets',
      string | undefined,
      string | undefined,
    ]
    const key = `${ns}/${name}`
    if (!name && method === 'POST') {
      const obj = JSON.parse(body) as Obj
      if (!obj.metadata?.name) return status(res, 422, 'Invalid', 'metadata.name: Required value')
      if (obj.metadata.namespace && obj.metadata.namespace !== ns)
        return status(res, 400, 'BadRequest', 'the namespace of the object does not match the namespace on the request')
      const k = `${ns}/${obj.metadata.name}`
      if (this.store[kind].has(k))
        return status(res, 409, 'AlreadyExists', `${kind} "${obj.metadata.name}" already exists`)
      const created = this.put(kind, 'ADDED', {
        ...obj,
        metadata: {
          ...obj.metadata,
          namespace: ns,
          uid: `uid-${this.rv + 1}`,
          creationTimestamp: new Date().toISOString(),
        },
        ...(kind === 'pods' ? { status: { phase: 'Pending' } } : {}),
      })
      return json(res, 201, created)
    }
    if (!name && method === 'GET') {
      const sel = parseSelector(q.labelSelector)
      if (q.watch === 'true') return this.watch(kind, ns, sel, q.resourceVersion, res)
      const items = [...this.store[kind].values()].filter((o) => o.metadata.namespace === ns && sel(o))
      return json(res, 200, {
        kind: kind === 'pods' ? 'PodList' : 'SecretList',
        apiVersion: 'v1',
        metadata: { resourceVersion: String(this.rv) },
        items,
      })
    }
    const obj = this.store[kind].get(key)
    if (!obj) return status(res, 404, 'NotFound', `${kind} "${name}" not found`)
    if (sub === 'log' && method === 'GET') return this.logFollow(key, q, res)
    if (method === 'GET') return json(res, 200, obj)
    if (method === 'DELETE') return json(res, 200, this.del(kind, obj))
    status(res, 405, 'MethodNotAllowed', `${method} is not supported here`)
  }

  private watch(
    kind: 'pods' | 'secrets',
    ns: string,
    sel: (o: Obj) => boolean,
    from: string | undefined,
    res: ServerResponse,
  ): void {
    res.writeHead(200, { 'content-type': 'application/json' })
    // The API server answers a watch at once and sends events as they come.
    res.flushHeaders()
    this.watches.add(res)
    res.on('close', () => this.watches.delete(res))
    let last = from !== undefined && from !== '' && from !== '0' ? Number(from) : this.rv
    if (last < this.compactedThrough) {
      res.end(
        JSON.stringify({
          type: 'ERROR',
          object: {
            kind: 'Status',
            apiVersion: 'v1',
            status: 'Failure',
            reason: 'Expired',
            code: 410,
            message: `too old resource version: ${last} (${this.compactedThrough})`,
          },
        }) + '\n',
      )
      return
    }
    const send = () => {
      if (res.writableEnded) return
      for (const e of this.events) {
        if (e.rv <= last) continue
        last = e.rv
        if (e.kind !== kind || e.obj.metadata.namespace !== ns || !sel(e.obj)) continue
        res.write(JSON.stringify({ type: e.type, object: e.obj }) + '\n')
      }
    }
    send()
    this.changes.on('change', send)
    res.on('close', () => this.changes.off('change', send))
  }

  private logFollow(key: string, q: Record<string, string>, res: ServerResponse): void {
    const pod = this.store.pods.get(key)!
    const phase = (pod.status as { phase?: string } | undefined)?.phase
    if (phase === 'Pending')
      return status(
        res,
        400,
        'BadRequest',
        `container "task" in pod "${pod.metadata.name}" is waiting to start: ContainerCreating`,
      )
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.flushHeaders()
    let sent = 0
    const strip = (l: string) => (q.timestamps === 'true' ? l : l.slice(l.indexOf(' ') + 1))
    const send = () => {
      if (res.writableEnded) return
      const lines = this.logs.get(key) ?? []
      for (; sent < lines.length; sent++) res.write(strip(lines[sent]!) + '\n')
      const now = this.store.pods.get(key)
      const p = (now?.status as { phase?: string } | undefined)?.phase
      if (q.follow !== 'true' || !now || p === 'Succeeded' || p === 'Failed') {
        this.changes.off('change', send)
        res.end()
      }
    }
    this.changes.on('change', send)
    res.on('close', () => this.changes.off('change', send))
    send()
  }
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL')
  } catch {
    // already gone
  }
}

function parseSelector(s: string | undefined): (o: Obj) => boolean {
  if (!s) return () => true
  const terms = s.split(',').map((t) => t.split('=') as [string, string])
  return (o) => terms.every(([k, v]) => o.metadata.labels?.[k] === v)
}

function json(res: ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

function status(res: ServerResponse, code: number, reason: string, message: string): void {
  json(res, code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', reason, message, code })
}
