/**
 * @module A task's whole process tree, found however its processes hide, and ended as one.
 *
 * A task's process group is not its tree: a child that calls `setsid` leaves the group, and one whose parent
 * exits is reparented to init, where no walk by parent id finds it. A tree is therefore its cgroup where it
 * has one, else what the other two ways find (reading /proc off the event loop, and only processes started
 * since the tree's first):
 *
 * - a **cgroup v2** of its own (`<worker's cgroup>/iris-<worker pid>/<token>`), where this host lets the worker
 *   make one and move a process into it (root in a container, or a delegated subtree). The first process is
 *   born in it: the worker steps into the cgroup for the synchronous spawn and back out, so no fork of the task
 *   can be quicker than a move. Nothing leaves a cgroup by `setsid` or reparenting, and `cgroup.kill` ends it
 *   all at once, forks in flight included.
 * - a **marker** in the environment: `IRIS_TASK_TREE` lists the tokens of every tree a process belongs to;
 *   children inherit it through `setsid`, double forks and reparenting alike, and `/proc/<pid>/environ` shows
 *   what a process was started with. This is the fallback where there are no cgroups, and how a warm runner's
 *   task (a call in a process shared with later tasks) is told apart; a program that clears its own
 *   environment escapes it once its parent is gone.
 * - the first process's **group and descendants** by parent id (`/proc/<pid>/stat`), for children started
 *   with an empty environment while their parent still lives.
 *
 * A child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`) would keep orphans as the worker's children, but plain
 * Node cannot make that call without a native addon; the marker does the same job for processes that keep
 * their environment. Linux only: elsewhere a tree is its first process's group, as it always was.
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { isMainThread } from 'node:worker_threads'
import { logger } from '@marin/rigging'

const log = logger('iris')

/** The variable that names the trees a process belongs to: tokens separated by commas, outermost first. */
export const TREE_VARIABLE = 'IRIS_TASK_TREE'

/** After SIGKILL, how long ending a tree waits for processes that cannot die yet (in uninterruptible sleep). */
export const KILL_WAIT_MS = 5000

/** How many /proc files a scan reads at once: a busy host's process table must not flood the thread pool. */
const SCAN_CONCURRENCY = 32

/** A process as /proc/<pid>/stat shows it; `start` is its start time in clock ticks after boot. */
type Stat = { pid: number; ppid: number; pgid: number; start: number; zombie: boolean }

// Fields after the command name, which may itself hold spaces and parentheses: state ppid pgrp ... (starttime 20th).
function parseStat(pid: number, text: string): Stat {
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return { pid, ppid: Number(f[1]), pgid: Number(f[2]), start: Number(f[19]), zombie: f[0] === 'Z' || f[0] === 'X' }
}

function readStat(pid: number): Stat | undefined {
  try {
    return parseStat(pid, readFileSync(`/proc/${pid}/stat`, 'latin1'))
  } catch {
    return undefined
  }
}

async function readStatAsync(pid: number): Promise<Stat | undefined> {
  try {
    return parseStat(pid, await readFile(`/proc/${pid}/stat`, 'latin1'))
  } catch {
    return undefined
  }
}

async function readMarker(pid: number): Promise<string[]> {
  let env: string
  try {
    env = await readFile(`/proc/${pid}/environ`, 'latin1')
  } catch {
    return []
  }
  return markerOf(env)
}

function markerOf(env: string): string[] {
  const key = `${TREE_VARIABLE}=`
  let start = key.length
  if (!env.startsWith(key)) {
    const i = env.indexOf(`\0${key}`)
    if (i < 0) return []
    start = i + 1 + key.length
  }
  const end = env.indexOf('\0', start)
  return env.slice(start, end < 0 ? env.length : end).split(',')
}

async function listPids(): Promise<number[]> {
  try {
    return (await readdir('/proc')).filter((e) => /^\d+$/.test(e)).map(Number)
  } catch {
    return []
  }
}

async function mapLimited<T, R>(items: readonly T[], f: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = []
  for (let i = 0; i < items.length; i += SCAN_CONCURRENCY)
    out.push(...(await Promise.all(items.slice(i, i + SCAN_CONCURRENCY).map(f))))
  return out
}

function alive(pid: number): boolean {
  const s = readStat(pid)
  return s !== undefined && !s.zombie
}

/** The value of `IRIS_TASK_TREE` for a process of a tree `token` whose environment already has `outer`. */
export function withTreeToken(outer: string | undefined, token: string): string {
  return outer ? `${outer},${token}` : token
}

/** Where this process makes its trees' cgroups, or why it cannot; probed once, on the first tree. */
let cgroupBase: CgroupBase | { reason: string } | undefined

/** The folder this process makes its trees' cgroups in, and the cgroup2 mount it is under. */
export type CgroupBase = { dir: string; mount: string }

/** This process's own cgroup v2 (`0::<path>` in /proc/self/cgroup), as a path under the mount. */
function ownCgroup(mount: string): string | undefined {
  try {
    const own = readFileSync('/proc/self/cgroup', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'))
      ?.slice(3)
    return own === undefined ? undefined : join(mount, own)
  } catch {
    return undefined
  }
}

function findCgroupBase(): CgroupBase | { reason: string } {
  if (process.platform !== 'linux') return { reason: 'not Linux' }
  let mount: string | undefined
  try {
    // mountinfo: id parent major:minor root mountpoint options ... - fstype source superoptions
    for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
      const [left, right] = line.split(' - ')
      if (right?.split(' ')[0] === 'cgroup2') {
        mount = left!.split(' ')[4]
        break
      }
    }
  } catch {
    return { reason: 'no /proc/self/mountinfo' }
  }
  if (!mount) return { reason: 'no cgroup2 file system is mounted' }
  const parent = ownCgroup(mount)
  if (parent === undefined) return { reason: 'this process is in no cgroup v2' }
  endStaleTrees(parent)
  const dir = join(parent, `iris-${process.pid}`)
  try {
    mkdirSync(dir, { recursive: true })
  } catch (err) {
    return { reason: `cannot make a cgroup in ${parent} (${(err as NodeJS.ErrnoException).code})` }
  }
  return { dir, mount }
}

/**
 * Ends what workers that are gone left in their task cgroups under `parent` (`iris-<pid>` whose pid no longer
 * lives: a worker killed with SIGKILL, whose tasks' own children the `--pdeathsig` guard does not reach) and
 * removes those cgroups; returns how many cgroups still held processes. Called when a worker makes its own.
 */
export function endStaleTrees(parent: string): number {
  let names: string[]
  try {
    names = readdirSync(parent).filter((n) => /^iris-\d+$/.test(n))
  } catch {
    return 0
  }
  let ended = 0
  const left: string[] = []
  for (const n of names) {
    const pid = Number(n.slice(5))
    // A pid that lives again may be a worker again: its cgroups are left alone.
    if (pid === process.pid || alive(pid)) continue
    const dir = join(parent, n)
    let tasks: string[] = []
    try {
      tasks = readdirSync(dir, { withFileTypes: true })
        .filter((c) => c.isDirectory())
        .map((c) => join(dir, c.name))
    } catch {
      continue
    }
    for (const t of tasks) {
      try {
        if (readFileSync(join(t, 'cgroup.procs'), 'utf8').trim() === '') continue
        writeFileSync(join(t, 'cgroup.kill'), '1')
        ended++
      } catch {
        // Not ours to end, or a kernel without cgroup.kill: left as it is.
      }
    }
    left.push(...tasks, dir)
  }
  if (ended > 0) log.warn({ parent, cgroups: ended }, 'ended task processes that a worker which is gone left running')
  const remove = () => {
    for (const d of left) {
      try {
        rmdirSync(d)
      } catch {
        // Still dying (retried once below), or populated with what cannot be ended.
      }
    }
  }
  remove()
  // SIGKILL is delivered at once but processes take a moment to exit; one more try after that.
  if (ended > 0) setTimeout(remove, 1000).unref()
  return ended
}

export type ProcessTreeOptions = {
  /** Make a cgroup for the tree where the host allows it. @default true */
  cgroup?: boolean
  /** Processes never counted in the tree, even when they carry its marker (a warm runner serving the task). */
  exclude?: readonly number[]
  /**
   * A process started before every process of the tree (a warm runner, for the trees of its tasks): older ones
   * are not looked at. @default the tree's first process
   */
  startedAfter?: number
  /** Count the first process's group and descendants by parent id. @default true */
  group?: boolean
}

/** One task's (or one warm runner's) processes. */
export class ProcessTree {
  /** This tree's token in `IRIS_TASK_TREE`. */
  readonly token = randomBytes(12).toString('hex')
  private root: number | undefined
  private rootAlive = false
  /** Whether the last `members()` saw a living process in the root's group (so signalling the group is safe). */
  private groupLive = false
  private cgroup: string | undefined
  private readonly exclude: Set<number>
  private readonly termed = new Set<number>()
  private groupTermed = false
  private ending: Promise<number[]> | undefined
  /** Start time (clock ticks after boot) before which no process of the tree can have started. */
  private since = 0

  constructor(private readonly opts: ProcessTreeOptions = {}) {
    this.exclude = new Set([process.pid, ...(opts.exclude ?? [])])
    if (opts.startedAfter !== undefined) this.since = readStat(opts.startedAfter)?.start ?? 0
  }

  /** The cgroup the tree's first process was moved into, if any. */
  get cgroupPath(): string | undefined {
    return this.cgroup
  }

  /**
   * Starts the tree's first process with `spawn` (synchronous, as `child_process.spawn` is) inside the tree's
   * cgroup where there can be one: this process steps into the cgroup for the call and back out after it, so
   * the child is born there and nothing it forks can be quicker than the move. Elsewhere the child is only the
   * root of the walk by group and parent.
   */
  start<T extends { readonly pid?: number | undefined }>(spawn: () => T): T {
    const home = this.enterCgroup()
    let child: T
    try {
      child = spawn()
    } finally {
      if (home !== undefined) this.leaveCgroup(home)
    }
    if (child.pid !== undefined) {
      this.root = child.pid
      this.rootAlive = true
      // Every process of the tree starts after its first: older processes are never read.
      if (this.opts.startedAfter === undefined) this.since = readStat(child.pid)?.start ?? 0
    }
    return child
  }

  // Makes the tree's cgroup and moves this process into it; returns the cgroup to come back to.
  // Only from the main thread: the step in and out is synchronous there, so no other start of this process
  // interleaves (a worker thread's spawn during the call would still be born in the cgroup: a window of one
  // fork and exec, which a worker embedded beside threads that start processes should know of).
  private enterCgroup(): string | undefined {
    if (this.opts.cgroup === false || process.platform !== 'linux' || !isMainThread) return undefined
    const base = cgroupSupport()
    if ('reason' in base) {
      if (!warned) log.info({ reason: base.reason }, 'no cgroups for task trees: they are found by marker and parent')
      warned = true
      return undefined
    }
    const home = ownCgroup(base.mount)
    const dir = join(base.dir, this.token)
    if (home === undefined) return undefined
    try {
      mkdirSync(dir)
      writeFileSync(join(dir, 'cgroup.procs'), String(process.pid))
      this.cgroup = dir
      return home
    } catch (err) {
      if (!warned) log.info({ err, dir }, 'cannot use a cgroup for a task: trees are found by marker and parent')
      warned = true
      try {
        rmdirSync(dir)
      } catch {
        // Never made.
      }
      return undefined
    }
  }

  private leaveCgroup(home: string): void {
    try {
      writeFileSync(join(home, 'cgroup.procs'), String(process.pid))
    } catch (err) {
      // Never happens where entering worked; if it does, this tree's cgroup is never killed as a whole (it holds
      // the worker), and its processes are still found by marker and parent.
      log.error({ err, home, cgroup: this.cgroup }, 'the worker could not leave a task cgroup')
      this.cgroup = undefined
    }
  }

  /**
   * The first process has exited and been reaped: its pid may be reused, so it is no longer walked from (its
   * group still counts: a pid is never reused while a living process has it as its group).
   */
  rootExited(): void {
    this.rootAlive = false
  }

  /**
   * The tree's living processes now (zombies are gone already: only their parent's wait is left). Where the tree
   * has a cgroup, that is what the cgroup holds; elsewhere /proc is read (off the event loop), and only processes
   * started since the tree's first are looked at.
   */
  async members(): Promise<number[]> {
    if (this.cgroup) {
      this.groupLive = false
      const found: number[] = []
      try {
        for (const l of readFileSync(join(this.cgroup, 'cgroup.procs'), 'utf8').split('\n')) if (l) found.push(+l)
      } catch {
        // Removed: nothing in it.
      }
      return found.filter((p) => !this.exclude.has(p))
    }
    if (process.platform !== 'linux') {
      this.groupLive = this.rootAlive
      return this.root !== undefined && this.rootAlive ? [this.root] : []
    }
    const group = this.opts.group !== false && this.root !== undefined
    const stats = (await mapLimited(await listPids(), readStatAsync)).filter(
      (st): st is Stat => st !== undefined && !st.zombie && st.start >= this.since,
    )
    const known = new Set(stats.map((st) => st.pid))
    const children = new Map<number, number[]>()
    for (const st of stats) {
      const siblings = children.get(st.ppid)
      if (siblings) siblings.push(st.pid)
      else children.set(st.ppid, [st.pid])
    }
    const found = new Set<number>()
    this.groupLive = false
    for (const st of stats) {
      if (group && st.pgid === this.root) {
        found.add(st.pid)
        this.groupLive = true
      }
    }
    const rest = stats.filter((st) => !found.has(st.pid) && !this.exclude.has(st.pid))
    const marked = await mapLimited(rest, async (st) => ((await readMarker(st.pid)).includes(this.token) ? st.pid : 0))
    for (const p of marked) if (p !== 0) found.add(p)
    const queue = [...found]
    if (group && this.rootAlive && known.has(this.root!)) queue.push(this.root!)
    while (queue.length > 0) {
      const p = queue.pop()!
      if (this.exclude.has(p)) continue
      found.add(p)
      for (const c of children.get(p) ?? []) if (!found.has(c)) queue.push(c)
    }
    return [...found].filter((p) => !this.exclude.has(p) && known.has(p))
  }

  /**
   * Ends every process of the tree: SIGTERM, SIGKILL to what is left after `graceMs`, and resolves once none is
   * left, with the pids that would not die within `KILL_WAIT_MS` of the SIGKILL (none, unless stuck in the
   * kernel). Later calls get the first call's promise.
   */
  end(graceMs: number): Promise<number[]> {
    this.ending ??= this.finish(graceMs)
    return this.ending
  }

  /** Whether `end` was called. */
  get ended(): boolean {
    return this.ending !== undefined
  }

  private async finish(graceMs: number): Promise<number[]> {
    const killAt = Date.now() + graceMs
    let giveUpAt = Number.POSITIVE_INFINITY
    let pause = 5
    let left: number[] = []
    for (;;) {
      const pids = await this.members()
      if (pids.length === 0) break
      const now = Date.now()
      if (now >= giveUpAt) {
        left = pids
        log.warn({ pids, cgroup: this.cgroup }, 'task processes did not die after SIGKILL; their resources are freed')
        break
      }
      if (now >= killAt) {
        if (giveUpAt === Number.POSITIVE_INFINITY) giveUpAt = now + KILL_WAIT_MS
        this.signalAll(pids, 'SIGKILL')
      } else {
        // Each process gets one SIGTERM: a task that traps it is not made to handle it again and again.
        this.signalAll(
          pids.filter((p) => !this.termed.has(p)),
          'SIGTERM',
        )
        for (const p of pids) this.termed.add(p)
      }
      // Polls fast at first (most trees end at the first signal), never sleeping past the SIGKILL.
      const wait = now < killAt ? Math.min(pause, killAt - now) : pause
      await new Promise((r) => setTimeout(r, Math.max(1, wait)))
      pause = Math.min(pause * 2, 100)
    }
    this.removeCgroup()
    return left
  }

  private signalAll(pids: readonly number[], sig: NodeJS.Signals): void {
    if (sig === 'SIGKILL' && this.cgroup && !pids.includes(process.pid) && !this.holdsSelf()) {
      try {
        // Atomic: a fork in flight is killed too.
        writeFileSync(join(this.cgroup, 'cgroup.kill'), '1')
      } catch {
        // Kernels before 5.14 have no cgroup.kill: the signals below do it.
      }
    }
    if (
      this.opts.group !== false &&
      this.root !== undefined &&
      this.groupLive &&
      !(sig === 'SIGTERM' && this.groupTermed)
    ) {
      if (sig === 'SIGTERM') this.groupTermed = true
      try {
        process.kill(-this.root, sig)
      } catch {
        // The group is gone, or the root was never a group leader.
      }
    }
    for (const p of pids) {
      try {
        process.kill(p, sig)
      } catch {
        // Already gone.
      }
    }
  }

  private holdsSelf(): boolean {
    try {
      return readFileSync(join(this.cgroup!, 'cgroup.procs'), 'utf8').split('\n').includes(String(process.pid))
    } catch {
      return false
    }
  }

  private removeCgroup(): void {
    if (!this.cgroup) return
    try {
      rmdirSync(this.cgroup)
    } catch (err) {
      // A process stuck in the kernel keeps it; it is retried by nobody, and removed when the worker's base is.
      log.debug({ err, cgroup: this.cgroup }, 'task cgroup not removed')
      return
    }
    this.cgroup = undefined
  }
}

let warned = false

/** Where trees' cgroups are made in this process, or why there are none (probed once). */
export function cgroupSupport(): CgroupBase | { reason: string } {
  cgroupBase ??= findCgroupBase()
  return cgroupBase
}
