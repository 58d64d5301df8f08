/**
 * The iris command lines in infra/ (Dockerfile, Kubernetes manifests, systemd
 * units) use only flags the CLI has, with values it accepts.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import type { Command } from 'commander'
import { describe, expect, test } from 'vitest'
import { parseAllDocuments } from 'yaml'
import { buildProgram } from './cli.js'
import { parseDuration } from './duration.js'
import { parseResources } from './resources.js'

const INFRA = resolve(import.meta.dirname, '..', '..', '..', 'infra')
const io = { out: () => {}, err: () => {}, env: {}, stopped: Promise.resolve() }

type Invocation = { source: string; args: string[] }

function fromDockerfile(): Invocation[] {
  const text = readFileSync(join(INFRA, 'Dockerfile'), 'utf8')
  const cmd = /^CMD (\[.*\])$/m.exec(text)
  expect(text).toMatch(/^ENTRYPOINT \["node", "\/opt\/marin-ts\/packages\/iris\/bin\/iris\.js"\]$/m)
  return cmd ? [{ source: 'Dockerfile CMD', args: JSON.parse(cmd[1]!) as string[] }] : []
}

function fromKubernetes(): Invocation[] {
  const out: Invocation[] = []
  for (const f of readdirSync(join(INFRA, 'k8s')).filter((f) => f.endsWith('.yaml'))) {
    for (const doc of parseAllDocuments(readFileSync(join(INFRA, 'k8s', f), 'utf8'))) {
      const d = doc.toJS() as { spec?: { template?: { spec?: { containers?: { name: string; args?: string[] }[] } } } }
      for (const c of d.spec?.template?.spec?.containers ?? [])
        if (c.args) out.push({ source: `k8s/${f} ${c.name}`, args: c.args.map(String) })
    }
  }
  return out
}

function fromSystemd(): Invocation[] {
  const out: Invocation[] = []
  for (const f of readdirSync(join(INFRA, 'systemd')).filter((f) => f.endsWith('.service'))) {
    const line = /^ExecStart=(.*)$/m.exec(readFileSync(join(INFRA, 'systemd', f), 'utf8'))![1]!
    const words = line.split(/\s+/)
    out.push({ source: `systemd/${f}`, args: words.slice(words.findIndex((w) => w.endsWith('/iris.js')) + 1) })
  }
  return out
}

const DURATION_FLAGS = new Set(['--heartbeat', '--worker-timeout', '--kill-grace', '--cleanup-ttl', '--retry-delay'])
// Values filled in by the platform: $(POD_NAME) in Kubernetes, ${IRIS_CONTROLLER} in systemd.
const isPlaceholder = (v: string) => /^\$[({][A-Z_]+[)}]$/.test(v)

// Every command loaded, so that their flags can be looked up.
const program = await buildProgram(io)

function check(inv: Invocation): void {
  let cmd: Command = program
  let i = 0
  while (i < inv.args.length) {
    const sub = cmd.commands.find((c) => c.name() === inv.args[i])
    if (!sub) break
    cmd = sub
    i++
  }
  expect(cmd.name(), `${inv.source}: "${inv.args.join(' ')}" names no iris command`).not.toBe('iris')
  for (; i < inv.args.length; i++) {
    const flag = inv.args[i]!
    expect(flag.startsWith('--'), `${inv.source}: unexpected argument "${flag}"`).toBe(true)
    const opt = cmd.options.find((o) => o.long === flag)
    expect(opt, `${inv.source}: iris ${cmd.name()} has no flag ${flag}`).toBeDefined()
    if (!opt!.required) continue
    const value = inv.args[++i]
    expect(value, `${inv.source}: ${flag} needs a value`).toBeDefined()
    if (isPlaceholder(value!)) continue
    if (opt!.parseArg) opt!.parseArg(value!, undefined)
    if (DURATION_FLAGS.has(flag)) parseDuration(value!, flag)
    if (flag === '--resources') parseResources(value!)
    if (opt!.argChoices) expect(opt!.argChoices).toContain(value)
  }
}

describe('infra uses only flags that exist', () => {
  const all = [...fromDockerfile(), ...fromKubernetes(), ...fromSystemd()]
  test('every file has an iris command line', () => {
    expect(all.map((a) => a.source).sort()).toEqual([
      'Dockerfile CMD',
      'k8s/iris-controller.yaml controller',
      'k8s/iris-worker-cpu.yaml worker',
      'k8s/iris-worker-gpu.yaml worker',
      'systemd/iris-controller.service',
      'systemd/iris-worker.service',
    ])
  })
  test.each(all.map((a) => [a.source, a] as const))('%s', (_s, inv) => check(inv))

  test('the check catches a flag that does not exist', () => {
    expect(() => check({ source: 'made up', args: ['worker', '--controler', 'x:1'] })).toThrow(
      /has no flag --controler/,
    )
    expect(() => check({ source: 'made up', args: ['controller', '--port', 'http'] })).toThrow(/expected a port/)
    expect(() => check({ source: 'made up', args: ['worker', '--kill-grace', 'soon'] })).toThrow(/not a duration/)
  })
})
