/**
 * @module The program side of a warm runner (`@marin/iris/warm-task`): a process an iris worker keeps
 * between tasks of jobs that name it as their `runner`, so that what the program loads once (modules,
 * a compiled script) is not loaded again for each task. `serveWarmTasks(handler)` answers the
 * worker's calls, one task at a time: it puts the task's own variables (its job token, its ids, its
 * folder) into `process.env` and its folder as the working directory, calls `handler` with the task's
 * argv, takes them out again, and reports the exit code. What the handler prints to stdout and stderr
 * is the task's output. A handler that throws ends its task with code 1; one that exits the process,
 * or crashes it, ends only its own task, and the worker starts a fresh runner for the next.
 *
 * @example
 * // runner.ts, named by jobs as runner: { command: ['node', 'runner.js'] }
 * serveWarmTasks(async ({ argv }) => ((await import(argv[0]!)) as { main(): Promise<number> }).main())
 */
import { IrisError } from './errors.js'

/** What a runner gets for one task. */
export type WarmTask = {
  /** The job's command: argv[0] is the program the job would run without a warm runner. */
  readonly argv: readonly string[]
  /** The task's own variables, already in `process.env` while the handler runs. */
  readonly env: Readonly<Record<string, string>>
  /** The task's folder, already the working directory while the handler runs. */
  readonly cwd: string
}

/** Runs one task; resolves with its exit code (undefined is 0). */
export type WarmTaskHandler = (task: WarmTask) => Promise<number | undefined> | number | undefined

/** Written on stdout and stderr after each task, so the worker knows where a task's output ends. */
export const WARM_TASK_END = '\u001eiris-task-end:'

/** Worker → runner. */
export type WarmRunMessage = {
  readonly type: 'run'
  readonly id: string
  readonly argv: readonly string[]
  readonly env: Record<string, string>
  readonly cwd: string
}
/** Runner → worker. */
export type WarmDoneMessage = { readonly type: 'done'; readonly id: string; readonly code: number }

const isRun = (m: unknown): m is WarmRunMessage =>
  typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'run'

function write(stream: NodeJS.WriteStream, text: string): Promise<void> {
  return new Promise((resolve) => {
    if (!stream.write(text)) stream.once('drain', () => resolve())
    else resolve()
  })
}

/**
 * Serves the worker's task calls until the worker goes away. Throws when this process was not
 * started by an iris worker as a warm runner.
 */
export function serveWarmTasks(handler: WarmTaskHandler): void {
  const send = process.send?.bind(process)
  if (!send)
    throw new IrisError(
      'BAD_REQUEST',
      'serveWarmTasks: this process has no channel to an iris worker; a warm runner is started ' +
        "by the worker for jobs that name it as their runner, not run by hand (run the job's command instead)",
    )
  const base = process.cwd()
  const baseEnv = { ...process.env }
  process.on('message', async (m: unknown) => {
    if (!isRun(m)) return
    Object.assign(process.env, m.env)
    let code = 0
    try {
      process.chdir(m.cwd)
      const r = await handler({ argv: m.argv, env: m.env, cwd: m.cwd })
      code = typeof r === 'number' ? r : 0
    } catch (err) {
      await write(process.stderr, `${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
      code = 1
    } finally {
      // The next task starts from the runner's own environment: nothing this task was given or set stays in it.
      for (const k of Object.keys(process.env)) if (!(k in baseEnv)) delete process.env[k]
      Object.assign(process.env, baseEnv)
      process.chdir(base)
    }
    await write(process.stdout, `${WARM_TASK_END}${m.id}\n`)
    await write(process.stderr, `${WARM_TASK_END}${m.id}\n`)
    send({ type: 'done', id: m.id, code } satisfies WarmDoneMessage)
  })
  // The worker is gone (or dropped this runner): so is the runner.
  process.on('disconnect', () => process.exit(0))
}
