import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { SecretStore } from '@marin/rigging'
import { publishSite } from './publish.js'

const dir = mkdtempSync(join(tmpdir(), 'marin-publish-secret-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('publishSite', () => {
  it('publishes no secret value this process read', async () => {
    const key = new SecretStore({
      specs: { api_key: `literal:sk-publish-${Date.now().toString(36)}-abcdef` },
      sources: [],
    }).get('api_key')
    const target = join(dir, 'site')
    await publishSite(
      new Map([
        ['index.html', `<pre>Error: bad key ${key}</pre>`],
        ['data.json', JSON.stringify({ error: `bad key ${key}` })],
      ]),
      target,
    )
    expect(readFileSync(join(target, 'index.html'), 'utf8')).toBe('<pre>Error: bad key [REDACTED]</pre>')
    expect(readFileSync(join(target, 'data.json'), 'utf8')).not.toContain(key)
  })
})
