; The function behind examples/reestimate/score.json: a loop with a three-way branch in its
; body. Stores on every path keep llc from turning the branches into cmov.
target triple = "x86_64-pc-linux-gnu"

define i64 @score(i64* %v, i64* %out, i64 %n) noinline {
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop

loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %latch ]
  %acc = phi i64 [ 0, %entry ], [ %acc.next, %latch ]
  %p = getelementptr i64, i64* %v, i64 %i
  %q = getelementptr i64, i64* %out, i64 %i
  %x = load i64, i64* %p
  %bit = and i64 %x, 1
  %isodd = icmp ne i64 %bit, 0
  br i1 %isodd, label %odd, label %even

odd:
  %t = mul i64 %x, 3
  %t1 = add i64 %t, 1
  store i64 %t1, i64* %q
  br label %latch

even:
  %big = icmp sgt i64 %x, 1000
  br i1 %big, label %halve, label %keep

halve:
  %h = lshr i64 %x, 1
  store i64 %h, i64* %q
  br label %latch

keep:
  store i64 0, i64* %q
  br label %latch

latch:
  %d = phi i64 [ %t1, %odd ], [ %h, %halve ], [ %x, %keep ]
  %acc.next = add i64 %acc, %d
  %i.next = add i64 %i, 1
  %more = icmp slt i64 %i.next, %n
  br i1 %more, label %loop, label %done

done:
  %r = phi i64 [ 0, %entry ], [ %acc.next, %latch ]
  ret i64 %r
}
