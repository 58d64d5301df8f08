import { logger } from '@marin/rigging'
import { expect, test } from 'vitest'

// Test output shows results, not library chatter: tests that read info lines set the level they need.
test('library logs are at warn in tests, for this process and the processes it starts', () => {
  expect(process.env.LOG_LEVEL).toBe('warn')
  const log = logger('test-env')
  expect(log.isLevelEnabled('warn')).toBe(true)
  expect(log.isLevelEnabled('info')).toBe(false)
})
