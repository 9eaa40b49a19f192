; profd test workload: a hot loop run under lli-14 -jit-kind=mcjit.
;   lli-14 -jit-kind=mcjit hotloop.ll MILLISECONDS [THREADS [DELAY_MS]]
; With THREADS = 0 (the default) main spins for MILLISECONDS; otherwise main sleeps DELAY_MS,
; then starts THREADS threads that each spin for MILLISECONDS, and joins them. A spin lasts
; MILLISECONDS of its thread's CPU time, however long a busy machine makes that take.

%struct.timespec = type { i64, i64 }

declare i64 @atol(i8*)
declare i32 @clock_gettime(i32, %struct.timespec*)
declare i32 @usleep(i32)
declare i32 @pthread_create(i64*, i8*, i8* (i8*)*, i8*)
declare i32 @pthread_join(i64, i8**)

@spin_ms = global i64 0
@sink = global i64 0

; cpu_ms is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), in milliseconds.
define i64 @cpu_ms() {
entry:
  %ts = alloca %struct.timespec
  %r = call i32 @clock_gettime(i32 3, %struct.timespec* %ts)
  %sp = getelementptr %struct.timespec, %struct.timespec* %ts, i32 0, i32 0
  %np = getelementptr %struct.timespec, %struct.timespec* %ts, i32 0, i32 1
  %s = load i64, i64* %sp
  %n = load i64, i64* %np
  %sms = mul i64 %s, 1000
  %nms = udiv i64 %n, 1000000
  %ms = add i64 %sms, %nms
  ret i64 %ms
}

; spin runs a two-way branching loop in chunks of 100000 iterations until its thread has run
; for spin_ms.
define i64 @spin(i64 %seed) {
entry:
  %start = call i64 @cpu_ms()
  %dur = load i64, i64* @spin_ms
  %end = add i64 %start, %dur
  br label %outer

outer:
  %acc = phi i64 [ %seed, %entry ], [ %a.next, %outer.latch ]
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
  %t = call i64 @cpu_ms()
  %more = icmp slt i64 %t, %end
  br i1 %more, label %outer, label %exit

exit:
  store volatile i64 %a.next, i64* @sink
  ret i64 %a.next
}

define i8* @worker(i8* %arg) {
entry:
  %seed = ptrtoint i8* %arg to i64
  %r = call i64 @spin(i64 %seed)
  ret i8* null
}

define i32 @main(i32 %argc, i8** %argv) {
entry:
  %has1 = icmp sgt i32 %argc, 1
  br i1 %has1, label %arg1, label %usage

usage:
  ret i32 2

arg1:
  %p1 = getelementptr i8*, i8** %argv, i64 1
  %s1 = load i8*, i8** %p1
  %ms = call i64 @atol(i8* %s1)
  store i64 %ms, i64* @spin_ms
  %has2 = icmp sgt i32 %argc, 2
  br i1 %has2, label %arg2, label %single

arg2:
  %p2 = getelementptr i8*, i8** %argv, i64 2
  %s2 = load i8*, i8** %p2
  %nthreads = call i64 @atol(i8* %s2)
  %zero = icmp sle i64 %nthreads, 0
  br i1 %zero, label %single, label %threaded

single:
  %r = call i64 @spin(i64 7)
  ret i32 0

threaded:
  %has3 = icmp sgt i32 %argc, 3
  br i1 %has3, label %arg3, label %spawn.pre

arg3:
  %p3 = getelementptr i8*, i8** %argv, i64 3
  %s3 = load i8*, i8** %p3
  %delay = call i64 @atol(i8* %s3)
  %delay.us64 = mul i64 %delay, 1000
  %delay.us = trunc i64 %delay.us64 to i32
  %u = call i32 @usleep(i32 %delay.us)
  br label %spawn.pre

spawn.pre:
  %n = call i64 @llvm.umin.i64(i64 %nthreads, i64 64)
  %ids = alloca [64 x i64]
  br label %spawn

spawn:
  %k = phi i64 [ 0, %spawn.pre ], [ %k.next, %spawn ]
  %slot = getelementptr [64 x i64], [64 x i64]* %ids, i64 0, i64 %k
  %seed = add i64 %k, 11
  %arg = inttoptr i64 %seed to i8*
  %c = call i32 @pthread_create(i64* %slot, i8* null, i8* (i8*)* @worker, i8* %arg)
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
  ret i32 0
}

declare i64 @llvm.umin.i64(i64, i64)
