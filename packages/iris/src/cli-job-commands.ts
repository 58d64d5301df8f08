/** @module The job commands of `iris`: submit, status, list, logs, kill, workers, and `job` with the names of Python
 * iris. Loaded when one runs. */
import { UsageError, type CliContext } from '@marin/rigging/cli'
import { InvalidArgumentError, Option, type Command } from 'commander'
import { clientOf, collect, intArg, withConnection, type CliIo } from './cli-io.js'
import { COMMANDS } from './cli-commands.js'
import { formatJob, formatJobList, formatLogLine, formatWorkers } from './cli-format.js'
import { parseDuration } from './duration.js'
import { resolveJobRequest, SECRET_SPEC_MESSAGE } from './job-spec.js'
import { parseResources } from './resources.js'
import { JOB_STATES, PRIORITIES, type JobState } from './states.js'

function parseEnv(pairs: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {}
  for (const p of pairs) {
    const eq = p.indexOf('=')
    if (eq <= 0) throw new UsageError(`--env "${p}": expected KEY=VALUE`)
    env[p.slice(0, eq)] = p.slice(eq + 1)
  }
  return env
}

function parseSecrets(pairs: readonly string[]): Record<string, string> {
  const secrets: Record<string, string> = {}
  for (const p of pairs) {
    const eq = p.indexOf('=')
    const spec = p.slice(eq + 1)
    if (eq <= 0 || !/^(env:.|file:.)/.test(spec))
      throw new UsageError(`--secret "${p}": expected NAME=env:VAR or NAME=file:PATH; ${SECRET_SPEC_MESSAGE}`)
    secrets[p.slice(0, eq)] = spec
  }
  return secrets
}

export function defineSubmit(cmd: Command, io: CliIo, ctx: CliContext): void {
  withConnection(cmd, io)
    .requiredOption('--job-name <name>', 'job name (the id is the name plus a suffix)')
    .option('--resources <spec>', 'per-task resources, e.g. cpu=1,memory=2Gi,gpu=0', 'cpu=1,memory=1Gi,gpu=0')
    .option('--replicas <n>', 'number of tasks', intArg('a replica count', 1), 1)
    .option('--image <image>', 'container image (needs a worker with a docker engine)')
    .option(
      '--env <K=V>',
      'environment variable for the task (repeatable); status and lists show its name only',
      collect,
      [],
    )
    .option(
      '--secret <NAME=SPEC>',
      'secret variable for the task, resolved on the worker from env:VAR or file:PATH (repeatable)',
      collect,
      [],
    )
    .option('--allow-children', "let the job's tasks submit child jobs with their job token")
    .addOption(new Option('--priority <band>', 'priority band').choices(PRIORITIES).default('batch'))
    .option(
      '--mount <ARTIFACT[@VERSION]:path>',
      'materialize a finestore artifact read-only in the task directory (repeatable)',
      collect,
      [],
    )
    .option('--max-retries-failure <n>', 'retries after a non-zero exit', intArg('a retry count'), 0)
    .option('--max-retries-worker <n>', 'retries after the worker is lost', intArg('a retry count'), 3)
    .option('--wait', 'wait for the job to finish; exit with its exit code')
    .argument('<command...>', 'the command to run, after --')
    .action(async (command: string[], o) => {
      const spec = resolveJobRequest({
        name: o.jobName,
        command,
        resources: parseResources(o.resources),
        replicas: o.replicas,
        ...(o.image ? { image: o.image } : {}),
        env: parseEnv(o.env),
        secrets: parseSecrets(o.secret),
        ...(o.allowChildren ? { allowChildren: true } : {}),
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
          if (job.state !== 'SUCCEEDED') ctx.exitWith(job.exitCode && job.exitCode > 0 ? job.exitCode : 1)
        }
      } finally {
        client.close()
      }
    })
}

export function defineStatus(cmd: Command, io: CliIo): void {
  withConnection(cmd, io)
    .argument('<job>', 'job id')
    .option('--json', 'print JSON')
    .action(async (jobId: string, o) => {
      const client = clientOf(o, io)
      try {
        const [job, attempts] = [await client.status(jobId), await client.attempts(jobId)]
        io.out(o.json ? JSON.stringify({ job, attempts }) : formatJob(job, attempts))
      } finally {
        client.close()
      }
    })
}

export function defineList(cmd: Command, io: CliIo): void {
  withConnection(cmd, io)
    .option(
      '--state <state>',
      `only jobs in this state (repeatable): ${JOB_STATES.join(', ')}`,
      (v: string, prev: string[] = []) => {
        if (!(JOB_STATES as readonly string[]).includes(v))
          throw new InvalidArgumentError(`Allowed choices are ${JOB_STATES.join(', ')}.`)
        return [...prev, v]
      },
    )
    .option('--limit <n>', 'at most this many jobs', intArg('a limit', 1), 100)
    .option('--json', 'print JSON')
    .action(async (o) => {
      const client = clientOf(o, io)
      try {
        const jobs = await client.list({ ...(o.state ? { states: o.state as JobState[] } : {}), limit: o.limit })
        io.out(o.json ? JSON.stringify(jobs) : formatJobList(jobs))
      } finally {
        client.close()
      }
    })
}

export function defineLogs(cmd: Command, io: CliIo): void {
  withConnection(cmd, io)
    .argument('<job>', 'job id')
    .option('-f, --follow', 'keep printing new lines until the job ends')
    .option('--since <duration>', 'only lines from the last DURATION, e.g. 5m')
    .option('--task <index>', "only this task's lines", intArg('a task index'))
    .option('--json', 'print one JSON object per line')
    .action(async (jobId: string, o) => {
      if (o.since !== undefined) parseDuration(o.since, '--since')
      const client = clientOf(o, io)
      try {
        const multi = (await client.status(jobId)).spec.replicas > 1
        for await (const l of client.logs(jobId, {
          ...(o.follow ? { follow: true } : {}),
          ...(o.since ? { since: o.since } : {}),
          ...(o.task !== undefined ? { taskIndex: o.task } : {}),
        })) {
          io.out(o.json ? JSON.stringify(l) : formatLogLine(l, multi))
        }
      } finally {
        client.close()
      }
    })
}

export function defineKill(cmd: Command, io: CliIo): void {
  withConnection(cmd, io)
    .argument('<job>', 'job id')
    .action(async (jobId: string, o) => {
      const client = clientOf(o, io)
      try {
        io.out(`${jobId}: ${await client.kill(jobId)}`)
      } finally {
        client.close()
      }
    })
}

export function defineWorkers(cmd: Command, io: CliIo): void {
  withConnection(cmd, io)
    .option('--json', 'print JSON')
    .action(async (o) => {
      const client = clientOf(o, io)
      try {
        const ws = await client.workers()
        io.out(o.json ? JSON.stringify(ws) : formatWorkers(ws))
      } finally {
        client.close()
      }
    })
}

/** `iris job run|logs|stop|status|list`: the same commands under the names Python iris users know. */
export function defineJobGroup(cmd: Command, io: CliIo, ctx: CliContext): void {
  defineSubmit(cmd.command('run').description(COMMANDS.submit), io, ctx)
  defineLogs(cmd.command('logs').description(COMMANDS.logs), io)
  defineKill(cmd.command('stop').description(COMMANDS.kill), io)
  defineStatus(cmd.command('status').description(COMMANDS.status), io)
  defineList(cmd.command('list').description(COMMANDS.list), io)
}
