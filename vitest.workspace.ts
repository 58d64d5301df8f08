/**
 * The test projects: one per package, plus the repository scripts.
 * vitest 4 no longer reads this file by itself; `vitest.config.ts` imports it.
 */
export default [
  'packages/rigging',
  'packages/ducky',
  'packages/dupekit',
  'packages/finestore',
  'packages/iris',
  'packages/fray',
  'packages/zephyr',
  'packages/datakit',
  'packages/levanter',
  'packages/marin',
  'scripts',
  'experiments',
]
