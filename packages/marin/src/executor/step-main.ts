/**
 * @module The program an iris job runs for one step, in a process of its own:
 * `node --import tsx step-main.ts SCRIPT STEP NAME_HASH [--attempt ID] [--owner OWNER] [--force]`
 * (see `step-call.ts`). Workers with warm runners run the same arguments as a call in
 * `warm-step-runner.ts` instead.
 */
import { scrubProcessOutput } from '@marin/rigging'
import { runStepJob } from './step-call.js'

// This process may read secrets: what it prints (the job log the driver keeps and shows) holds none.
scrubProcessOutput()
process.exit(await runStepJob(process.argv.slice(2), process.env))
