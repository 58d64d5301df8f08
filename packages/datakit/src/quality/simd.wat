;; The classifier's two hot loops over the output matrix in WebAssembly SIMD (f32x4), compiled
;; to the bytes in simd.ts. Rows are `dim` floats, `dim` a multiple of 4; addresses in bytes.
(module
  (memory (export "memory") 1)
  ;; scores[i] = output row i · hidden, for i < n. Four rows at a time: four independent chains of
  ;; f32x4 additions overlap (one chain waits on each addition), and each hidden vector is loaded once
  ;; for the four. Each row's sums are the same additions in the same order as one row alone.
  (func (export "dots") (param $out i32) (param $hid i32) (param $n i32) (param $dim i32) (param $scores i32)
    (local $end i32) (local $end4 i32) (local $bytes i32) (local $j i32) (local $a v128)
    (local $b v128) (local $c v128) (local $d v128) (local $h v128) (local $o1 i32) (local $o2 i32) (local $o3 i32)
    (local.set $bytes (i32.shl (local.get $dim) (i32.const 2)))
    (local.set $end (i32.add (local.get $scores) (i32.shl (local.get $n) (i32.const 2))))
    (local.set $end4
      (i32.add (local.get $scores) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
    (block $done4
      (loop $quads
        (br_if $done4 (i32.ge_u (local.get $scores) (local.get $end4)))
        (local.set $a (v128.const f32x4 0 0 0 0))
        (local.set $b (v128.const f32x4 0 0 0 0))
        (local.set $c (v128.const f32x4 0 0 0 0))
        (local.set $d (v128.const f32x4 0 0 0 0))
        (local.set $o1 (i32.add (local.get $out) (local.get $bytes)))
        (local.set $o2 (i32.add (local.get $o1) (local.get $bytes)))
        (local.set $o3 (i32.add (local.get $o2) (local.get $bytes)))
        (local.set $j (i32.const 0))
        (loop $cols4
          (local.set $h (v128.load (i32.add (local.get $hid) (local.get $j))))
          (local.set $a
            (f32x4.add (local.get $a) (f32x4.mul (v128.load (i32.add (local.get $out) (local.get $j))) (local.get $h))))
          (local.set $b
            (f32x4.add (local.get $b) (f32x4.mul (v128.load (i32.add (local.get $o1) (local.get $j))) (local.get $h))))
          (local.set $c
            (f32x4.add (local.get $c) (f32x4.mul (v128.load (i32.add (local.get $o2) (local.get $j))) (local.get $h))))
          (local.set $d
            (f32x4.add (local.get $d) (f32x4.mul (v128.load (i32.add (local.get $o3) (local.get $j))) (local.get $h))))
          (local.set $j (i32.add (local.get $j) (i32.const 16)))
          (br_if $cols4 (i32.lt_u (local.get $j) (local.get $bytes))))
        (f32.store offset=0 (local.get $scores)
          (f32.add
            (f32.add (f32x4.extract_lane 0 (local.get $a)) (f32x4.extract_lane 1 (local.get $a)))
            (f32.add (f32x4.extract_lane 2 (local.get $a)) (f32x4.extract_lane 3 (local.get $a)))))
        (f32.store offset=4 (local.get $scores)
          (f32.add
            (f32.add (f32x4.extract_lane 0 (local.get $b)) (f32x4.extract_lane 1 (local.get $b)))
            (f32.add (f32x4.extract_lane 2 (local.get $b)) (f32x4.extract_lane 3 (local.get $b)))))
        (f32.store offset=8 (local.get $scores)
          (f32.add
            (f32.add (f32x4.extract_lane 0 (local.get $c)) (f32x4.extract_lane 1 (local.get $c)))
            (f32.add (f32x4.extract_lane 2 (local.get $c)) (f32x4.extract_lane 3 (local.get $c)))))
        (f32.store offset=12 (local.get $scores)
          (f32.add
            (f32.add (f32x4.extract_lane 0 (local.get $d)) (f32x4.extract_lane 1 (local.get $d)))
            (f32.add (f32x4.extract_lane 2 (local.get $d)) (f32x4.extract_lane 3 (local.get $d)))))
        (local.set $out (i32.add (local.get $o3) (local.get $bytes)))
        (local.set $scores (i32.add (local.get $scores) (i32.const 16)))
        (br $quads)))
    ;; the last n mod 4 rows, one at a time
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $scores) (local.get $end)))
        (local.set $a (v128.const f32x4 0 0 0 0))
        (local.set $j (i32.const 0))
        (loop $cols
          (local.set $a
            (f32x4.add (local.get $a)
              (f32x4.mul (v128.load (i32.add (local.get $out) (local.get $j)))
                (v128.load (i32.add (local.get $hid) (local.get $j))))))
          (local.set $j (i32.add (local.get $j) (i32.const 16)))
          (br_if $cols (i32.lt_u (local.get $j) (local.get $bytes))))
        (f32.store (local.get $scores)
          (f32.add
            (f32.add (f32x4.extract_lane 0 (local.get $a)) (f32x4.extract_lane 1 (local.get $a)))
            (f32.add (f32x4.extract_lane 2 (local.get $a)) (f32x4.extract_lane 3 (local.get $a)))))
        (local.set $out (i32.add (local.get $out) (local.get $bytes)))
        (local.set $scores (i32.add (local.get $scores) (i32.const 4)))
        (br $rows))))
  ;; for each row i < n: grad += alpha[i] × row, then row += alpha[i] × hidden (grad sees the old row)
  (func (export "rank1") (param $out i32) (param $hid i32) (param $grad i32) (param $alpha i32) (param $n i32)
    (param $dim i32)
    (local $end i32) (local $bytes i32) (local $j i32) (local $a v128) (local $w v128) (local $p i32) (local $g i32)
    (local.set $bytes (i32.shl (local.get $dim) (i32.const 2)))
    (local.set $end (i32.add (local.get $alpha) (i32.shl (local.get $n) (i32.const 2))))
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $alpha) (local.get $end)))
        (local.set $a (f32x4.splat (f32.load (local.get $alpha))))
        (local.set $j (i32.const 0))
        (loop $cols
          (local.set $p (i32.add (local.get $out) (local.get $j)))
          (local.set $g (i32.add (local.get $grad) (local.get $j)))
          (local.set $w (v128.load (local.get $p)))
          (v128.store (local.get $g) (f32x4.add (v128.load (local.get $g)) (f32x4.mul (local.get $a) (local.get $w))))
          (v128.store (local.get $p)
            (f32x4.add (local.get $w)
              (f32x4.mul (local.get $a) (v128.load (i32.add (local.get $hid) (local.get $j))))))
          (local.set $j (i32.add (local.get $j) (i32.const 16)))
          (br_if $cols (i32.lt_u (local.get $j) (local.get $bytes))))
        (local.set $out (i32.add (local.get $out) (local.get $bytes)))
        (local.set $alpha (i32.add (local.get $alpha) (i32.const 4)))
        (br $rows)))))
