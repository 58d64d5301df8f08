/**
 * @module The `iris` command line: submit, status, list, logs, kill, workers,
 * controller, worker and `cluster start --local`, plus the `job run/logs/stop/list`
 * names Python iris users know. Read commands take `--json`. Bad usage exits 2.
 */
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander'
import pkg from '../package.json' with { type: 'json' }
import { IrisClient } from './client.js'
import { formatJob, formatJobList, formatLogLine, formatWorkers } from './cli-format.js'
import { startController } from './controller-server.js'
import { parseDuration } from './duration.js'
import { IrisError, isIrisError } from './errors.js'
import { grpcLink } from './grpc-link.js'
import { resolveJobRequest } from './job-spec.js'
import { LocalCluster } from './local-cluster.js'
import { finestoreMounts } from './mounts.js'
import { parseResources } from './resources.js'
import { JOB_STATES, PRIORITIES, type JobState } from './states.js'
import { Worker } from './worker.js'

export type CliIo = {
  out: (line: string) => void
  err: (line: string) => void
  env: NodeJS.ProcessEnv
  /** Resolves when a long-running command (controller, worker, cluster) should stop. */
  stopped: Promise<void>
}

/** The controller address used when neither --controller nor IRIS_CONTROLLER is given. */
export const DEFAULT_CONTROLLER = '127.0.0.1:10000'

class UsageError extends Error {}

const intArg = (what: string, min = 0) => (v: string) => {
  if (!/^\d+$/.test(v) || Number(v) < min) throw new InvalidArgumentError(`expected ${what} (a whole number >= ${min})`)
  return Number(v)
}
const collect = (v: string, prev: string[] = []) => [...prev, v]

function tokenOf(o: { tokenEnv: string; tokenFile?: string }, io: CliIo): string | undefined {
  if (o.tokenFile !== undefined) {
    try {
      return readFileSync(o.tokenFile, 'utf8').trim()
    } catch (err) {
      throw new UsageError(`--token-file: cannot read ${o.tokenFile} (${(err as NodeJS.ErrnoException).code}); pass a readable file holding the token`)
    }
  }
  const t = io.env[o.tokenEnv]
  return t === undefined || t === '' ? undefined : t
}

function withConnection(cmd: Command, io: CliIo): Command {
  return cmd
    .addOption(new Option('--controller <address>', 'controller host:port').default(io.env.IRIS_CONTROLLER || DEFAULT_CONTROLLER))
    .addOption(new Option('--token-env <name>', 'environment variable holding the bearer token').default('IRIS_TOKEN'))
    .option('--token-file <path>', 'file holding the bearer token')
}

type ConnOpts = { controller: string; tokenEnv: string; tokenFile?: string }
function clientOf(o: ConnOpts, io: CliIo): IrisClient {
  const token = tokenOf(o, io)
  return new IrisClient({ controller: o.controller, ...(token ? { token } : {}) })
}

function parseEnv(pairs: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {}
  for (const p of pairs) {
    const eq = p.indexOf('=')
    if (eq <= 0) throw new UsageError(`--env "${p}": expected KEY=VALUE`)
    env[p.slice(0, eq)] = p.slice(eq + 1)
  }
  return env
}

function submitCommand(name: string, io: CliIo, run: (fn: () => Promise<void>) => Promise<void>, exit: { code: number }): Command {
  return withConnection(new Command(name), io)
    .description('submit a job; prints its id')
    .requiredOption('--job-name <name>', 'job name (the id is the name plus a suffix)')
    .option('--resources <spec>', 'per-task resources, e.g. cpu=1,memory=2G,gpu=0', 'cpu=1,memory=512M,gpu=0')
    .option('--replicas <n>', 'number of tasks', intArg('a replica count', 1), 1)
    .option('--image <image>', 'container image (needs a worker with a docker engine)')
    .option('--env <K=V>', 'environment variable for the task (repeatable)', collect, [])
    .addOption(new Option('--priority <band>', 'priority band').choices(PRIORITIES).default('batch'))
    .option('--mount <ARTIFACT[@VERSION]:path>', 'materialize a finestore artifact read-only in the task directory (repeatable)', collect, [])
    .option('--max-retries-failure <n>', 'retries after a non-zero exit', intArg('a retry count'), 0)
    .option('--max-retries-worker <n>', 'retries after the worker is lost', intArg('a retry count'), 3)
    .option('--wait', 'wait for the job to finish; exit with its exit code')
    .argument('<command...>', 'the command to run, after --')
    .action((command: string[], o) =>
      run(async () => {
        const spec = resolveJobRequest({
          name: o.jobName,
          command,
          resources: parseResources(o.resources),
          replicas: o.replicas,
          ...(o.image ? { image: o.image } : {}),
          env: parseEnv(o.env),
          priority: o.priority,
          mounts: o.mount,
          maxRetriesFailure: o.maxRetriesFailure,
          maxRetriesWorker: o.maxRetriesWorker,
        })
        const client = clientOf(o, io)
        try {
          const jobId = await client.submit(spec)
          io.out(jobId)
          if (o.wait) {
            const job = await client.wait(jobId)
            io.err(`${jobId}: ${job.state}${job.error ? `: ${job.error}` : ''}`)
            if (job.state !== 'SUCCEEDED') exit.code = job.exitCode && job.exitCode > 0 ? job.exitCode : 1
          }
        } finally {
          client.close()
        }
      }),
    )
}

function statusCommand(name: string, io: CliIo, run: (fn: () => Promise<void>) => Promise<void>): Command {
  return withConnection(new Command(name), io)
    .description("show a job's state, tasks and attempts")
    .argument('<job>', 'job id')
    .option('--json', 'print JSON')
    .action((jobId: string, o) =>
      run(async () => {
        const client = clientOf(o, io)
        try {
          const [job, attempts] = [await client.status(jobId), await client.attempts(jobId)]
          io.out(o.json ? JSON.stringify({ job, attempts }) : formatJob(job, attempts))
        } finally {
          client.close()
        }
      }),
    )
}

function listCommand(name: string, io: CliIo, run: (fn: () => Promise<void>) => Promise<void>): Command {
  return withConnection(new Command(name), io)
    .description('list jobs, newest first')
    .option('--state <state>', `only jobs in this state (repeatable): ${JOB_STATES.join(', ')}`, (v: string, prev: string[] = []) => {
      if (!(JOB_STATES as readonly string[]).includes(v)) throw new InvalidArgumentError(`Allowed choices are ${JOB_STATES.join(', ')}.`)
      return [...prev, v]
    })
    .option('--limit <n>', 'at most this many jobs', intArg('a limit', 1), 100)
    .option('--json', 'print JSON')
    .action((o) =>
      run(async () => {
        const client = clientOf(o, io)
        try {
          const jobs = await client.list({ ...(o.state ? { states: o.state as JobState[] } : {}), limit: o.limit })
          io.out(o.json ? JSON.stringify(jobs) : formatJobList(jobs))
        } finally {
          client.close()
        }
      }),
    )
}

function logsCommand(name: string, io: CliIo, run: (fn: () => Promise<void>) => Promise<void>): Command {
  return withConnection(new Command(name), io)
    .description("print a job's output")
    .argument('<job>', 'job id')
    .option('-f, --follow', 'keep printing new lines until the job ends')
    .option('--since <duration>', 'only lines from the last DURATION, e.g. 5m')
    .option('--task <index>', "only this task's lines", intArg('a task index'))
    .option('--json', 'print one JSON object per line')
    .action((jobId: string, o) =>
      run(async () => {
        if (o.since !== undefined) parseDuration(o.since, '--since')
        const client = clientOf(o, io)
        try {
          const multi = (await client.status(jobId)).spec.replicas > 1
          for await (const l of client.logs(jobId, { ...(o.follow ? { follow: true } : {}), ...(o.since ? { since: o.since } : {}), ...(o.task !== undefined ? { taskIndex: o.task } : {}) })) {
            io.out(o.json ? JSON.stringify(l) : formatLogLine(l, multi))
          }
        } finally {
          client.close()
        }
      }),
    )
}

function killCommand(name: string, io: CliIo, run: (fn: () => Promise<void>) => Promise<void>): Command {
  return withConnection(new Command(name), io)
    .description('kill a job (SIGTERM, then SIGKILL after the grace period)')
    .argument('<job>', 'job id')
    .action((jobId: string, o) =>
      run(async () => {
        const client = clientOf(o, io)
        try {
          io.out(`${jobId}: ${await client.kill(jobId)}`)
        } finally {
          client.close()
        }
      }),
    )
}

/** Builds the program. Exposed so tests can check every flag that infra/ uses. */
export function buildProgram(io: CliIo, run: (fn: () => Promise<void>) => Promise<void> = (fn) => fn(), exit: { code: number } = { code: 0 }): Command {
  const program = new Command('iris')
    .description('iris: run jobs on a cluster of workers')
    .version(pkg.version)
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
    .showHelpAfterError(false)
  program.addCommand(submitCommand('submit', io, run, exit))
  program.addCommand(statusCommand('status', io, run))
  program.addCommand(listCommand('list', io, run))
  program.addCommand(logsCommand('logs', io, run))
  program.addCommand(killCommand('kill', io, run))
  program.addCommand(
    withConnection(new Command('workers'), io)
      .description('list workers')
      .option('--json', 'print JSON')
      .action((o) =>
        run(async () => {
          const client = clientOf(o, io)
          try {
            const ws = await client.workers()
            io.out(o.json ? JSON.stringify(ws) : formatWorkers(ws))
          } finally {
            client.close()
          }
        }),
      ),
  )
  const job = new Command('job').description('the same commands under the names of Python iris')
  job.addCommand(submitCommand('run', io, run, exit))
  job.addCommand(logsCommand('logs', io, run))
  job.addCommand(killCommand('stop', io, run))
  job.addCommand(statusCommand('status', io, run))
  job.addCommand(listCommand('list', io, run))
  program.addCommand(job)

  program.addCommand(
    new Command('controller')
      .description('run the controller (state in SQLite, gRPC API)')
      .option('--host <host>', 'interface to listen on', '127.0.0.1')
      .option('--port <port>', 'port to listen on (0 picks one)', intArg('a port'), 10000)
      .option('--state <path>', 'SQLite state file (default: <prefix>/iris/iris.sqlite)')
      .option('--prefix <dir>', 'marin prefix', io.env.MARIN_PREFIX || '.marin')
      .option('--advertise <address>', 'address workers and tasks use to reach this controller')
      .addOption(new Option('--token-env <name>', 'environment variable holding the bearer token').default('IRIS_TOKEN'))
      .option('--token-file <path>', 'file holding the bearer token')
      .option('--heartbeat <duration>', 'longest a worker heartbeat waits for work', '5s')
      .option('--worker-timeout <duration>', 'a worker silent this long is lost', '30s')
      .action((o) =>
        run(async () => {
          const token = tokenOf(o, io)
          const statePath = resolve(o.state ?? join(o.prefix, 'iris', 'iris.sqlite'))
          const server = await startController({
            statePath,
            host: o.host,
            port: o.port,
            heartbeatMs: parseDuration(o.heartbeat, '--heartbeat'),
            workerTimeoutMs: parseDuration(o.workerTimeout, '--worker-timeout'),
            ...(o.advertise ? { advertise: o.advertise } : {}),
            ...(token ? { token } : {}),
          })
          io.out(`iris controller listening on ${server.address} (state ${statePath})`)
          await io.stopped
          await server.close({ graceMs: 2000 })
        }),
      ),
  )
  program.addCommand(
    new Command('worker')
      .description('run a worker that takes tasks from a controller')
      .addOption(new Option('--controller <address>', 'controller host:port').default(io.env.IRIS_CONTROLLER || DEFAULT_CONTROLLER))
      .addOption(new Option('--token-env <name>', 'environment variable holding the bearer token').default('IRIS_TOKEN'))
      .option('--token-file <path>', 'file holding the bearer token')
      .option('--work-dir <dir>', 'where task directories go', join(io.env.MARIN_PREFIX || '.marin', 'iris', 'work'))
      .option('--worker-id <id>', 'stable worker id (default: hostname plus a random suffix)')
      .option('--resources <spec>', 'what this worker offers (default: all cpus and memory, gpu=0)')
      .option('--kill-grace <duration>', 'time between SIGTERM and SIGKILL', '10s')
      .option('--cleanup-ttl <duration>', 'delete finished task directories after this long', '1d')
      .option('--store <url>', 'finestore root for --mount (default: <prefix>/store)')
      .option('--retry-delay <duration>', 'pause after a failed call to the controller', '1s')
      .action((o) =>
        run(async () => {
          const token = tokenOf(o, io)
          const resources = o.resources ? parseResources(o.resources, { cpu: 1, memory: 0, gpu: 0 }) : undefined
          const link = grpcLink(o.controller, token ? { token } : {})
          const store = o.store ?? `file://${resolve(io.env.MARIN_PREFIX || '.marin', 'store')}`
          const worker = new Worker({
            link,
            controllerAddress: o.controller,
            workDir: o.workDir,
            ...(o.workerId ? { workerId: o.workerId } : {}),
            ...(resources ? { resources } : {}),
            killGraceMs: parseDuration(o.killGrace, '--kill-grace'),
            cleanupTtlMs: parseDuration(o.cleanupTtl, '--cleanup-ttl'),
            retryDelayMs: parseDuration(o.retryDelay, '--retry-delay'),
            materialize: finestoreMounts(store),
            ...(token ? { extraEnv: { IRIS_TOKEN: token } } : {}),
          })
          await worker.start()
          io.out(`iris worker ${worker.workerId} registered with ${o.controller}`)
          await io.stopped
          await worker.stop({ killTasks: true })
          link.close()
        }),
      ),
  )
  const cluster = new Command('cluster').description('clusters in one process')
  cluster.addCommand(
    new Command('start')
      .description('start a controller and workers in this process')
      .option('--local', 'run everything in this process (the only mode)')
      .option('--prefix <dir>', 'where state and task directories go', io.env.MARIN_PREFIX || '.marin')
      .option('--port <port>', 'controller port (0 picks one)', intArg('a port'), 10000)
      .option('--workers <n>', 'number of workers', intArg('a worker count', 1), 1)
      .option('--resources <spec>', 'resources of each worker (default: the whole machine)')
      .action((o) =>
        run(async () => {
          if (!o.local) throw new UsageError('cluster start: only --local is supported; start "iris controller" and "iris worker" on hosts for a real cluster')
          const store = `file://${resolve(o.prefix, 'store')}`
          const c = await LocalCluster.start({
            prefix: o.prefix,
            port: o.port,
            workers: o.workers,
            ...(o.resources ? { resources: parseResources(o.resources, { cpu: 1, memory: 0, gpu: 0 }) } : {}),
            materialize: finestoreMounts(store),
          })
          io.out(`iris local cluster on ${c.address} (prefix ${c.prefix}); export IRIS_CONTROLLER=${c.address}`)
          await io.stopped
          await c.stop()
        }),
      ),
  )
  program.addCommand(cluster)
  for (const c of [program, ...allCommands(program)]) c.exitOverride().configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) })
  return program
}

function allCommands(c: Command): Command[] {
  return c.commands.flatMap((s) => [s, ...allCommands(s)])
}

const USAGE_CODES: ReadonlySet<string> = new Set(['BAD_RESOURCES', 'BAD_REQUEST', 'BAD_MOUNT', 'BAD_DURATION'])

/** Runs the CLI; resolves with the exit code (0 ok, 1 failure, 2 bad usage). */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let failure: unknown
  const run = async (fn: () => Promise<void>) => {
    try {
      await fn()
    } catch (e) {
      failure = e
    }
  }
  const exit = { code: 0 }
  const program = buildProgram(io, run, exit)
  try {
    await program.parseAsync([...argv], { from: 'user' })
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return 0
      return 2
    }
    failure = e
  }
  if (failure === undefined) return exit.code
  if (failure instanceof UsageError || (isIrisError(failure) && USAGE_CODES.has(failure.code))) {
    io.err(`iris: ${(failure as Error).message}`)
    return 2
  }
  io.err(`iris: ${failure instanceof IrisError ? failure.message : failure instanceof Error ? failure.message : String(failure)}`)
  return 1
}
