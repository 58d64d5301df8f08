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
  /** The final text once a stop string matched. */
  stoppedText: string | undefined

  constructor(
    private readonly tokenizer: BpeTokenizer,
    private readonly stops: readonly string[],
  ) {
    this.hold = Math.max(0, ...stops.map((s) => s.length - 1))
  }

  /** Add a token; returns the text that is now safe to show and whether a stop string matched. */
  push(token: number): { delta: string; stopped: boolean } {
    this.tokens.push(token)
    const text = this.tokenizer.decode(this.tokens)
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
    const text = this.tokenizer.decode(this.tokens)
    const delta = text.slice(this.emitted)
    this.emitted = text.length
    return delta
  }

  /** The whole completion text. */
  text(): string {
    return this.stoppedText ?? this.tokenizer.decode(this.tokens)
  }
}
