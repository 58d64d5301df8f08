import { expect, test } from 'vitest'

test('exports', async () => {
  expect(Object.keys(await import('./index.js')).sort()).toMatchInlineSnapshot(`
    [
      "ActorDiedError",
      "ActorGroup",
      "ActorPool",
      "FRAY_ERROR_CODES",
      "FrayError",
      "FrayIrisClient",
      "JobRequest",
      "LocalClient",
      "Mesh",
      "MeshMember",
      "ParameterServer",
      "ParameterServerClient",
      "ParameterShard",
      "Resources",
      "actorClass",
      "currentActor",
      "currentClient",
      "currentMesh",
      "isFrayError",
      "jobRequest",
      "memoryBytes",
      "name",
      "resolveAxes",
      "resources",
      "setDefaultClient",
      "version",
      "withClient",
    ]
  `)
})
