import { expect, test } from 'vitest'

test('exports', async () => {
  expect(Object.keys(await import('./index.js')).sort()).toMatchInlineSnapshot(`
    [
      "ArtifactInput",
      "BROWN_HELD_OUT_FILES",
      "BUILTIN_TASKS",
      "Config",
      "Executor",
      "Experiment",
      "MARIN_ERROR_CODES",
      "MarinError",
      "OutputRef",
      "STEP_STATUSES",
      "Step",
      "Versioned",
      "artifactRef",
      "canonicalJson",
      "computeVersions",
      "dedupStep",
      "dependenciesOf",
      "evalStep",
      "explainStep",
      "formatArtifactRef",
      "formatExplanation",
      "formatPlan",
      "ingestStep",
      "irisRunner",
      "isArtifactRef",
      "isExperiment",
      "isMarinError",
      "isOutputRef",
      "isVersioned",
      "loadExperiment",
      "localRunner",
      "mainArtifact",
      "name",
      "outputPathOf",
      "parseArtifactRef",
      "parseStepArtifacts",
      "planStep",
      "prepare",
      "readHistory",
      "readInfo",
      "readStatus",
      "resolveConfig",
      "runExperiment",
      "runIfMain",
      "runMain",
      "runStepHere",
      "step",
      "tokenizeStep",
      "topoSort",
      "trainStep",
      "version",
      "versioned",
      "waitForLease",
      "writeArtifacts",
    ]
  `)
})

test('subpath entry points: @marin/marin/serve, /eval, /report', async () => {
  const [serve, evaluation, report] = await Promise.all([
    import('@marin/marin/serve'),
    import('@marin/marin/eval'),
    import('@marin/marin/report'),
  ])
  expect(Object.keys(serve).sort()).toEqual([
    'DEFAULT_MAX_PREFILL_TOKENS',
    'Engine',
    'createApp',
    'loadModel',
    'startServer',
  ])
  expect(Object.keys(evaluation)).toEqual(
    expect.arrayContaining([
      'BUILTIN_TASKS',
      'LocalLanguageModel',
      'OpenAICompletionsModel',
      'evalStep',
      'evaluate',
      'runTask',
    ]),
  )
  expect(Object.keys(report)).toEqual(expect.arrayContaining(['buildReport', 'publishSite', 'renderCharts']))
})
