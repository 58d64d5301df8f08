/**
 * @module Tokens → text as they are generated: deltas that never split a UTF-8 character, stop
 * strings matched across token boundaries (the text is cut before the stop string, as OpenAI does),
 * and while streaming, the tail that could still become a stop string is held back.
 */
import type { BpeTokenizer } from '@marin/datakit'

export class TextStream {
  private readonly tokens: number[] = []
  private emitted = 0
  private readonly hold: number
  private readonly context: readonly number[]
  private readonly contextText: string
  /** The final text once a stop string matched. */
  stoppedText: string | undefined

  /**
   * @param context the prompt's ids: its last few are decoded in front of the completion and cut
   * off again, so a decoder that treats a sequence's start specially (SentencePiece drops the first
   * ▁'s space) gives the completion the text it has after the prompt
   */
  constructor(
    private readonly tokenizer: BpeTokenizer,
    private readonly stops: readonly string[],
    context: readonly number[] = [],
  ) {
    this.hold = Math.max(0, ...stops.map((s) => s.length - 1))
    const tail = context.slice(-4)
    const text = tail.length ? tokenizer.decode(tail) : ''
    // a tail that ends inside a character cannot be cut off cleanly: decode the completion alone
    const clean = !text.endsWith('\uFFFD')
    this.context = clean ? tail : []
    this.contextText = clean ? text : ''
  }

  /** The completion's text so far (decoded after the prompt's tail where that cuts off cleanly). */
  private decoded(): string {
    if (!this.context.length) return this.tokenizer.decode(this.tokens)
    const whole = this.tokenizer.decode([...this.context, ...this.tokens])
    return whole.startsWith(this.contextText)
      ? whole.slice(this.contextText.length)
      : this.tokenizer.decode(this.tokens)
  }

  /** Add a token; returns the text that is now safe to show and whether a stop string matched. */
  push(token: number): { delta: string; stopped: boolean } {
    this.tokens.push(token)
    const text = this.decoded()
    let cut = -1
    for (const s of this.stops) {
      const i = text.indexOf(s, Math.max(0, this.emitted - s.length))
      if (i >= 0 && (cut < 0 || i < cut)) cut = i
    }
    if (cut >= 0) {
      this.stoppedText = text.slice(0, cut)
      const delta = this.stoppedText.slice(this.emitted)
      this.emitted = this.stoppedText.length
      return { delta, stopped: true }
    }
    let safe = text.length - this.hold
    while (safe > this.emitted && text[safe - 1] === '\uFFFD') safe-- // an incomplete character
    if (safe <= this.emitted) return { delta: '', stopped: false }
    const delta = text.slice(this.emitted, safe)
    this.emitted = safe
    return { delta, stopped: false }
  }

  /** The rest of the text once generation ended. */
  flush(): string {
    if (this.stoppedText !== undefined) return ''
    const text = this.decoded()
    const delta = text.slice(this.emitted)
    this.emitted = text.length
    return delta
  }

  /** The whole completion text. */
  text(): string {
    return this.stoppedText ?? this.decoded()
  }
}
