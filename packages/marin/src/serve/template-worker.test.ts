import { afterEach, describe, expect, test } from 'vitest'
import { DEFAULT_TEMPLATE_LIMITS } from './template-sandbox.js'
import { TemplateWorker } from './template-worker.js'

const open: TemplateWorker[] = []
const worker = (src: string, limits = DEFAULT_TEMPLATE_LIMITS, heapMb?: number) => {
  const w = new TemplateWorker(src, 'ckpt/tokenizer_config.json: chat_template', limits, heapMb)
  open.push(w)
  return w
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((w) => w.close()))
})

describe('templates on their own worker thread', () => {
  test('renders in order; the template’s own errors come back as they are', async () => {
    const w = worker("{% if x == 'boom' %}{{ raise_exception('no boom') }}{% endif %}<{{ x }}>")
    const [a, b] = await Promise.all([w.render({ x: 1 }), w.render({ x: 2 })])
    expect([a, b]).toEqual(['<1>', '<2>'])
    await expect(w.render({ x: 'boom' })).rejects.toThrow(/^no boom$/)
    await expect(w.render({ x: 3 })).resolves.toBe('<3>')
  }, 20_000)

  test('a loop the sandbox cannot interrupt ends at the deadline; the next render gets a fresh worker', async () => {
    const w = worker(
      "{% if x == 'loop' %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}" +
        '{% endif %}ok',
      { ...DEFAULT_TEMPLATE_LIMITS, timeBudgetMs: 100 },
    )
    const t0 = performance.now()
    await expect(w.render({ x: 'loop' })).rejects.toMatchObject({
      code: 'BAD_TEMPLATE',
      message: expect.stringMatching(
        new RegExp(
          String.raw`^ckpt/tokenizer_config\.json: chat_template: the template is refused: rendering ` +
            '(took longer than the 100 ms|did not finish within 1100 ms)',
        ),
      ),
    })
    // Started from source, the worker takes a while to load; the refusal itself is due 1.1 s after it runs.
    expect(performance.now() - t0).toBeLessThan(15_000)
    await expect(w.render({ x: 'fine' })).resolves.toBe('ok')
  }, 30_000)

  test('a template that allocates past the heap cap ends its worker, not the process', async () => {
    // 30 lists of 100,000 numbers each: every value within the sandbox's limits, together past a 48 MiB heap.
    const ranges = Array.from({ length: 30 }, () => 'range(100000)').join(', ')
    const w = worker(
      `{% set xs = [${ranges}] %}{{ xs | length }}`,
      { ...DEFAULT_TEMPLATE_LIMITS, timeBudgetMs: 60_000 },
      48,
    )
    await expect(w.render({})).rejects.toMatchObject({
      code: 'BAD_TEMPLATE',
      message: expect.stringMatching(/the template is refused: rendering used more than the 48 MiB of memory allowed/),
    })
    expect(process.memoryUsage().rss).toBeLessThan(2 * 2 ** 30)
  }, 30_000)
})
