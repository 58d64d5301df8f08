import { expect, test } from 'vitest'

test('exports', async () => {
  expect(Object.keys(await import('./index.js')).sort()).toMatchInlineSnapshot(`
    [
      "ATTEMPT_STATES",
      "Controller",
      "ControllerService",
      "DEFAULT_CONTROLLER",
      "DEFAULT_RESOURCES",
      "IRIS_ERROR_CODES",
      "IrisClient",
      "IrisError",
      "JOB_STATES",
      "JobScheduler",
      "JobSpecSchema",
      "LocalCluster",
      "PRIORITIES",
      "TASK_STATES",
      "Worker",
      "buildProgram",
      "finestoreMounts",
      "fits",
      "formatResources",
      "grpcLink",
      "inProcessLink",
      "isFinalJobState",
      "isFinalTaskState",
      "isIrisError",
      "name",
      "parseDuration",
      "parseJobSpec",
      "parseMemory",
      "parseMount",
      "parseResources",
      "resolveJobRequest",
      "runCli",
      "schedule",
      "startController",
      "version",
    ]
  `)
})
