/**
 * @module Language identification with cld3-asm: Google's CLD3 (the compact neural model in
 * Chrome) compiled to WebAssembly, so it runs in any Node process with nothing native to build.
 * The module is loaded once per process (a worker that tags many shards pays for it once) and
 * one identifier is kept. The answer is CLD3's: an ISO 639 code (`und` when it cannot tell), its
 * probability and CLD3's own reliability flag, for the document's first `LANGUAGE_MAX_BYTES`: a page that
 * opens with a little prose and then tables of Han characters (the CP932 blog page of zephyr's WARC
 * fixtures) is `zh` even when the prose is Japanese.
 *
 * @example
 * const lid = await languageIdentifier()
 * lid.identify('Ceci est une phrase en français.') // { language: 'fr', score: 0.99…, reliable: true }
 */

export type LanguageGuess = {
  /** ISO 639-1 where one exists (`en`, `fr`, `ja`), else CLD3's code; `und` when unknown. */
  readonly language: string
  /** CLD3's probability of that language, 0–1. */
  readonly score: number
  /** CLD3's reliability flag. */
  readonly reliable: boolean
}

export type LanguageIdentifier = { identify(text: string): LanguageGuess }

/** How much of a document CLD3 reads (it predicts from the first bytes up to this many). */
export const LANGUAGE_MAX_BYTES = 2000

let loaded: Promise<LanguageIdentifier> | undefined

const UNKNOWN: LanguageGuess = { language: 'und', score: 0, reliable: false }

/** The process's identifier, loading CLD3 on first use. */
export function languageIdentifier(): Promise<LanguageIdentifier> {
  // cld3-asm (its WebAssembly loader) is imported here, at first use, not with the package
  loaded ??= import('cld3-asm').then(async ({ loadModule }) => {
    const factory = await loadModule()
    const cld = factory.create(0, LANGUAGE_MAX_BYTES)
    return {
      identify(text: string): LanguageGuess {
        // CLD3 answers even for no text at all (with a confident guess): there is nothing to tell
        if (!/\p{L}/u.test(text)) return UNKNOWN
        const r = cld.findLanguage(text)
        if (r.language === 'und') return UNKNOWN
        return { language: r.language, score: r.probability, reliable: r.is_reliable }
      },
    }
  })
  return loaded
}

export type LanguageFilter = {
  /** Languages to keep (ISO 639 codes as CLD3 gives them). */
  readonly languages: readonly string[]
  /** The lowest score kept. @default 0.5 */
  readonly threshold?: number
}

/** Whether a guess passes the filter. */
export function keepLanguage(guess: LanguageGuess, f: LanguageFilter): boolean {
  return f.languages.includes(guess.language) && guess.score >= (f.threshold ?? 0.5)
}
