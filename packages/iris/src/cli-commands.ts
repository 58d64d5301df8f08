/** @module The commands of `iris` and what each does: `--help` reads this table without loading any command. */
export const COMMANDS = {
  submit: 'submit a job; prints its id',
  status: "show a job's state, tasks and attempts",
  list: 'list jobs, newest first',
  logs: "print a job's output",
  kill: 'kill a job (SIGTERM, then SIGKILL after the grace period)',
  workers: 'list workers',
  job: 'the same commands under the names of Python iris',
  controller: 'run the controller (state in SQLite, gRPC API)',
  worker: 'run a worker that takes tasks from a controller',
  cluster: 'clusters in one process',
  materialize: "put --mount artifacts in a task directory (a task Pod's init container runs it)",
} as const
