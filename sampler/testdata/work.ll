; profd overhead workload: a fixed amount of work, timed by the program itself.
;   lli-14 -jit-kind=mcjit work.ll CHUNKS [THREADS]
; runs CHUNKS chunks of 100000 loop iterations (in each of THREADS threads, at most 64, when
; THREADS is given and above 1) and prints the nanoseconds they took, wall (CLOCK_MONOTONIC)
; and CPU (CLOCK_PROCESS_CPUTIME_ID, all threads), so start-up and the profiler's own
; start-up are not counted.

%struct.timespec = type { i64, i64 }

declare i64 @atol(i8*)
declare i32 @clock_gettime(i32, %struct.timespec*)
declare i32 @printf(i8*, ...)
declare i32 @pthread_create(i64*, i8*, i8* (i8*)*, i8*)
declare i32 @pthread_join(i64, i8**)
declare i64 @llvm.umin.i64(i64, i64)

@fmt = private constant [9 x i8] c"%ld %ld\0A\00"
@sink = global i64 0
@thread_chunks = global i64 0

define i64 @now_ns(i32 %clock) {
entry:
  %ts = alloca %struct.timespec
  %r = call i32 @clock_gettime(i32 %clock, %struct.timespec* %ts)
  %sp = getelementptr %struct.timespec, %struct.timespec* %ts, i32 0, i32 0
  %np = getelementptr %struct.timespec, %struct.timespec* %ts, i32 0, i32 1
  %s = load i64, i64* %sp
  %n = load i64, i64* %np
  %sns = mul i64 %s, 1000000000
  %ns = add i64 %sns, %n
  ret i64 %ns
}

define i64 @work(i64 %chunks) {
entry:
  br label %outer

outer:
  %c = phi i64 [ 0, %entry ], [ %c.next, %outer.latch ]
  %acc = phi i64 [ 7, %entry ], [ %a.next, %outer.latch ]
  br label %inner

inner:
  %i = phi i64 [ 0, %outer ], [ %i.next, %inner.latch ]
  %a = phi i64 [ %acc, %outer ], [ %a.next, %inner.latch ]
  %bit = and i64 %i, 1
  %odd = icmp ne i64 %bit, 0
  br i1 %odd, label %odd.bb, label %even.bb

odd.bb:
  %m = mul i64 %a, 6364136223846793005
  br label %inner.latch

even.bb:
  %x = xor i64 %a, %i
  %s = add i64 %x, 1442695040888963407
  br label %inner.latch

inner.latch:
  %a.next = phi i64 [ %m, %odd.bb ], [ %s, %even.bb ]
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i.next, 100000
  br i1 %done, label %outer.latch, label %inner

outer.latch:
  %c.next = add i64 %c, 1
  %more = icmp slt i64 %c.next, %chunks
  br i1 %more, label %outer, label %exit

exit:
  store volatile i64 %a.next, i64* @sink
  ret i64 %a.next
}

define i8* @worker(i8* %arg) {
entry:
  %chunks = load i64, i64* @thread_chunks
  %r = call i64 @work(i64 %chunks)
  ret i8* null
}

; run_threads runs work(chunks) in n threads (1 < n <= 64) and waits for them.
define void @run_threads(i64 %chunks, i64 %n) {
entry:
  store i64 %chunks, i64* @thread_chunks
  %ids = alloca [64 x i64]
  br label %spawn

spawn:
  %k = phi i64 [ 0, %entry ], [ %k.next, %spawn ]
  %slot = getelementptr [64 x i64], [64 x i64]* %ids, i64 0, i64 %k
  %c = call i32 @pthread_create(i64* %slot, i8* null, i8* (i8*)* @worker, i8* null)
  %k.next = add i64 %k, 1
  %spawned = icmp eq i64 %k.next, %n
  br i1 %spawned, label %join, label %spawn

join:
  %j = phi i64 [ 0, %spawn ], [ %j.next, %join ]
  %jslot = getelementptr [64 x i64], [64 x i64]* %ids, i64 0, i64 %j
  %id = load i64, i64* %jslot
  %jr = call i32 @pthread_join(i64 %id, i8** null)
  %j.next = add i64 %j, 1
  %joined = icmp eq i64 %j.next, %n
  br i1 %joined, label %done, label %join

done:
  ret void
}

define i32 @main(i32 %argc, i8** %argv) {
entry:
  %has1 = icmp sgt i32 %argc, 1
  br i1 %has1, label %run, label %usage

usage:
  ret i32 2

run:
  %p1 = getelementptr i8*, i8** %argv, i64 1
  %s1 = load i8*, i8** %p1
  %chunks = call i64 @atol(i8* %s1)
  %has2 = icmp sgt i32 %argc, 2
  br i1 %has2, label %arg2, label %start

arg2:
  %p2 = getelementptr i8*, i8** %argv, i64 2
  %s2 = load i8*, i8** %p2
  %asked = call i64 @atol(i8* %s2)
  %capped = call i64 @llvm.umin.i64(i64 %asked, i64 64)
  br label %start

start:
  %threads = phi i64 [ 1, %run ], [ %capped, %arg2 ]
  %t0 = call i64 @now_ns(i32 1)
  %c0 = call i64 @now_ns(i32 2)
  %many = icmp sgt i64 %threads, 1
  br i1 %many, label %threaded, label %single

single:
  %r = call i64 @work(i64 %chunks)
  br label %stop

threaded:
  call void @run_threads(i64 %chunks, i64 %threads)
  br label %stop

stop:
  %t1 = call i64 @now_ns(i32 1)
  %c1 = call i64 @now_ns(i32 2)
  %dt = sub i64 %t1, %t0
  %dc = sub i64 %c1, %c0
  %f = getelementptr [9 x i8], [9 x i8]* @fmt, i64 0, i64 0
  %pr = call i32 (i8*, ...) @printf(i8* %f, i64 %dt, i64 %dc)
  ret i32 0
}
