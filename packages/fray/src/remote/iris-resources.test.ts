import { DEFAULT_RESOURCES, LocalCluster, parseResources } from '@marin/iris'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { FrayIrisClient } from '../iris-client.js'

// A memory size means the same bytes whether fray or iris reads it: fray hands iris a number.
describe('memory requests from fray reach iris as the bytes iris would read', () => {
  let cluster: LocalCluster
  let fray: FrayIrisClient
  beforeAll(async () => {
    cluster = await LocalCluster.start({
      workers: 1,
      resources: { cpu: 8, memory: 64 * 2 ** 30, gpu: 0 },
      killGraceMs: 1_000,
    })
    fray = new FrayIrisClient({ iris: cluster.client() })
  })
  afterAll(async () => {
    await fray.shutdown()
    await cluster.stop()
  })

  const irisMemory = async (resources: { memory?: string | number }) => {
    const job = await fray.submit({ name: 'sized', entrypoint: { command: [process.execPath, '-e', ''] }, resources })
    await job.wait()
    return (await cluster.client().status(job.jobId)).spec.resources.memory
  }

  test.each(['4G', '4Gi', '512Mi', '1500M', '3000000000'])('memory %s', async (memory) => {
    const bytes = await irisMemory({ memory })
    expect(bytes).toBe(parseResources(`memory=${memory}`).memory)
  })

  test('4G is 4×10⁹ bytes and 4Gi is 4×2³⁰ on both sides', async () => {
    expect(await irisMemory({ memory: '4G' })).toBe(4e9)
    expect(await irisMemory({ memory: '4Gi' })).toBe(4 * 2 ** 30)
  })

  test('the default request is the same in fray and iris', async () => {
    expect(await irisMemory({})).toBe(DEFAULT_RESOURCES.memory)
  })
})
