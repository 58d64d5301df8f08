/**
 * @module The cluster guide (docs/guides/cluster.md): the first experiment, unchanged, on an iris cluster.
 * Here the cluster is local (a controller and two workers in this process, as `iris cluster start --local`
 * starts them) and the run reaches it by address and token, exactly as it would reach a remote controller.
 */
import { readFile } from 'node:fs/promises'
import { LocalCluster } from '@marin/iris'
import { runExperiment } from '@marin/marin'
import { localMarinPrefix } from '@marin/rigging'
import experiment from './first-experiment.js'

const cluster = await LocalCluster.start({ prefix: localMarinPrefix(), workers: 2 })
try {
  const token = (await readFile(cluster.tokenFile, 'utf8')).trim()
  // Against a remote controller: runExperiment(experiment, { cluster: 'ctrl-host:10000', token }),
  // or `marin run experiments/guides/first-experiment.ts --cluster ctrl-host:10000` with IRIS_TOKEN set.
  const record = await runExperiment(experiment, { cluster: cluster.address, token })
  for (const job of await cluster.client().list()) console.log(`iris job ${job.name}: ${job.state}`)
  console.log(`${record.experiment}: ${record.status}`)
  process.exitCode = record.status === 'SUCCESS' ? 0 : 1
} finally {
  await cluster.stop()
}
