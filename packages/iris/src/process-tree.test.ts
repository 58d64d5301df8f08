/**
 * A task's process tree is found however its processes hide (a new session, an empty environment, reparented to
 * init) and ended as one: by the environment marker and parent ids alone, and by a cgroup where this host allows
 * one. Real processes; each test kills what it started, by a tag in their environment, even when it fails.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { afterEach, describe, expect, test } from 'vitest'
import { cgroupSupport, endStaleTrees, ProcessTree, TREE_VARIABLE, withTreeToken } from './process-tree.js'
import { isAlive, killTagged, taggedProcesses } from './internal/test-processes.js'

const linux = process.platform === 'linux'
let tag = ''
afterEach(() => {
  killTagged(tag)
})

/** Starts `sh -c script` as the tree's first process (its own group, the marker set) and waits for it to exit. */
async function startTree(tree: ProcessTree, script: string, marker = tree.token): Promise<number[]> {
  tag = `tree-${randomBytes(4).toString('hex')}`
  const child = tree.start(() =>
    spawn('sh', ['-c', script], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', IRIS_TEST_TAG: tag, [TREE_VARIABLE]: marker },
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
    }),
  )
  let out = ''
  child.stdout!.on('data', (c) => (out += c))
  await new Promise((r) => child.once('exit', r))
  tree.rootExited()
  // The script prints the pids it left behind, one a line.
  while (!out.endsWith('\n')) await new Promise((r) => setTimeout(r, 5))
  return out.trim().split('\n').map(Number)
}

describe.skipIf(!linux)('without cgroups', () => {
  test('a setsid child reparented to init is found by its marker and ended', async () => {
    const tree = new ProcessTree({ cgroup: false })
    const [pid] = await startTree(tree, 'setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $!')
    expect(isAlive(pid!)).toBe(true)
    // Its parent is gone and it left the group: only the marker still ties it to the task.
    const ppid = Number(readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1]!.split(' ')[1])
    expect(ppid).not.toBe(process.pid)
    expect(await tree.members()).toEqual([pid])
    expect(await tree.end(5000)).toEqual([])
    expect(isAlive(pid!)).toBe(false)
    expect(taggedProcesses(tag)).toEqual([])
  })

  test('a child with an empty environment is found through its living parent', async () => {
    const tree = new ProcessTree({ cgroup: false })
    // The parent (in a session of its own, with the marker) waits; its child has no environment at all.
    const [parent] = await startTree(
      tree,
      'setsid sh -c "env -i sleep 1000 & wait" >/dev/null 2>&1 </dev/null & echo $!',
    )
    let members: number[] = []
    for (let i = 0; i < 200 && members.length < 2; i++) {
      members = await tree.members()
      await new Promise((r) => setTimeout(r, 10))
    }
    expect(members).toContain(parent)
    expect(members).toHaveLength(2)
    const child = members.find((p) => p !== parent)!
    expect(readFileSync(`/proc/${child}/environ`, 'latin1')).toBe('')
    await tree.end(5000)
    expect(isAlive(parent!)).toBe(false)
    expect(isAlive(child)).toBe(false)
  })

  test('SIGTERM first; what ignores it gets SIGKILL after the grace period, and end waits for it', async () => {
    const tree = new ProcessTree({ cgroup: false })
    const [pid] = await startTree(
      tree,
      // It says when its trap is set (a SIGTERM before that would end it at once): only then does the root exit.
      'r=$(mktemp -u); ' +
        'setsid sh -c "trap \'\' TERM; : > $r; while :; do sleep 0.05; done" >/dev/null 2>&1 </dev/null & ' +
        'p=$!; until [ -e $r ]; do sleep 0.01; done; rm -f $r; echo $p',
    )
    const t0 = Date.now()
    await tree.end(300)
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290)
    expect(isAlive(pid!)).toBe(false)
    expect(await tree.members()).toEqual([])
  })

  test('a nested tree belongs to the outer tree too; another tree is never counted', async () => {
    const outer = new ProcessTree({ cgroup: false })
    const inner = new ProcessTree({ cgroup: false })
    const stranger = new ProcessTree({ cgroup: false })
    const [pid] = await startTree(
      inner,
      'setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $!',
      withTreeToken(outer.token, inner.token),
    )
    expect(await inner.members()).toEqual([pid])
    expect(await outer.members()).toEqual([pid])
    expect(await stranger.members()).toEqual([])
    await outer.end(1000)
    expect(isAlive(pid!)).toBe(false)
  })
})

const cg = linux ? cgroupSupport() : { reason: 'not Linux' }
describe.skipIf('reason' in cg)(`with a cgroup (${'reason' in cg ? cg.reason : 'available here'})`, () => {
  test('a child that leaves session, environment and parent is still in the cgroup, and is ended', async () => {
    const tree = new ProcessTree()
    // No marker can follow it (env -i), its group and parent are gone: only the cgroup holds it.
    const [pid] = await startTree(
      tree,
      'setsid env -i IRIS_TEST_TAG=$IRIS_TEST_TAG sleep 1000 >/dev/null 2>&1 </dev/null & echo $!',
    )
    const dir = tree.cgroupPath!
    expect(dir).toBeDefined()
    expect(readFileSync(`${dir}/cgroup.procs`, 'utf8').trim()).toBe(String(pid))
    // The worker stepped back out of it: killing the cgroup never kills the worker.
    expect(readFileSync('/proc/self/cgroup', 'utf8')).not.toContain(tree.token)
    expect(await tree.members()).toEqual([pid])
    expect(await tree.end(5000)).toEqual([])
    expect(isAlive(pid!)).toBe(false)
    // The cgroup is removed once empty.
    expect(existsSync(dir)).toBe(false)
  })

  test('what a worker that is gone left in its task cgroups is ended when a worker next makes its own', async () => {
    tag = `tree-${randomBytes(4).toString('hex')}`
    // A pid that no longer lives, as a worker killed with SIGKILL leaves its cgroups' names.
    const gone = spawn('true')
    await new Promise((r) => gone.once('exit', r))
    const stale = join(dirname((cg as { dir: string }).dir), `iris-${gone.pid}`)
    const task = join(stale, 'task')
    mkdirSync(task, { recursive: true })
    const sleeper = spawn('sleep', ['1000'], { env: { ...process.env, IRIS_TEST_TAG: tag }, stdio: 'ignore' })
    writeFileSync(join(task, 'cgroup.procs'), String(sleeper.pid))
    expect(endStaleTrees(dirname(stale))).toBe(1)
    await new Promise((r) => sleeper.once('exit', r))
    expect(sleeper.signalCode).toBe('SIGKILL')
    for (let i = 0; i < 40 && existsSync(stale); i++) await new Promise((r) => setTimeout(r, 50))
    expect(existsSync(stale)).toBe(false)
  })
})
