/**
 * @module Entry point of a job process with a callable entrypoint: imports the module,
 * calls the export with the arguments from `FRAY_JOB_SPEC`, and exits 0, or 1 on error.
 */
// On iris the replica's index comes from the task; fray's names are the same everywhere.
process.env.FRAY_REPLICA_INDEX ??= process.env.IRIS_TASK_INDEX
process.env.FRAY_REPLICA_COUNT ??= process.env.IRIS_NUM_TASKS
const spec = JSON.parse(process.env.FRAY_JOB_SPEC ?? '{}') as { module: string; export: string; args: unknown[] }
try {
  const mod = (await import(spec.module)) as Record<string, unknown>
  const fn = mod[spec.export]
  if (typeof fn !== 'function')
    throw new Error(`${spec.module} exports no function "${spec.export}"; exports are [${Object.keys(mod).join(', ')}]`)
  await fn(...spec.args)
  process.exitCode = 0
} catch (err) {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`)
  process.exitCode = 1
}
