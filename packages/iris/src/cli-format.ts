/** @module Human-readable output of the `iris` CLI (tables and status blocks); `--json` bypasses it. */
import type { AttemptStatus, JobStatus, LogLine, WorkerStatus } from './records.js'
import { formatResources } from './resources.js'

const iso = (t?: number) => (t === undefined ? '-' : new Date(t).toISOString())

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n')
}

export function formatJobList(jobs: readonly JobStatus[]): string {
  if (jobs.length === 0) return 'no jobs'
  return table([
    ['JOB', 'STATE', 'PRIORITY', 'TASKS', 'SUBMITTED', 'EXIT'],
    ...jobs.map((j) => [
      j.jobId,
      j.state,
      j.priority,
      `${j.tasks.filter((t) => t.state === 'SUCCEEDED').length}/${j.tasks.length}`,
      iso(j.submittedAt),
      j.exitCode === undefined ? '-' : String(j.exitCode),
    ]),
  ])
}

export function formatJob(job: JobStatus, attempts: readonly AttemptStatus[]): string {
  const lines = [
    `job:       ${job.jobId}`,
    `state:     ${job.state}${job.exitCode !== undefined ? ` (exit ${job.exitCode})` : ''}`,
    `command:   ${job.spec.command.join(' ')}`,
    `resources: ${formatResources(job.spec.resources)} x ${job.spec.replicas}`,
    `priority:  ${job.priority}`,
    ...(job.spec.image ? [`image:     ${job.spec.image}`] : []),
    ...(Object.keys(job.spec.env).length > 0 ? [`env:       ${Object.keys(job.spec.env).join(' ')}`] : []),
    ...(job.spec.secrets
      ? [
          `secrets:   ` +
            `${Object.entries(job.spec.secrets)
              .map(([k, v]) => `${k}=${v}`)
              .join(' ')}`,
        ]
      : []),
    ...(job.spec.parent ? [`parent:    ${job.spec.parent}`] : []),
    `submitted: ${iso(job.submittedAt)}  started: ${iso(job.startedAt)}  finished: ${iso(job.finishedAt)}`,
    ...(job.error ? [`error:     ${job.error}`] : []),
    '',
    table([
      ['TASK', 'STATE', 'ATTEMPTS', 'WORKER', 'EXIT', 'ERROR'],
      ...job.tasks.map((t) => [
        String(t.taskIndex),
        t.state,
        String(t.attempts),
        t.workerId ?? '-',
        t.exitCode === undefined ? '-' : String(t.exitCode),
        t.error ?? '',
      ]),
    ]),
  ]
  if (attempts.length > 0) {
    lines.push(
      '',
      table([
        ['ATTEMPT', 'STATE', 'WORKER', 'EXIT'],
        ...attempts.map((a) => [a.attemptId, a.state, a.workerId, a.exitCode === undefined ? '-' : String(a.exitCode)]),
      ]),
    )
  }
  return lines.join('\n')
}

export function formatWorkers(workers: readonly WorkerStatus[]): string {
  if (workers.length === 0) return 'no workers'
  return table([
    ['WORKER', 'STATE', 'RESOURCES', 'DOCKER', 'HOST'],
    ...workers.map((w) => [w.workerId, w.state, formatResources(w.resources), w.docker ? 'yes' : 'no', w.address]),
  ])
}

export function formatLogLine(l: LogLine, multiTask: boolean): string {
  return multiTask ? `[${l.taskIndex}] ${l.line}` : l.line
}
