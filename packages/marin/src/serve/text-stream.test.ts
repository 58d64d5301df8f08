import { readFileSync } from 'node:fs'
import { BpeTokenizer } from '@marin/datakit'
import { expect, test } from 'vitest'
import { TextStream } from './text-stream.js'

// datakit's hand-made Llama-2-style tokenizer (SentencePiece-style BPE: ▁ for spaces, byte fallback,
// a decoder that strips the first space of a sequence)
const llama2 = BpeTokenizer.fromJSON(
  JSON.parse(
    readFileSync(
      new URL('../../../datakit/test-fixtures/tokenizers/llama2-style.tokenizer.json', import.meta.url),
      'utf8',
    ),
  ),
)

test('a SentencePiece completion keeps the space it has after the prompt, streamed or whole', () => {
  const prompt = llama2.encode('the cat', { addSpecialTokens: true })
  // what a model generates after "the cat": ▁sat ▁on ▁the ▁mat (SentencePiece marks each word's space)
  const completion = llama2.encode('sat on the mat')
  // those ids alone decode without their first space (the decoder strips a sequence's first space)
  expect(llama2.decode(completion)).toBe('sat on the mat')
  const stream = new TextStream(llama2, [], prompt)
  let streamed = ''
  for (const id of completion) streamed += stream.push(id).delta
  streamed += stream.flush()
  expect(streamed).toBe(' sat on the mat')
  expect(stream.text()).toBe(' sat on the mat')
  // the prompt's BOS comes from the post-processor
  expect(prompt[0]).toBe(1)
})

test('without a prompt the completion decodes on its own, as before', () => {
  const ids = llama2.encode('sat on the mat')
  const stream = new TextStream(llama2, [])
  for (const id of ids) stream.push(id)
  expect(stream.text()).toBe(llama2.decode(ids))
})
