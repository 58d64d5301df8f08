/**
 * @module A template rendered on its own worker thread, so that one which runs long or big never stalls
 * the server's event loop (`/health` keeps answering): the sandbox's limits apply inside, the caller ends
 * the worker when a render passes the time budget (plus a grace for the thread's own overhead), and the
 * worker's heap is capped so that a template which allocates without bound ends the worker, not the
 * process. Either way the render fails with BAD_TEMPLATE naming the template, and the next render starts
 * a fresh worker. Renders run one at a time, in order.
 */
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import { Worker } from 'node:worker_threads'
import { MarinError } from '../errors.js'
import { DEFAULT_TEMPLATE_LIMITS } from './template-sandbox.js'
import type { TemplateLimits } from './template-sandbox.js'

/** The worker's heap cap. @default 256 MiB: 30 times the largest output a template may make. */
export const TEMPLATE_WORKER_HEAP_MB = 256
/** Added to the time budget before the worker is ended: the sandbox's own check normally fires first. */
const GRACE_MS = 1000

// Run from TypeScript sources (tests, tsx), the worker needs a TypeScript loader too; Node 20 does not
// pass loader hooks to workers, so a small bootstrap loads the worker module through tsx's tsImport.
const fromSource = import.meta.url.endsWith('.ts')
const WORKER_URL = new URL(fromSource ? './template-worker-main.ts' : './template-worker-main.js', import.meta.url)

function startWorker(workerData: unknown, heapMb: number): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: 16 }
  if (!fromSource) return new Worker(WORKER_URL, { workerData, resourceLimits })
  const tsxApi = createRequire(import.meta.url)
    .resolve('tsx/esm/api')
    .replace(/\.cjs$/, '.mjs')
  const target = JSON.stringify(WORKER_URL.href)
  const bootstrap =
    `import(${JSON.stringify(pathToFileURL(tsxApi).href)}` + `).then((tsx) => tsx.tsImport(${target}, ${target}))`
  return new Worker(bootstrap, { eval: true, workerData, resourceLimits })
}

type Job = { items: Record<string, unknown>; resolve: (text: string) => void; reject: (err: Error) => void }
type Reply = { ready: true } | { ok: true; text: string } | { ok: false; code?: string; message: string }

export class TemplateWorker {
  private worker: Worker | undefined
  private ready = false
  private readonly queue: Job[] = []
  private running: { job: Job; timer: NodeJS.Timeout } | undefined

  constructor(
    private readonly source: string,
    /** How errors name the template. */
    readonly name: string,
    readonly limits: TemplateLimits = DEFAULT_TEMPLATE_LIMITS,
    readonly heapMb = TEMPLATE_WORKER_HEAP_MB,
  ) {}

  /** The text for `items`: rejects with BAD_TEMPLATE past a limit, else with the template's own error. */
  render(items: Record<string, unknown>): Promise<string> {
    return new Promise((resolve, reject) => {
      this.queue.push({ items, resolve, reject })
      this.pump()
    })
  }

  /** Ends the worker; renders still waiting are rejected. */
  async close(): Promise<void> {
    const w = this.worker
    this.worker = undefined
    const gone = new MarinError('BAD_TEMPLATE', `${this.name}: the template's worker was closed`)
    if (this.running) {
      clearTimeout(this.running.timer)
      this.running.job.reject(gone)
      this.running = undefined
    }
    for (const j of this.queue.splice(0)) j.reject(gone)
    await w?.terminate()
  }

  private pump(): void {
    if (this.running || this.queue.length === 0) return
    if (!this.worker) this.spawn()
    if (!this.ready) return
    const job = this.queue.shift()!
    const ms = this.limits.timeBudgetMs + GRACE_MS
    const timer = setTimeout(() => this.fail(`rendering did not finish within ${ms} ms`), ms)
    this.running = { job, timer }
    this.worker!.postMessage(job.items)
  }

  private spawn(): void {
    const w = startWorker({ source: this.source, name: this.name, limits: this.limits }, this.heapMb)
    w.unref()
    this.worker = w
    this.ready = false
    w.on('message', (m: Reply) => {
      if (w !== this.worker) return
      if ('ready' in m) {
        this.ready = true
        return this.pump()
      }
      const r = this.running
      if (!r) return
      clearTimeout(r.timer)
      this.running = undefined
      if (m.ok) r.job.resolve(m.text)
      else r.job.reject(m.code === 'BAD_TEMPLATE' ? new MarinError('BAD_TEMPLATE', m.message) : new Error(m.message))
      this.pump()
    })
    w.on('error', (err: Error & { code?: string }) =>
      this.fail(
        err.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? `rendering used more than the ${this.heapMb} MiB of memory allowed`
          : `its worker failed: ${err.message}`,
        w,
      ),
    )
    w.on('exit', (code) => this.fail(`its worker exited (code ${code})`, w))
  }

  /** Ends worker `w` (the current one), failing the render in progress, or every waiting one if none had started. */
  private fail(why: string, w = this.worker): void {
    if (w === undefined || w !== this.worker) return
    const r = this.running
    const wasReady = this.ready
    this.running = undefined
    this.worker = undefined
    this.ready = false
    void w.terminate()
    if (r) {
      clearTimeout(r.timer)
      r.job.reject(new MarinError('BAD_TEMPLATE', `${this.name}: the template is refused: ${why}; fix the template`))
    } else if (!wasReady) {
      // The worker never started: retrying would fail the same way, so every waiting render fails now.
      const err = new MarinError('BAD_TEMPLATE', `${this.name}: cannot render: ${why}`)
      for (const j of this.queue.splice(0)) j.reject(err)
    }
    this.pump()
  }
}
