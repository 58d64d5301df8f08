import { describe, expect, test } from 'vitest'
import { DEFAULT_TEMPLATE_LIMITS, MAX_RANGE, SandboxedTemplate } from './template-sandbox.js'

const render = (src: string, items: Record<string, unknown> = {}, limits = DEFAULT_TEMPLATE_LIMITS) =>
  new SandboxedTemplate(src, 'tpl', limits).render(items)

describe('the template sandbox', () => {
  test('renders as @huggingface/jinja does: globals, range, loops, strftime_now, raise_exception', () => {
    expect(render('{% for i in range(3) %}{{ i }}{% endfor %}|{{ range(1, 7, 2) | join(",") }}|{{ True }}')).toBe(
      '012|1,3,5|true',
    )
    expect(render('{{ range(5, 0, -2) | join(",") }}{{ x }}', { x: '!' })).toBe('5,3,1!')
    expect(render('{{ strftime_now("%Y") }}')).toBe(String(new Date().getFullYear()))
    expect(() => render("{{ raise_exception('nope') }}")).toThrow(/^nope$/)
    expect(render(`{{ range(${MAX_RANGE}) | length }}`)).toBe(String(MAX_RANGE))
  })

  test('range() past 100,000 items is refused before making any, naming the template', () => {
    const t0 = performance.now()
    expect(() => render('{% for i in range(30000000) %}{% endfor %}')).toThrow(
      /^tpl: the template is refused: range\(0, 30000000, 1\) makes 30000000 items, more than the 100000 allowed/,
    )
    expect(() => render(`{{ range(0, ${MAX_RANGE + 1}) | length }}`)).toThrow(/makes 100001 items/)
    expect(performance.now() - t0).toBeLessThan(1000)
  })

  test('a text or list past its cap, and rendering past the time budget, are refused', () => {
    const small = { ...DEFAULT_TEMPLATE_LIMITS, maxOutputChars: 1000, maxItems: 150_000, timeBudgetMs: 60_000 }
    expect(() =>
      render("{% set s = namespace(t='ab') %}{% for i in range(20) %}{% set s.t = s.t + s.t %}{% endfor %}", {}, small),
    ).toThrow(/makes a text of 1024 characters, more than the 1000 allowed/)
    expect(() => render('{{ (range(100000) + range(100000)) | length }}', {}, small)).toThrow(
      /makes a list of 200000 items, more than the 150000 allowed/,
    )
    expect(() =>
      render(
        '{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}',
        {},
        { ...small, timeBudgetMs: 200 },
      ),
    ).toThrow(/^tpl: the template is refused: rendering took longer than the 200 ms allowed/)
  })
})
