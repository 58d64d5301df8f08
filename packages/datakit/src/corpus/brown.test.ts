import { describe, expect, test } from 'vitest'
import { BROWN_HELD_OUT_FILES, brownParagraphs, readBrown, untagBrown } from './brown.js'

describe('untagBrown', () => {
  // Real lines of the corpus (ca01, ca02, cg45), tags and all.
  test.each([
    [
      'The/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl ' +
        "said/vbd Friday/nr an/at investigation/nn of/in Atlanta's/np$ " +
        'recent/jj primary/nn election/nn produced/vbd ``/`` no/at ' +
        "evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd " +
        'place/nn ./.',
      `The Fulton County Grand Jury said Friday an investigation of ` +
        `Atlanta's recent primary election produced "no evidence" that ` +
        `any irregularities took place.`,
    ],
    [
      '``/`` Only/rb a/at relative/jj handful/nn of/in such/jj ' +
        "reports/nns was/bedz received/vbn ''/'' ,/, the/at jury/nn " +
        'said/vbd ,/, ``/`` considering/in the/at widespread/jj ' +
        'interest/nn in/in the/at election/nn ,/, the/at number/nn of/in ' +
        "voters/nns and/cc the/at size/nn of/in this/dt city/nn ''/'' ./.",
      '"Only a relative handful of such reports was received", the ' +
        'jury said, "considering the widespread interest in the ' +
        'election, the number of voters and the size of this city".',
    ],
    [
      "\tThe/at bill's/nn$ defenders/nns were/bed mostly/rb " +
        'small-town/nn legislators/nns like/cs J./np W./np Buchanan/np ' +
        'of/in Dumas/np ,/, Eligio/np (/( Kika/np )/) De/np La/np ' +
        'Garza/np of/in Mission/nn-tl ,/, Sam/np F./np Collins/np of/in ' +
        'Newton/np and/cc Joe/np Chapman/np of/in Sulphur/nn-tl ' +
        'Springs/nns-tl ./.',
      "The bill's defenders were mostly small-town legislators like J. " +
        'W. Buchanan of Dumas, Eligio (Kika) De La Garza of Mission, Sam ' +
        'F. Collins of Newton and Joe Chapman of Sulphur Springs.',
    ],
    [
      'When/wrb the/at crowd/nn was/bedz asked/vbn whether/cs it/pps ' +
        'wanted/vbd to/to wait/vb one/cd more/ap term/nn to/to make/vb ' +
        'the/at race/nn ,/, it/pps voted/vbd no/rb --/-- and/cc there/ex ' +
        'were/bed no/at dissents/nns ./.',
      'When the crowd was asked whether it wanted to wait one more ' +
        'term to make the race, it voted no -- and there were no dissents.',
    ],
    [
      '``/`` I/ppss understand/vb [/( Hearst/np ]/) is/bez a/at ' +
        "candidate/nn for/in Presidential/jj-tl honors/nns ''/'' ,/, " +
        'Devery/np said/vbd without/in cracking/vbg a/at smile/nn ./.',
      '"I understand [Hearst] is a candidate for Presidential honors", Devery said without cracking a smile.',
    ],
    // The word is what comes before the last slash: fractions keep theirs.
    ['1/2/cd mile/nn', '1/2 mile'],
  ])('%#', (tagged, plain) => {
    expect(untagBrown(tagged)).toBe(plain)
  })
})

describe('readBrown', () => {
  const all = readBrown()

  test('500 documents in file-name order, paragraphs of sentences, genre from the name', () => {
    expect(all).toHaveLength(500)
    expect(all[0]!.id).toBe('ca01')
    expect(all.at(-1)!.id).toBe('cr09')
    expect(all.map((d) => d.id)).toEqual(all.map((d) => d.id).sort())
    const ca01 = all[0]!
    expect(ca01.genre).toBe('a')
    expect(ca01.paragraphs[0]).toEqual([
      untagBrown(
        'The/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl ' +
          "said/vbd Friday/nr an/at investigation/nn of/in Atlanta's/np$ " +
          'recent/jj primary/nn election/nn produced/vbd ``/`` no/at ' +
          "evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd " +
          'place/nn ./.',
      ),
    ])
    // A paragraph holds one sentence a line of the file.
    expect(ca01.paragraphs[7]).toEqual([
      'Merger proposed',
      expect.stringMatching(/^However, the jury said it believes "these two offices/),
    ])
    expect(ca01.text.split('\n\n')).toEqual(ca01.paragraphs.map((p) => p.join(' ')))
  })

  test(`the last ${BROWN_HELD_OUT_FILES} files are held out from the training part`, () => {
    const train = readBrown({ part: 'train' })
    const heldOut = readBrown({ part: 'held-out' })
    expect(train.map((d) => d.id)).toEqual(all.slice(0, 475).map((d) => d.id))
    expect(heldOut.map((d) => d.id)).toEqual(all.slice(475).map((d) => d.id))
    expect(heldOut[0]!.id).toBe('cp14')
    expect(readBrown({ part: 'train', files: 3 }).map((d) => d.id)).toEqual(['ca01', 'ca02', 'ca03'])
    expect(readBrown({ part: 'held-out', files: 1 }).map((d) => d.id)).toEqual(['cp14'])
  })

  test('brownParagraphs: each paragraph as one line of text', () => {
    expect(brownParagraphs({ files: 2 })).toEqual(all.slice(0, 2).flatMap((d) => d.paragraphs.map((p) => p.join(' '))))
  })

  test('a bad part or file count is refused naming the option', () => {
    expect(() => readBrown({ part: 'test' as never })).toThrow(/part "test".*train, held-out or all/)
    expect(() => readBrown({ files: -1 })).toThrow(/files/)
  })
})
