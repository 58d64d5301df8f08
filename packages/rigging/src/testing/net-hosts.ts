/**
 * @module Test hosts: N network hosts on one machine, each a Linux network namespace with its own address
 * (`10.88.<run>.<i+1>/24`) and its own scratch folder, joined by veth pairs to a bridge in a switch namespace
 * of their own. Processes run in a host with `ip netns exec`; a host's link can be cut and restored at the
 * switch (the host sees its carrier go, as when a cable is pulled). The run number is unique among the runs
 * alive on the machine, so test files in parallel never share an address. Everything (processes, namespaces,
 * links, folders) is removed by `close()`, by the cleanup hook given (`afterAll`), and by handlers of the
 * process's 'exit' and SIGTERM/SIGINT/SIGHUP, so a failing test leaves nothing behind; a run left by a process
 * killed outright is removed by the next run that finds its owner dead. Needs root and iproute2
 * (`netHostsSupport()` says why not).
 *
 * @example
 * const why = netHostsSupport()
 * describe.skipIf(why !== undefined)(`two hosts${why ? ` (skipped: ${why})` : ''}`, () => {
 *   test('b reaches a', async () => {
 *     const [a, b] = makeNetHosts(2, { cleanupWith: onTestFinished }).hosts
 *     const server = a!.spawn('node', ['server.js', a!.address])
 *     ...
 *   })
 * })
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { availableParallelism, loadavg, tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'

/** Where run numbers are claimed: one file `<run>.pid` per run alive, holding its owner's pid. */
const LOCK_DIR = join(tmpdir(), 'marin-net-hosts')
const MAX_HOSTS = 250
const SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP']

export type ExecResult = { code: number; stdout: string; stderr: string }

export type HostProcess = {
  readonly child: ChildProcess
  /** Everything printed to stdout (and stderr) so far. */
  stdout(): string
  stderr(): string
  /** Resolves with the first match of `re` in stdout; rejects after `timeoutMs` or when the process exits first. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpExecArray>
  /** The exit code (128 + signal number when killed by one). */
  readonly exited: Promise<number>
  /** Sends `signal` (default SIGTERM) to the process's whole group. */
  kill(signal?: NodeJS.Signals): void
}

export type RunOptions = {
  /** Added to the host's environment (TMPDIR is the host's folder unless given). */
  env?: Record<string, string>
  /** @default the host's scratch folder */
  cwd?: string
  /** Give the process a stdin pipe (`child.stdin`); else its stdin is /dev/null. */
  stdin?: boolean
}

export type NetHost = {
  /** `h0`, `h1`, … */
  readonly name: string
  /** The network namespace's name. */
  readonly ns: string
  /** The host's own address (no prefix length), the only one others reach it by. */
  readonly address: string
  /** The host's own scratch folder: no other host is given it. */
  readonly dir: string
  /** Runs `cmd args` in the host to completion; killed (code 124) after `timeoutMs` (default 30 s). */
  exec(cmd: string, args: readonly string[], opts?: RunOptions & { timeoutMs?: number }): Promise<ExecResult>
  /** Starts a long-running `cmd args` in the host; it is killed by the hosts' cleanup. */
  spawn(cmd: string, args: readonly string[], opts?: RunOptions): HostProcess
  /** Takes the host's link down at the switch: nothing reaches it or leaves it until `restore()`. */
  cut(): void
  /** Brings the host's link back up. */
  restore(): void
}

export type NetHosts = {
  /** The run number: the third byte of every host's address. */
  readonly run: number
  readonly hosts: readonly NetHost[]
  /** Kills every process in the hosts, removes the namespaces, links and folders. Idempotent. */
  close(): void
}

function ipCmd(args: readonly string[]): { ok: boolean; out: string } {
  const r = spawnSync('ip', args, { encoding: 'utf8', timeout: 10_000 })
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? r.error.message : ''}`.trim() }
}

function ip(args: readonly string[]): string {
  const r = ipCmd(args)
  if (!r.ok) throw new Error(`net-hosts: "ip ${args.join(' ')}" failed: ${r.out}`)
  return r.out
}

/** The most {@link machineSlowdown} says: a limit scaled by it fails a hang at this many times the limit at most. */
export const MAX_SLOWDOWN = 8

/**
 * How many times slower than an idle machine this one runs a process now: the last minute's load average over the
 * cores, at least 1 and at most {@link MAX_SLOWDOWN}. Tests across hosts multiply their time limits by it (a
 * process's start-up, a peer's silence), so that a machine loaded with other work does not fail them, while a
 * process that hangs still fails them, later.
 */
export function machineSlowdown(): number {
  return Math.min(MAX_SLOWDOWN, Math.max(1, (loadavg()[0] ?? 0) / availableParallelism()))
}

/** Why network namespaces cannot be made here, or undefined when they can. */
export function netHostsSupport(): string | undefined {
  if (process.platform !== 'linux') return `network namespaces need Linux (this is ${process.platform})`
  if (typeof process.getuid === 'function' && process.getuid() !== 0)
    return 'network namespaces need root (run the tests as root)'
  const probe = spawnSync('ip', ['-V'], { encoding: 'utf8' })
  if (probe.error || probe.status !== 0) return 'no "ip" command (install iproute2)'
  const ns = `mhprobe${process.pid}`
  const made = ipCmd(['netns', 'add', ns])
  if (!made.ok) return `"ip netns add" failed: ${made.out}`
  const veth = ipCmd(['link', 'add', 'p0', 'netns', ns, 'type', 'veth', 'peer', 'name', 'p1', 'netns', ns])
  ipCmd(['netns', 'del', ns])
  if (!veth.ok) return `veth pairs cannot be made: ${veth.out}`
  return undefined
}

const nsOf = (run: number, i: number) => `mh${run}-h${i}`
const switchOf = (run: number) => `mh${run}-sw`

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** SIGKILLs every process in namespace `ns` and deletes it (quietly when it does not exist). */
function removeNamespace(ns: string): void {
  const pids = ipCmd(['netns', 'pids', ns])
  if (pids.ok)
    for (const p of pids.out.split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(p), 'SIGKILL')
      } catch {
        // Gone.
      }
    }
  ipCmd(['netns', 'del', ns])
}

/** Every namespace of run `run` (left by an owner that died, or ours). */
function removeRun(run: number): void {
  const list = ipCmd(['netns', 'list'])
  const mine = new RegExp(`^mh${run}-(h\\d+|sw)$`)
  for (const line of list.ok ? list.out.split('\n') : []) {
    const name = line.split(' ')[0] ?? ''
    if (mine.test(name)) removeNamespace(name)
  }
}

/** Removes the runs whose owners died without cleaning up (killed by SIGKILL, say). */
function removeDeadRuns(): void {
  for (const f of readdirSync(LOCK_DIR)) {
    const m = /^(\d+)\.pid$/.exec(f)
    if (!m) continue
    let owner = Number.NaN
    try {
      owner = Number(readFileSync(join(LOCK_DIR, f), 'utf8'))
    } catch {
      continue
    }
    if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) continue
    removeRun(Number(m[1]))
    rmSync(join(LOCK_DIR, f), { force: true })
  }
}

/** Claims a run number no living process holds: 1..250, starting from one derived from the pid. */
function claimRun(): number {
  mkdirSync(LOCK_DIR, { recursive: true })
  removeDeadRuns()
  const start = process.pid % 250
  for (let k = 0; k < 250; k++) {
    const run = ((start + k) % 250) + 1
    const file = join(LOCK_DIR, `${run}.pid`)
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' })
      removeRun(run)
      return run
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    let owner = Number.NaN
    try {
      owner = Number(readFileSync(file, 'utf8'))
    } catch {
      continue
    }
    if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) continue
    // Its owner died without cleaning up: take the number over.
    rmSync(file, { force: true })
    k--
  }
  throw new Error(`net-hosts: every run number is taken (see ${LOCK_DIR}); remove the files of dead runs`)
}

function track(child: ChildProcess, label: string): HostProcess {
  let out = ''
  let err = ''
  const listeners = new Set<() => void>()
  child.stdout?.setEncoding('utf8')
  child.stderr?.setEncoding('utf8')
  child.stdout?.on('data', (c: string) => {
    out += c
    for (const l of listeners) l()
  })
  child.stderr?.on('data', (c: string) => {
    err += c
  })
  const exited = new Promise<number>((r) => {
    child.once('error', () => r(127))
    child.once('close', (code, sig) => r(code ?? 128 + (sig ? signalNumber(sig) : 0)))
  })
  let done = false
  void exited.then(() => {
    done = true
    for (const l of listeners) l()
  })
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    kill(signal = 'SIGTERM') {
      if (child.pid === undefined || done) return
      try {
        process.kill(-child.pid, signal)
      } catch {
        // Gone.
      }
    },
    waitFor(re, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(check)
          reject(
            new Error(
              `${label}: no output matching ${re} within ${timeoutMs} ms; stdout: ${out.slice(-400)}; ` +
                `stderr: ${err.slice(-400)}`,
            ),
          )
        }, timeoutMs)
        const check = () => {
          const m = re.exec(out)
          if (m || done) {
            listeners.delete(check)
            clearTimeout(timer)
            if (m) resolve(m)
            else
              reject(
                new Error(
                  `${label}: exited before printing ${re}; stdout: ${out.slice(-400)}; stderr: ${err.slice(-400)}`,
                ),
              )
          }
        }
        listeners.add(check)
        check()
      })
    },
  }
}

/**
 * Links `<dir>/tsx-<uid>` to this machine's tsx compile cache (tsx keeps it at `$TMPDIR/tsx-<uid>`, and a host's
 * TMPDIR is its folder): processes started in the host under tsx reuse the workspace's compiled modules instead of
 * each host compiling them afresh (an esbuild service and ~0.5 s of CPU a host). Compiled code only, no data.
 */
function shareTsxCache(dir: string): void {
  const name = `tsx-${typeof process.geteuid === 'function' ? process.geteuid() : userInfo().username}`
  const shared = join(tmpdir(), name)
  mkdirSync(shared, { recursive: true })
  symlinkSync(shared, join(dir, name))
}

function signalNumber(sig: NodeJS.Signals): number {
  return ({ SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 } as Record<string, number>)[sig] ?? 0
}

/**
 * Makes `n` hosts (1..250) on one bridge. `cleanupWith` registers their removal with the test runner where it
 * takes hooks (`onTestFinished` in a test, `afterAll` in a describe body; not inside another hook); handlers of
 * the process's 'exit' and termination signals remove them too.
 */
export function makeNetHosts(n: number, opts: { cleanupWith?: (fn: () => void) => void } = {}): NetHosts {
  if (!Number.isInteger(n) || n < 1 || n > MAX_HOSTS)
    throw new Error(`net-hosts: the number of hosts is 1..${MAX_HOSTS}, not ${n}`)
  const why = netHostsSupport()
  if (why !== undefined) throw new Error(`net-hosts: cannot make hosts here: ${why}`)
  const run = claimRun()
  const sw = switchOf(run)
  const dirs: string[] = []
  const processes = new Set<HostProcess>()
  let closed = false
  // Ended by a signal, the process runs no 'exit' handler: clean up, then die of the signal as it would have.
  const onSignal = (sig: NodeJS.Signals) => {
    close()
    if (process.listenerCount(sig) === 0) process.kill(process.pid, sig)
  }
  const close = () => {
    if (closed) return
    closed = true
    process.removeListener('exit', close)
    for (const sig of SIGNALS) process.removeListener(sig, onSignal)
    for (const p of processes) p.kill('SIGKILL')
    for (let i = 0; i < n; i++) removeNamespace(nsOf(run, i))
    removeNamespace(sw)
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
    rmSync(join(LOCK_DIR, `${run}.pid`), { force: true })
  }
  process.on('exit', close)
  for (const sig of SIGNALS) process.on(sig, onSignal)
  opts.cleanupWith?.(close)
  try {
    ip(['netns', 'add', sw])
    ip(['-n', sw, 'link', 'add', 'br0', 'type', 'bridge'])
    ip(['-n', sw, 'link', 'set', 'br0', 'up'])
    const hosts: NetHost[] = []
    for (let i = 0; i < n; i++) {
      const ns = nsOf(run, i)
      const port = `p${i}`
      const address = `10.88.${run}.${i + 1}`
      ip(['netns', 'add', ns])
      ip(['link', 'add', 'eth0', 'netns', ns, 'type', 'veth', 'peer', 'name', port, 'netns', sw])
      ip(['-n', sw, 'link', 'set', port, 'master', 'br0'])
      ip(['-n', sw, 'link', 'set', port, 'up'])
      ip(['-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0'])
      ip(['-n', ns, 'link', 'set', 'eth0', 'up'])
      ip(['-n', ns, 'link', 'set', 'lo', 'up'])
      const dir = mkdtempSync(join(tmpdir(), `net-host-${run}-${i}-`))
      dirs.push(dir)
      shareTsxCache(dir)
      const argv = (cmd: string, args: readonly string[]) => ['netns', 'exec', ns, cmd, ...args]
      const envOf = (o: RunOptions) => ({ ...process.env, TMPDIR: dir, ...(o.env ?? {}) })
      const start = (cmd: string, args: readonly string[], o: RunOptions) => {
        if (closed) throw new Error(`net-hosts: host ${ns} was removed; make new hosts`)
        const child = spawn('ip', argv(cmd, args), {
          cwd: o.cwd ?? dir,
          env: envOf(o),
          stdio: [o.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
          detached: true,
        })
        const p = track(child, `${ns}: ${cmd}`)
        processes.add(p)
        void p.exited.then(() => processes.delete(p))
        return p
      }
      hosts.push({
        name: `h${i}`,
        ns,
        address,
        dir,
        spawn: (cmd, args, o = {}) => start(cmd, args, o),
        async exec(cmd, args, o = {}) {
          const p = start(cmd, args, o)
          const ms = o.timeoutMs ?? 30_000
          let timedOut = false
          const timer = setTimeout(() => {
            timedOut = true
            p.kill('SIGKILL')
          }, ms)
          const code = await p.exited
          clearTimeout(timer)
          return { code: timedOut ? 124 : code, stdout: p.stdout(), stderr: p.stderr() }
        },
        cut: () => void ip(['-n', sw, 'link', 'set', port, 'down']),
        restore: () => void ip(['-n', sw, 'link', 'set', port, 'up']),
      })
    }
    return { run, hosts, close }
  } catch (err) {
    close()
    throw err
  }
}

/** The namespaces of run `run` that exist now (for tests that check cleanup). */
export function netHostNamespaces(run: number): string[] {
  const list = ipCmd(['netns', 'list'])
  const mine = new RegExp(`^mh${run}-(h\\d+|sw)$`)
  return (list.ok ? list.out.split('\n') : []).map((l) => l.split(' ')[0] ?? '').filter((name) => mine.test(name))
}

export { type DelayedLink, delayLink, relayAddress, relayPorts } from './net-hosts-delay.js'
export { type Relay, type RelayOptions, startRelay } from './net-relay.js'
