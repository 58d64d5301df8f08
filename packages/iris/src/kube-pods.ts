/**
 * @module Runs task attempts as Kubernetes Pods (`iris cluster start --platform k8s`): one Pod per attempt, made
 * through the Kubernetes API with `@kubernetes/client-node`. Resources become requests and limits (`cpu`,
 * `memory`, `nvidia.com/gpu`); the job's token and resolved secrets go into a Secret of the attempt and reach the
 * container as `secretKeyRef`s, never as literal values in the Pod; the priority band names a PriorityClass
 * (`iris-production`, `iris-interactive`, `iris-batch`). States come from one watch of this platform's Pods
 * (relisted after `410 Gone`), output from `log?follow=true`; kill deletes the Pod. A Pod evicted, preempted or
 * lost with its node ends as WORKER_FAILED, which the controller retries within the job's worker-loss budget;
 * OOMKilled and other failures end as FAILED with the reason. Finished Pods are deleted after a TTL. A Pending Pod
 * is reported as such (with why it waits), a Running one as running. The task's stderr is kept apart from its stdout
 * by a wrapper (`STDERR_WRAPPER`). A platform that starts finds the Pods an earlier run left (`start`) for the
 * worker to adopt, so a restarted controller follows them to their end instead of running them again.
 */
import { PassThrough } from 'node:stream'
import { createInterface } from 'node:readline'
import { CoreV1Api, Log, Watch, type V1Pod } from '@kubernetes/client-node'
import { logger } from '@marin/rigging'
import {
  ATTEMPT_ANNOTATION,
  type FoundPod,
  KUBE_LABELS,
  type KubePodsOptions,
  labelValue,
  NOTE_LINE_BASE,
  podManifests,
  podName,
  type PodTaskInput,
  podVerdict,
  SECRET_SPECS_ANNOTATION,
  STDERR_MARK,
  TASK_CONTAINER,
} from './kube-pod-spec.js'
import type { RunningTask, TaskOutcome } from './task-runner.js'

const log = logger('iris')

type Tracked = {
  name: string
  settle: (o: TaskOutcome) => void
  onLine: PodTaskInput['onLine']
  onPending?: PodTaskInput['onPending']
  onRunning?: PodTaskInput['onRunning']
  running?: boolean
  killRequested: boolean
  /** The create call has answered: a list without the Pod now means it is gone. */
  created: boolean
  logs?: Promise<void>
  note?: string
  done: boolean
  finished: Promise<TaskOutcome>
}

/** The Pods of one iris platform in one namespace. */
export class KubePods {
  private readonly core: CoreV1Api
  private readonly tracked = new Map<string, Tracked>()
  private readonly timers = new Set<NodeJS.Timeout>()
  private watching = false
  private watchAbort: AbortController | undefined
  private loop: Promise<void> | undefined
  private wake: (() => void) | undefined
  private stopWatch: (() => void) | undefined
  private readonly selector: string

  constructor(private readonly opts: KubePodsOptions) {
    this.core = opts.kubeConfig.makeApiClient(CoreV1Api)
    this.selector = `${KUBE_LABELS.managedBy}=iris,${KUBE_LABELS.platform}=${labelValue(opts.platformId)}`
  }

  get namespace(): string {
    return this.opts.namespace
  }

  /** Whether jobs with `--mount` can run here (a `mountStore` was given). */
  get mountsSupported(): boolean {
    return this.opts.mountStore !== undefined
  }

  /**
   * Deletes this platform's Pods left by an earlier run (their attempts are retried by the controller) and
   * starts watching. Fails with the API's answer when the namespace cannot be read.
   */
  async start(): Promise<FoundPod[]> {
    const list = await this.core.listNamespacedPod({ namespace: this.opts.namespace, labelSelector: this.selector })
    const found: FoundPod[] = []
    for (const pod of list.items) {
      const attemptId = pod.metadata?.annotations?.[ATTEMPT_ANNOTATION] ?? ''
      const m = /^([^/]+)\/(\d+)\/(\d+)$/.exec(attemptId)
      let secrets: Record<string, string> = {}
      try {
        secrets = JSON.parse(pod.metadata?.annotations?.[SECRET_SPECS_ANNOTATION] ?? '{}') as Record<string, string>
      } catch {
        // an annotation edited by hand: its secrets are not resolved again
      }
      if (m && podName(attemptId) === pod.metadata?.name)
        found.push({ attemptId, jobId: m[1]!, taskIndex: Number(m[2]), attempt: Number(m[3]), secrets, pod })
      else await this.deletePod(pod.metadata!.name!, 0)
    }
    this.watching = true
    this.loop = this.watchLoop(list.metadata?.resourceVersion)
    return found
  }

  /**
   * Follows a Pod found by `start` as `run` follows the Pods it makes: the returned task ends when the Pod does
   * (at once for one that ended while nobody watched), and its log is read from the start.
   */
  adopt(found: FoundPod, input: Pick<PodTaskInput, 'onLine' | 'onPending' | 'onRunning'>): RunningTask {
    const t = this.track(podName(found.attemptId), input)
    t.created = true
    log.info({ attemptId: found.attemptId, pod: t.name }, 'pod adopted')
    this.observe(found.pod)
    return this.handleOf(t)
  }

  async close(): Promise<void> {
    this.watching = false
    this.watchAbort?.abort()
    this.stopWatch?.()
    this.wake?.()
    await this.loop
    for (const t of this.timers) clearTimeout(t)
    this.timers.clear()
  }

  /** Creates the attempt's Secret and Pod; the returned task ends when the Pod does. */
  run(input: PodTaskInput, killGraceMs: number): RunningTask {
    const { secret, pod } = podManifests(input, { ...this.opts, killGraceMs })
    const name = pod.metadata!.name!
    const t = this.track(name, input)
    const create = async () => {
      if (secret) await this.core.createNamespacedSecret({ namespace: this.opts.namespace, body: secret })
      await this.core.createNamespacedPod({ namespace: this.opts.namespace, body: pod })
      t.created = true
      // Tracked before it exists: the watch sees every event of the Pod, even those before this answer.
      log.info({ attemptId: input.assignment.attemptId, pod: name, namespace: this.opts.namespace }, 'pod created')
    }
    create().catch((err: unknown) => {
      if (t.done) return
      this.end(t, { state: 'FAILED', error: `could not create pod ${name}: ${apiMessage(err)}` })
      void this.deletePod(name, 0)
    })
    return this.handleOf(t)
  }

  private track(name: string, input: Pick<PodTaskInput, 'onLine' | 'onPending' | 'onRunning'>): Tracked {
    let settle!: (o: TaskOutcome) => void
    const done = new Promise<TaskOutcome>((r) => (settle = r))
    const t: Tracked = {
      name,
      settle,
      done: false,
      finished: done,
      onLine: input.onLine,
      ...(input.onPending ? { onPending: input.onPending } : {}),
      ...(input.onRunning ? { onRunning: input.onRunning } : {}),
      killRequested: false,
      created: false,
    }
    this.tracked.set(name, t)
    return t
  }

  private handleOf(t: Tracked): RunningTask {
    return {
      done: t.finished,
      kill: (graceMs) => {
        if (t.done || t.killRequested) return
        t.killRequested = true
        void this.deletePod(t.name, Math.ceil(graceMs / 1000))
      },
    }
  }

  private async watchLoop(resourceVersion: string | undefined): Promise<void> {
    let rv = resourceVersion
    const watch = new Watch(this.opts.kubeConfig)
    while (this.watching) {
      if (rv === undefined) {
        try {
          const list = await this.core.listNamespacedPod({
            namespace: this.opts.namespace,
            labelSelector: this.selector,
          })
          for (const p of list.items) this.observe(p)
          for (const t of [...this.tracked.values()])
            if (t.created && !t.done && !list.items.some((p) => p.metadata?.name === t.name)) void this.confirmGone(t)
          rv = list.metadata?.resourceVersion
        } catch (err) {
          log.warn({ err: apiMessage(err) }, 'listing pods failed; retrying')
          await this.pause()
          continue
        }
      }
      const ended = new Promise<unknown>((resolve) => {
        // close() ends the wait even while the request is still waiting for the server's answer.
        this.stopWatch = () => resolve(undefined)
        watch
          .watch(
            `/api/v1/namespaces/${this.opts.namespace}/pods`,
            { labelSelector: this.selector, resourceVersion: rv, allowWatchBookmarks: true },
            (type, obj: V1Pod & { code?: number }) => {
              if (type === 'ERROR') {
                // 410 Gone: the resource version is too old; list again and watch from the new one.
                rv = undefined
                this.watchAbort?.abort()
                return
              }
              if (obj.metadata?.resourceVersion) rv = obj.metadata.resourceVersion
              if (type === 'BOOKMARK') return
              if (type === 'DELETED') {
                const t = this.tracked.get(obj.metadata?.name ?? '')
                if (t) {
                  this.observe(obj)
                  this.gone(t)
                }
                return
              }
              this.observe(obj)
            },
            resolve,
          )
          .then((c) => {
            this.watchAbort = c
            if (!this.watching) c.abort()
          }, resolve)
      })
      const err = await ended
      if (!this.watching) return
      if (err && (err as { statusCode?: number }).statusCode === 410) rv = undefined
      else if (err) {
        log.warn({ err: apiMessage(err) }, 'pod watch failed; watching again')
        await this.pause()
      }
    }
  }

  private pause(): Promise<void> {
    return new Promise((r) => {
      const t = setTimeout(r, this.opts.rewatchDelayMs ?? 1000)
      this.wake = () => {
        clearTimeout(t)
        r()
      }
    })
  }

  private observe(pod: V1Pod): void {
    const t = this.tracked.get(pod.metadata?.name ?? '')
    if (!t || t.done) return
    const v = podVerdict(pod)
    if (!v.final) {
      if (v.note && v.note !== t.note) {
        // Why the Pod does not run yet (ImagePullBackOff, Unschedulable …) goes to the task's output, so
        // `iris logs` shows it.
        t.note = v.note
        log.info({ pod: t.name, note: v.note }, 'pod waiting')
        const now = Date.now()
        t.onLine('stderr', `[iris] pod ${t.name} is waiting: ${v.note}`, now, NOTE_LINE_BASE + now)
        if (!v.running) t.onPending?.(v.note)
      }
      if (v.running && !t.running) {
        t.running = true
        t.onRunning?.()
      }
      if (v.running) this.followLogs(t)
      return
    }
    // Output comes first: the log stream of a finished container ends by itself.
    this.followLogs(t)
    void t.logs!.then(() => {
      if (t.killRequested && v.state !== 'SUCCEEDED') this.end(t, { state: 'KILLED', error: 'killed: pod deleted' })
      else this.end(t, v)
    })
  }

  /** A Pod missing from a list: gone if reading it says 404 (the list may predate its creation). */
  private async confirmGone(t: Tracked): Promise<void> {
    try {
      this.observe(await this.core.readNamespacedPod({ name: t.name, namespace: this.opts.namespace }))
    } catch (err) {
      if ((err as { code?: number }).code === 404) this.gone(t)
    }
  }

  /** The Pod is gone (deleted, or no longer listed). */
  private gone(t: Tracked): void {
    if (t.done) return
    const logs = t.logs ?? Promise.resolve()
    void logs.then(() =>
      this.end(
        t,
        t.killRequested
          ? { state: 'KILLED', error: 'killed: pod deleted' }
          : { state: 'WORKER_FAILED', error: `pod ${t.name} was deleted before it finished (node lost or removed)` },
      ),
    )
  }

  private followLogs(t: Tracked): void {
    if (t.logs) return
    const sink = new PassThrough()
    const lines = createInterface({ input: sink, crlfDelay: Infinity })
    let lineNo = 0
    lines.on('line', (raw) => {
      // `timestamps=true` prefixes each line with its RFC 3339 time and a space.
      const sp = raw.indexOf(' ')
      const ts = sp > 0 ? Date.parse(raw.slice(0, sp)) : NaN
      const line = Number.isNaN(ts) ? raw : raw.slice(sp + 1)
      // The wrapper marks the task's stderr lines (STDERR_WRAPPER).
      const at = Number.isNaN(ts) ? Date.now() : ts
      if (line.startsWith(STDERR_MARK)) t.onLine('stderr', line.slice(1), at, lineNo++)
      else t.onLine('stdout', line, at, lineNo++)
    })
    const closed = new Promise<void>((r) => lines.once('close', () => r()))
    t.logs = new Log(this.opts.kubeConfig)
      .log(this.opts.namespace, t.name, TASK_CONTAINER, sink, { follow: true, timestamps: true })
      .then(
        () => closed,
        (err: unknown) => {
          log.warn({ pod: t.name, err: apiMessage(err) }, 'pod log stream failed')
          sink.end()
          return closed
        },
      )
  }

  private end(t: Tracked, o: TaskOutcome): void {
    if (t.done) return
    t.done = true
    t.settle(o)
    // Kept for a while after it ends, for `kubectl describe` and `kubectl logs`; then deleted with its Secret.
    const timer = setTimeout(() => {
      this.timers.delete(timer)
      this.tracked.delete(t.name)
      void this.deletePod(t.name, 0)
    }, this.opts.podTtlMs ?? 3_600_000)
    timer.unref()
    this.timers.add(timer)
  }

  /** Deletes a Pod and its Secret; either being gone already is fine. */
  private async deletePod(name: string, graceSeconds: number): Promise<void> {
    const ns = this.opts.namespace
    for (const del of [
      () => this.core.deleteNamespacedPod({ name, namespace: ns, gracePeriodSeconds: graceSeconds }),
      () => this.core.deleteNamespacedSecret({ name, namespace: ns }),
    ]) {
      try {
        await del()
      } catch (err) {
        if ((err as { code?: number }).code !== 404) log.warn({ name, err: apiMessage(err) }, 'delete failed')
      }
    }
  }
}

function apiMessage(err: unknown): string {
  const e = err as { code?: number; body?: unknown; message?: string }
  if (e.code !== undefined) {
    let body = e.body
    if (typeof body === 'string') {
      try {
        body = JSON.parse(body)
      } catch {
        // a body that is not JSON is shown as it is
      }
    }
    const msg = (body as { message?: string } | undefined)?.message
    return `HTTP ${e.code}${msg ? `: ${msg}` : ''}`
  }
  return e.message ?? String(err)
}
