/**
 * @module The warm runner of step jobs: an iris worker keeps this process between the steps of a run
 * and calls it for each (`serveWarmTasks`), so the experiment script and the modules its steps use are
 * imported once, not once per step. Each call is what `step-main.ts` does in a process of its own.
 */
import { serveWarmTasks } from '@marin/iris/warm-task'
import { scrubProcessOutput } from '@marin/rigging'
import { runStepJob } from './step-call.js'

// Steps may read secrets: what they print (the job logs the driver keeps and shows) holds none.
scrubProcessOutput()
serveWarmTasks(({ argv }) => {
  // The job's command is `node --import tsx …/step-main.ts ARGS`: the step's arguments follow step-main.
  const at = argv.findIndex((a) => /[\\/]step-main\.[cm]?[jt]s$/.test(a))
  return runStepJob(argv.slice(at + 1), process.env)
})
