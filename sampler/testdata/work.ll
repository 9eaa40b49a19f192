; profd overhead workload: a fixed amount of work, timed by the program itself.
;   lli-14 -jit-kind=mcjit work.ll CHUNKS [THREADS [HOP]]
; runs CHUNKS chunks of 100000 loop iterations (in each of THREADS threads, at most 64, when
; THREADS is given and above 1) and prints the nanoseconds they took, wall (CLOCK_MONOTONIC)
; and CPU (CLOCK_PROCESS_CPUTIME_ID, all threads), so start-up and the profiler's own
; start-up are not counted.
; With HOP above 0 the THREADS threads instead pass a token round a ring of pipes: the thread
; holding it runs HOP iterations of the same loop and writes it to the next thread's pipe, then
; blocks reading its own, until CHUNKS*100000 iterations are done in all (one copy of the work,
; not one per thread). Only one thread works at a time; every hop is a wake-up and a block.

%struct.timespec = type { i64, i64 }

declare i64 @atol(i8*)
declare i32 @clock_gettime(i32, %struct.timespec*)
declare i32 @printf(i8*, ...)
declare i32 @pthread_create(i64*, i8*, i8* (i8*)*, i8*)
declare i32 @pthread_join(i64, i8**)
declare i64 @llvm.umin.i64(i64, i64)
declare i64 @llvm.umax.i64(i64, i64)
declare i32 @pipe(i32*)
declare i64 @read(i32, i8*, i64)
declare i64 @write(i32, i8*, i64)

@fmt = private constant [9 x i8] c"%ld %ld\0A\00"
@sink = global i64 0
@thread_chunks = global i64 0
@pipes = global [128 x i32] zeroinitializer
@hop_iters = global i64 0
@ring_threads = global i64 0

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

; spin runs iters iterations of work's inner loop on acc.
define i64 @spin(i64 %iters, i64 %acc) {
entry:
  br label %loop

loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %latch ]
  %a = phi i64 [ %acc, %entry ], [ %a.next, %latch ]
  %bit = and i64 %i, 1
  %odd = icmp ne i64 %bit, 0
  br i1 %odd, label %odd.bb, label %even.bb

odd.bb:
  %m = mul i64 %a, 6364136223846793005
  br label %latch

even.bb:
  %x = xor i64 %a, %i
  %s = add i64 %x, 1442695040888963407
  br label %latch

latch:
  %a.next = phi i64 [ %m, %odd.bb ], [ %s, %even.bb ]
  %i.next = add i64 %i, 1
  %done = icmp uge i64 %i.next, %iters
  br i1 %done, label %exit, label %loop

exit:
  ret i64 %a.next
}

; relay is ring thread k (its argument): it reads the token (hops left, 8 bytes) from pipe k,
; runs a hop and writes the token less one to pipe k+1 (mod the ring); a token of 0 is passed
; on once and ends the thread.
define i8* @relay(i8* %arg) {
entry:
  %tok = alloca i64
  %tokp = bitcast i64* %tok to i8*
  %k = ptrtoint i8* %arg to i64
  %n = load i64, i64* @ring_threads
  %k1 = add i64 %k, 1
  %wrap = icmp eq i64 %k1, %n
  %next = select i1 %wrap, i64 0, i64 %k1
  %ri = mul i64 %k, 2
  %rp = getelementptr [128 x i32], [128 x i32]* @pipes, i64 0, i64 %ri
  %rfd = load i32, i32* %rp
  %wi0 = mul i64 %next, 2
  %wi = add i64 %wi0, 1
  %wp = getelementptr [128 x i32], [128 x i32]* @pipes, i64 0, i64 %wi
  %wfd = load i32, i32* %wp
  %iters = load i64, i64* @hop_iters
  br label %loop

loop:
  %acc = phi i64 [ 7, %entry ], [ %acc.next, %hop ]
  %got = call i64 @read(i32 %rfd, i8* %tokp, i64 8)
  %full = icmp eq i64 %got, 8
  br i1 %full, label %check, label %out

check:
  %left = load i64, i64* %tok
  %last = icmp eq i64 %left, 0
  br i1 %last, label %finish, label %hop

hop:
  %acc.next = call i64 @spin(i64 %iters, i64 %acc)
  %left1 = sub i64 %left, 1
  store i64 %left1, i64* %tok
  %put = call i64 @write(i32 %wfd, i8* %tokp, i64 8)
  br label %loop

finish:
  %put0 = call i64 @write(i32 %wfd, i8* %tokp, i64 8)
  br label %out

out:
  store volatile i64 %acc, i64* @sink
  ret i8* null
}

; run_relay runs chunks*100000 iterations as hops of hop iterations round a ring of n threads
; (1 <= n <= 64) and waits for them. It returns 1 when a pipe cannot be made, else 0.
define i32 @run_relay(i64 %chunks, i64 %n, i64 %hop) {
entry:
  %tok = alloca i64
  %ids = alloca [64 x i64]
  store i64 %n, i64* @ring_threads
  store i64 %hop, i64* @hop_iters
  %total = mul i64 %chunks, 100000
  %hops0 = udiv i64 %total, %hop
  %none = icmp eq i64 %hops0, 0
  %hops = select i1 %none, i64 1, i64 %hops0
  br label %mkpipe

mkpipe:
  %p = phi i64 [ 0, %entry ], [ %p.next, %madepipe ]
  %pi = mul i64 %p, 2
  %pslot = getelementptr [128 x i32], [128 x i32]* @pipes, i64 0, i64 %pi
  %pr = call i32 @pipe(i32* %pslot)
  %pok = icmp eq i32 %pr, 0
  br i1 %pok, label %madepipe, label %nopipe

nopipe:
  ret i32 1

madepipe:
  %p.next = add i64 %p, 1
  %piped = icmp eq i64 %p.next, %n
  br i1 %piped, label %spawn, label %mkpipe

spawn:
  %k = phi i64 [ 0, %madepipe ], [ %k.next, %spawn ]
  %slot = getelementptr [64 x i64], [64 x i64]* %ids, i64 0, i64 %k
  %karg = inttoptr i64 %k to i8*
  %c = call i32 @pthread_create(i64* %slot, i8* null, i8* (i8*)* @relay, i8* %karg)
  %k.next = add i64 %k, 1
  %spawned = icmp eq i64 %k.next, %n
  br i1 %spawned, label %start, label %spawn

start:
  store i64 %hops, i64* %tok
  %tokp = bitcast i64* %tok to i8*
  %w0p = getelementptr [128 x i32], [128 x i32]* @pipes, i64 0, i64 1
  %w0 = load i32, i32* %w0p
  %put = call i64 @write(i32 %w0, i8* %tokp, i64 8)
  br label %join

join:
  %j = phi i64 [ 0, %start ], [ %j.next, %join ]
  %jslot = getelementptr [64 x i64], [64 x i64]* %ids, i64 0, i64 %j
  %id = load i64, i64* %jslot
  %jr = call i32 @pthread_join(i64 %id, i8** null)
  %j.next = add i64 %j, 1
  %joined = icmp eq i64 %j.next, %n
  br i1 %joined, label %done, label %join

done:
  ret i32 0
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
  %has3 = icmp sgt i32 %argc, 3
  br i1 %has3, label %arg3, label %start

arg3:
  %p3 = getelementptr i8*, i8** %argv, i64 3
  %s3 = load i8*, i8** %p3
  %hop.asked = call i64 @atol(i8* %s3)
  br label %start

start:
  %threads = phi i64 [ 1, %run ], [ %capped, %arg2 ], [ %capped, %arg3 ]
  %hop = phi i64 [ 0, %run ], [ 0, %arg2 ], [ %hop.asked, %arg3 ]
  %t0 = call i64 @now_ns(i32 1)
  %c0 = call i64 @now_ns(i32 2)
  %relayed = icmp sgt i64 %hop, 0
  br i1 %relayed, label %relay.run, label %not.relayed

relay.run:
  %ring = call i64 @llvm.umax.i64(i64 %threads, i64 1)
  %rr = call i32 @run_relay(i64 %chunks, i64 %ring, i64 %hop)
  %rfail = icmp ne i32 %rr, 0
  br i1 %rfail, label %failed, label %stop

failed:
  ret i32 1

not.relayed:
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
