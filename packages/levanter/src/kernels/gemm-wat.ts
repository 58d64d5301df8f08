/**
 * @module The WebAssembly text of levanter's GEMM: C = op(A)·op(B) for float32 row-major
 * matrices, either operand transposed, over a batch with byte strides (0 broadcasts). It is the
 * classic blocked design: B is packed in blocks of KC×NC into panels of NR columns, A in slivers
 * of MR rows, and an MR×NR micro-kernel keeps its tile of C in eight SIMD registers for a whole
 * KC-deep pass. Transposed operands are read through strides while packing, so a transpose never
 * costs a pass over memory of its own. Products of at most MR rows (decoding) skip packing and read
 * B in place, with the same operations per element in the same order.
 *
 * Two builds: `fma` multiplies and adds in one rounding (relaxed SIMD `f32x4.relaxed_madd`, which
 * V8 lowers to FMA), `simd` with separate multiply and add (plain SIMD128). The bytes are
 * assembled by `scripts/build-gemm.ts` and checked against this text by the tests.
 */

/** Rows of A per micro-kernel tile. */
export const MR = 4
/** Columns of B per panel (two f32x4 registers). */
export const NR = 8
/** Depth of one pass: a packed A sliver (MR×KC) stays in L1. */
export const KC = 256
/** Columns per packed B block: a KC×NC block (1 MiB) stays in L2. */
export const NC = 1024
/** Bytes of scratch the kernel needs: packed B block, packed A sliver, one tile. */
export const WORKSPACE_BYTES = KC * NC * 4 + KC * MR * 4 + MR * NR * 4

const get = (x: string) => `(local.get $${x})`
const set = (x: string, v: string) => `(local.set $${x} ${v})`
const add = (x: string, y: string) => `(i32.add ${x} ${y})`
const mul = (x: string, y: string) => `(i32.mul ${x} ${y})`
const c = (n: number) => `(i32.const ${n})`
const min = (x: string, y: string) => `(select ${x} ${y} (i32.lt_u ${x} ${y}))`
/** `for (v = from; v < to; v += step) body` as a block/loop pair. */
const forUp = (v: string, from: string, to: string, step: string, body: string[]) =>
  [
    set(v, from),
    `(block $${v}_end (loop $${v}_loop`,
    `(br_if $${v}_end (i32.ge_u ${get(v)} ${to}))`,
    ...body,
    set(v, add(get(v), step)),
    `(br $${v}_loop)))`,
  ].join('\n')

export function gemmWat(fma: boolean): string {
  const madd = (a: string, b: string, acc: string) =>
    fma ? `(f32x4.relaxed_madd ${a} ${b} ${acc})` : `(f32x4.add (f32x4.mul ${a} ${b}) ${acc})`
  const rows = [...Array(MR).keys()]
  const accs = rows.flatMap((r) => [`c${r}0`, `c${r}1`])

  // packB: dst[panel][k][j] = B(k0+k, n0+p+j), zero past the block's last column. B(k, n) is at b + 4(k·sk + n·sn).
  const packB = `(func $packB (param $b i32) (param $sk i32) (param $sn i32) (param $k0 i32) (param $kb i32) (param
    $n0 i32) (param $nb i32) (param $dst i32)
  (local $p i32) (local $k i32) (local $j i32) (local $w i32) (local $src i32) (local $step i32)
  ${forUp('p', c(0), get('nb'), c(NR), [
    set('w', min(`(i32.sub ${get('nb')} ${get('p')})`, c(NR))),
    `(if (i32.and (i32.eq ${get('sn')} ${c(1)}) (i32.eq ${get('w')} ${c(NR)}))
      (then
        ${set('src', add(get('b'), `(i32.shl ${add(mul(get('k0'), get('sk')), add(get('n0'), get('p')))} ${c(2)})`))}
        ${set('step', `(i32.shl ${get('sk')} ${c(2)})`)}
        ${forUp('k', c(0), get('kb'), c(1), [
          `(v128.store ${get('dst')} (v128.load ${get('src')}))`,
          `(v128.store offset=16 ${get('dst')} (v128.load offset=16 ${get('src')}))`,
          set('dst', add(get('dst'), c(4 * NR))),
          set('src', add(get('src'), get('step'))),
        ])})
      (else
        ${forUp('k', c(0), get('kb'), c(1), [
          forUp('j', c(0), c(NR), c(1), [
            `(f32.store ${add(get('dst'), `(i32.shl ${get('j')} ${c(2)})`)}
              (if (result f32) (i32.lt_u ${get('j')} ${get('w')})
                (then (f32.load ${add(
                  get('b'),
                  `(i32.shl ${add(
                    mul(add(get('k0'), get('k')), get('sk')),
                    mul(add(add(get('n0'), get('p')), get('j')), get('sn')),
                  )} ${c(2)})`,
                )}))
                (else (f32.const 0))))`,
          ]),
          set('dst', add(get('dst'), c(4 * NR))),
        ])}))`,
  ])})`

  // packA: dst[k][r] = A(m0+r, k0+k), zero past the last row. A(m, k) is at a + 4(m·am + k·ak).
  const packA = `(func $packA (param $a i32) (param $am i32) (param $ak i32) (param $m0 i32) (param $mb i32) (param
    $k0 i32) (param $kb i32) (param $dst i32)
  (local $k i32) (local $r i32) (local $src i32) (local $d i32) (local $step i32)
  (if (i32.and (i32.eq ${get('am')} ${c(1)}) (i32.eq ${get('mb')} ${c(MR)}))
    (then
      ${set('src', add(get('a'), `(i32.shl ${add(get('m0'), mul(get('k0'), get('ak')))} ${c(2)})`))}
      ${set('step', `(i32.shl ${get('ak')} ${c(2)})`)}
      ${forUp('k', c(0), get('kb'), c(1), [
        `(v128.store ${get('dst')} (v128.load ${get('src')}))`,
        set('dst', add(get('dst'), c(4 * MR))),
        set('src', add(get('src'), get('step'))),
      ])}
      (return)))
  ${forUp('r', c(0), c(MR), c(1), [
    set('d', add(get('dst'), `(i32.shl ${get('r')} ${c(2)})`)),
    `(if (i32.lt_u ${get('r')} ${get('mb')})
      (then
        ${set(
          'src',
          add(
            get('a'),
            `(i32.shl ${add(mul(add(get('m0'), get('r')), get('am')), mul(get('k0'), get('ak')))} ${c(2)})`,
          ),
        )}
        ${set('step', `(i32.shl ${get('ak')} ${c(2)})`)}
        ${forUp('k', c(0), get('kb'), c(1), [
          `(f32.store ${get('d')} (f32.load ${get('src')}))`,
          set('d', add(get('d'), c(4 * MR))),
          set('src', add(get('src'), get('step'))),
        ])})
      (else
        ${forUp('k', c(0), get('kb'), c(1), [
          `(f32.store ${get('d')} (f32.const 0))`,
          set('d', add(get('d'), c(4 * MR))),
        ])}))`,
  ])})`

  // The micro-kernel: the MR×NR tile of one A sliver times one B panel, kb deep.
  const micro = [
    ...accs.map((x) => set(x, '(v128.const i32x4 0 0 0 0)')),
    set('q', add(get('pB'), `(i32.shl ${mul(get('p'), get('kb'))} ${c(2)})`)),
    set('s', get('pA')),
    set('k', get('kb')),
    `(loop $micro`,
    set('b0', `(v128.load ${get('q')})`),
    set('b1', `(v128.load offset=16 ${get('q')})`),
    ...rows.flatMap((r) => [
      set('x', `(v128.load32_splat offset=${4 * r} ${get('s')})`),
      set(`c${r}0`, madd(get('x'), get('b0'), get(`c${r}0`))),
      set(`c${r}1`, madd(get('x'), get('b1'), get(`c${r}1`))),
    ]),
    set('q', add(get('q'), c(4 * NR))),
    set('s', add(get('s'), c(4 * MR))),
    `(br_if $micro (local.tee $k (i32.sub ${get('k')} ${c(1)})))`,
    `)`,
  ].join('\n')

  // Write the tile to C (adding to it after the first pass over K): whole tiles straight from the
  // registers, edge tiles through the scratch tile element by element.
  const rowPtr = (r: number) => add(get('cp'), mul(c(r), get('rc')))
  const storeTile = `(if (i32.and (i32.eq ${get('mb')} ${c(MR)}) (i32.ge_u (i32.sub ${get('nb')} ${get('p')}) ${c(NR)}))
    (then
      (if (i32.eqz ${get('k0')})
        (then ${rows
          .map(
            (r) => `(v128.store ${rowPtr(r)} ${get(`c${r}0`)}) (v128.store offset=16 ${rowPtr(r)}
          ${get(`c${r}1`)})`,
          )
          .join(' ')})
        (else ${rows
          .map(
            (r) => `(v128.store ${rowPtr(r)} (f32x4.add (v128.load ${rowPtr(r)}) ${get(`c${r}0`)}))
          (v128.store offset=16 ${rowPtr(r)} (f32x4.add (v128.load offset=16 ${rowPtr(r)})
            ${get(`c${r}1`)}))`,
          )
          .join(' ')})))
    (else
      ${rows
        .map(
          (r) =>
            `(v128.store offset=${32 * r} ${get('tile')} ${get(`c${r}0`)}) (v128.store offset=${
              32 * r + 16
            } ${get('tile')} ${get(`c${r}1`)})`,
        )
        .join(' ')}
      ${set('w', min(`(i32.sub ${get('nb')} ${get('p')})`, c(NR)))}
      ${forUp('r', c(0), get('mb'), c(1), [
        forUp('j', c(0), get('w'), c(1), [
          set('e', add(add(get('cp'), mul(get('r'), get('rc'))), `(i32.shl ${get('j')} ${c(2)})`)),
          set(
            'x',
            `(v128.load32_splat ${add(get('tile'), `(i32.shl ${add(mul(get('r'), c(NR)), get('j'))} ${c(2)})`)})`,
          ),
          `(f32.store ${get('e')} (if (result f32) (i32.eqz ${get('k0')})
            (then (f32x4.extract_lane 0 ${get('x')}))
            (else (f32.add (f32.load ${get('e')}) (f32x4.extract_lane 0 ${get('x')})))))`,
        ]),
      ])}))`

  // Few rows (decoding: one token at a time): B read in place, no packing. Each element takes the
  // same operations in the same order as in the blocked path (an FMA chain per KC-deep pass, the
  // passes added in order), so a row's numbers do not depend on how many rows come with it.
  const aAt = (m: string, k: string) =>
    `(v128.load32_splat ` +
    `${add(get('a'), `(i32.shl ${add(mul(get(m), get('am')), mul(get(k), get('ak')))} ${c(2)})`)})`
  const fewRows = `(func $fewRows (param $a i32) (param $b i32) (param $cm i32) (param $M i32) (param $K i32) (param
    $N i32) (param $am i32) (param $ak i32)
  (local $m i32) (local $n0 i32) (local $k0 i32) (local $kb i32) (local $k i32) (local $j i32) (local $w i32) (local
    $p i32) (local $e i32)
  (local $x v128) (local $a0 v128) (local $a1 v128) (local $t0 v128) (local $t1 v128)
  ${forUp('m', c(0), get('M'), c(1), [
    forUp('n0', c(0), get('N'), c(NR), [
      set('w', min(`(i32.sub ${get('N')} ${get('n0')})`, c(NR))),
      `(if (i32.eq ${get('w')} ${c(NR)})
        (then
          ${forUp('k0', c(0), get('K'), c(KC), [
            set('kb', min(`(i32.sub ${get('K')} ${get('k0')})`, c(KC))),
            set('a0', '(v128.const i32x4 0 0 0 0)'),
            set('a1', '(v128.const i32x4 0 0 0 0)'),
            forUp('k', get('k0'), add(get('k0'), get('kb')), c(1), [
              set('x', aAt('m', 'k')),
              set('p', add(get('b'), `(i32.shl ${add(mul(get('k'), get('N')), get('n0'))} ${c(2)})`)),
              set('a0', madd(get('x'), `(v128.load ${get('p')})`, get('a0'))),
              set('a1', madd(get('x'), `(v128.load offset=16 ${get('p')})`, get('a1'))),
            ]),
            `(if (i32.eqz ${get('k0')})
              (then ${set('t0', get('a0'))} ${set('t1', get('a1'))})
              (else ${set('t0', `(f32x4.add ${get('t0')} ${get('a0')})`)} ${set(
                't1',
                `(f32x4.add ${get('t1')}
                ${get('a1')})`,
              )}))`,
          ])}
          ${set('e', add(get('cm'), `(i32.shl ${add(mul(get('m'), get('N')), get('n0'))} ${c(2)})`))}
          (v128.store ${get('e')} ${get('t0')})
          (v128.store offset=16 ${get('e')} ${get('t1')}))
        (else
          ${forUp('j', c(0), get('w'), c(1), [
            forUp('k0', c(0), get('K'), c(KC), [
              set('kb', min(`(i32.sub ${get('K')} ${get('k0')})`, c(KC))),
              set('a0', '(v128.const i32x4 0 0 0 0)'),
              forUp('k', get('k0'), add(get('k0'), get('kb')), c(1), [
                set(
                  'a0',
                  madd(
                    aAt('m', 'k'),
                    `(v128.load32_splat ${add(
                      get('b'),
                      `(i32.shl ${add(mul(get('k'), get('N')), add(get('n0'), get('j')))} ${c(2)})`,
                    )})`,
                    get('a0'),
                  ),
                ),
              ]),
              `(if (i32.eqz ${get('k0')}) (then ${set('t0', get('a0'))}) (else ${set(
                't0',
                `(f32x4.add ${get('t0')}
                ${get('a0')})`,
              )}))`,
            ]),
            `(f32.store ${add(
              get('cm'),
              `(i32.shl ${add(mul(get('m'), get('N')), add(get('n0'), get('j')))}
              ${c(2)})`,
            )} (f32x4.extract_lane 0 ${get('t0')}))`,
          ])}))`,
    ]),
  ])})`

  const gemm1 = `(func $gemm1 (param $a i32) (param $b i32) (param $cm i32) (param $M i32) (param $K i32) (param $N
    i32) (param $tA i32) (param $tB i32) (param $ws i32)
  (local $am i32) (local $ak i32) (local $sk i32) (local $sn i32) (local $pA i32) (local $pB i32) (local $tile i32)
    (local $rc i32)
  (local $n0 i32) (local $nb i32) (local $k0 i32) (local $kb i32) (local $m0 i32) (local $mb i32) (local $p i32)
  (local $q i32) (local $s i32) (local $k i32) (local $cp i32) (local $w i32) (local $r i32) (local $j i32) (local $e
    i32)
  (local $x v128) (local $b0 v128) (local $b1 v128) ${accs.map((x) => `(local $${x} v128)`).join(' ')}
  ${set('am', `(select ${c(1)} ${get('K')} ${get('tA')})`)}
  ${set('ak', `(select ${get('M')} ${c(1)} ${get('tA')})`)}
  ${set('sk', `(select ${c(1)} ${get('N')} ${get('tB')})`)}
  ${set('sn', `(select ${get('K')} ${c(1)} ${get('tB')})`)}
  ${set('pB', get('ws'))}
  ${set('pA', add(get('ws'), c(KC * NC * 4)))}
  ${set('tile', add(get('pA'), c(KC * MR * 4)))}
  ${set('rc', `(i32.shl ${get('N')} ${c(2)})`)}
  (if (i32.and (i32.le_u ${get('M')} ${c(MR)}) (i32.eqz ${get('tB')}))
    (then (call $fewRows ${get('a')} ${get('b')} ${get('cm')} ${get('M')} ${get('K')} ${get('N')} ${get('am')}
      ${get('ak')}) (return)))
  ${forUp('n0', c(0), get('N'), c(NC), [
    set('nb', min(`(i32.sub ${get('N')} ${get('n0')})`, c(NC))),
    forUp('k0', c(0), get('K'), c(KC), [
      set('kb', min(`(i32.sub ${get('K')} ${get('k0')})`, c(KC))),
      `(call $packB ${get('b')} ${get('sk')} ${get('sn')} ${get('k0')} ${get('kb')} ${get('n0')} ${get('nb')}
        ${get('pB')})`,
      forUp('m0', c(0), get('M'), c(MR), [
        set('mb', min(`(i32.sub ${get('M')} ${get('m0')})`, c(MR))),
        `(call $packA ${get('a')} ${get('am')} ${get('ak')} ${get('m0')} ${get('mb')} ${get('k0')} ${get('kb')}
          ${get('pA')})`,
        forUp('p', c(0), get('nb'), c(NR), [
          micro,
          set('cp', add(get('cm'), `(i32.shl ${add(mul(get('m0'), get('N')), add(get('n0'), get('p')))} ${c(2)})`)),
          storeTile,
        ]),
      ]),
    ]),
  ])})`

  const gemm = `(func (export "gemm") (param $a i32) (param $b i32) (param $cm i32) (param $M i32) (param $K i32)
    (param $N i32) (param $tA i32) (param $tB i32) (param $ws i32) (param $batch i32) (param $sa i32) (param $sb i32)
      (param $sc i32)
  (local $i i32)
  ${forUp('i', c(0), get('batch'), c(1), [
    `(call $gemm1 ${add(get('a'), mul(get('i'), get('sa')))} ${add(get('b'), mul(get('i'), get('sb')))}
      ${add(get('cm'), mul(get('i'), get('sc')))} ${get('M')} ${get('K')} ${get('N')} ${get('tA')} ${get('tB')}
        ${get('ws')})`,
  ])})`

  return `(module\n(import "env" "memory" (memory 1))\n${packB}\n${packA}\n${fewRows}\n${gemm1}\n${gemm}\n)\n`
}
