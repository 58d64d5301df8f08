/**
 * @module Test support: a program that is both a task (`node --import tsx warm-fixture.ts ACTION`) and a warm
 * runner for it (`node --import tsx warm-fixture.ts`, started by a worker). Actions: `report` prints one JSON line
 * (pid, the task's variables, what an earlier task left), `exit N`, `throw`, `sleep` (until killed), `detach`
 * (starts `sleep 1000` in a session of its own, prints `{"pid":…,"child":…}` and returns 0; `detach stay` then
 * sleeps until killed).
 */
import { spawn } from 'node:child_process'
import { serveWarmTasks } from '../warm-task.js'

const g = globalThis as { left?: string }

async function act(args: readonly string[]): Promise<number> {
  const [action, arg] = args
  if (action === 'report') {
    console.log(
      JSON.stringify({
        pid: process.pid,
        job: process.env.IRIS_JOB_ID,
        token: process.env.IRIS_TOKEN,
        // Reversed: the worker scrubs secret values from output.
        secret: process.env.FIX_SECRET?.split('').reverse().join('') ?? null,
        setter: process.env.FIX_SET_BY_TASK ?? null,
        left: g.left ?? null,
        cwd: process.cwd(),
        taskDir: process.env.IRIS_TASK_DIR,
      }),
    )
    console.error(`stderr of ${process.env.IRIS_JOB_ID}`)
    // What a careless task leaves behind: a variable it set, and module state.
    process.env.FIX_SET_BY_TASK = process.env.IRIS_JOB_ID
    g.left = process.env.IRIS_JOB_ID
    return 0
  }
  if (action === 'detach') {
    // What a careless task leaves behind: a daemon the runner would otherwise keep.
    const c = spawn('sleep', ['1000'], { detached: true, stdio: 'ignore' })
    c.unref()
    console.log(JSON.stringify({ pid: process.pid, child: c.pid }))
    if (arg === 'stay') await new Promise(() => setInterval(() => {}, 1000))
    return 0
  }
  if (action === 'exit') process.exit(Number(arg))
  if (action === 'throw') throw new Error('the task threw')
  if (action === 'sleep') {
    console.log('sleeping')
    await new Promise(() => setInterval(() => {}, 1000))
  }
  console.error(`unknown action ${action}`)
  return 2
}

if (process.send)
  serveWarmTasks(({ argv }) => act(argv.slice(argv.findIndex((a) => a.endsWith('warm-fixture.ts')) + 1)))
else process.exitCode = await act(process.argv.slice(2))
