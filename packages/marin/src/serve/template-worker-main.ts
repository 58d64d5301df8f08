/**
 * @module The worker side of `template-worker.ts`: one template, parsed once, rendered for each message
 * in the sandbox; replies `{ ok, text }` or `{ ok: false, code, message }`.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { isMarinError } from '../errors.js'
import { SandboxedTemplate } from './template-sandbox.js'
import type { TemplateLimits } from './template-sandbox.js'

const { source, name, limits } = workerData as { source: string; name: string; limits: TemplateLimits }
const template = new SandboxedTemplate(source, name, limits)
const port = parentPort!
port.on('message', (items: Record<string, unknown>) => {
  try {
    port.postMessage({ ok: true, text: template.render(items) })
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err)
    port.postMessage({ ok: false, code: isMarinError(err) ? err.code : undefined, message })
  }
})
port.postMessage({ ready: true })
