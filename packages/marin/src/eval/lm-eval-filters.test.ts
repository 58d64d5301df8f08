import { describe, expect, test } from 'vitest'
import { applyFilter, exactMatchScore, parseFilterList, pythonRegex } from './lm-eval-filters.js'

const GSM8K_FILTERS = parseFilterList(
  [
    {
      name: 'strict-match',
      filter: [{ function: 'regex', regex_pattern: '#### (\\-?[0-9\\.\\,]+)' }, { function: 'take_first' }],
    },
    {
      name: 'flexible-extract',
      filter: [
        { function: 'regex', group_select: -1, regex_pattern: '(-?[$0-9.,]{2,})|(-?[0-9]+)' },
        { function: 'take_first' },
      ],
    },
  ],
  'gsm8k.yaml',
)
const [strict, flexible] = GSM8K_FILTERS as [(typeof GSM8K_FILTERS)[0], (typeof GSM8K_FILTERS)[0]]

describe('lm-eval filters (expected values are what Python re / collections give on the same strings)', () => {
  test("gsm8k's strict-match: the number after ####, else [invalid]", () => {
    expect(applyFilter(strict, ['She has 3 apples. #### 72\n'])).toBe('72')
    expect(applyFilter(strict, ['#### -1,5 and #### 9'])).toBe('-1,5')
    expect(applyFilter(strict, ['no answer here'])).toBe('[invalid]')
  })

  test("gsm8k's flexible-extract: the last match, its first non-empty group", () => {
    // re.findall gives [('$1,200', ''), ('', '5')]; group_select -1 takes ('', '5') → '5'.
    expect(applyFilter(flexible, ['Costs $1,200 and then 5 more'])).toBe('5')
    expect(applyFilter(flexible, ['The answer is 18.'])).toBe('18.')
    expect(applyFilter(flexible, ['none'])).toBe('[invalid]')
  })

  test('group_select 0 on several groups, fallback, and whole-match patterns', () => {
    const [f] = parseFilterList(
      [
        {
          name: 'x',
          filter: [{ function: 'regex', regex_pattern: '(a)|(b)', fallback: 'NONE' }, { function: 'take_first' }],
        },
      ],
      't.yaml',
    )
    expect(applyFilter(f!, ['zzb a'])).toBe('b')
    expect(applyFilter(f!, ['zzz'])).toBe('NONE')
    const [w] = parseFilterList(
      [{ name: 'w', filter: [{ function: 'regex', regex_pattern: '[A-D]', group_select: 1 }] }],
      't.yaml',
    )
    expect(applyFilter(w!, ['A or C', 'D'])).toEqual(['C', '[invalid]'])
  })

  test('remove_whitespace, lowercase, uppercase, take_first_k, majority_vote', () => {
    const [f] = parseFilterList(
      [
        {
          name: 'norm',
          filter: [{ function: 'remove_whitespace' }, { function: 'lowercase' }, { function: 'take_first' }],
        },
      ],
      't.yaml',
    )
    expect(applyFilter(f!, ['  Hello World \n', 'x'])).toBe('hello world')
    const [u] = parseFilterList([{ name: 'u', filter: [{ function: 'uppercase' }] }], 't.yaml')
    expect(applyFilter(u!, ['ab', 'c'])).toEqual(['AB', 'C'])
    // Counter(['a','b','b','a','c']).most_common(1) == [('a', 2)]: the first seen among ties.
    const [v] = parseFilterList(
      [
        {
          name: 'vote',
          filter: [{ function: 'take_first_k', k: 5 }, { function: 'majority_vote' }, { function: 'take_first' }],
        },
      ],
      't.yaml',
    )
    expect(applyFilter(v!, ['a', 'b', 'b', 'a', 'c', 'c', 'c'])).toBe('a')
  })

  test("exact_match with gsm8k's metric options (regexes_to_ignore with an inline (?s) flag, ignore_case)", () => {
    const m = {
      metric: 'exact_match',
      ignoreCase: true,
      ignorePunctuation: false,
      regexesToIgnore: [',', '\\$', '(?s).*#### ', '\\.$'],
    }
    const gold = 'In the afternoon she picked 48/2 = 24 cherries.\nIn all she picked 48+24 = 72 cherries.\n#### 72'
    expect(exactMatchScore('72', gold, m)).toBe(1)
    expect(exactMatchScore('$72.', gold, m)).toBe(1)
    expect(exactMatchScore('1,072', '#### 1072', m)).toBe(1)
    expect(exactMatchScore('73', gold, m)).toBe(0)
    expect(pythonRegex('(?s).*#### ', 'g', 'x').flags).toBe('gs')
  })

  test('unsupported filters and bad patterns are errors naming the file, pipeline and step', () => {
    expect(() => parseFilterList([{ name: 'p', filter: [{ function: 'multi_choice_regex' }] }], 'f.yaml')).toThrow(
      /f\.yaml: filter_list\[0\] \(p\): filter multi_choice_regex is not supported; use regex, take_first/,
    )
    expect(() =>
      parseFilterList([{ name: 'p', filter: [{ function: 'regex', regex_pattern: '(unclosed' }] }], 'f.yaml'),
    ).toThrow(/f\.yaml: filter_list\[0\] \(p\) step 0 \(regex\): "\(unclosed" is not a valid pattern/)
  })
})
