; A JIT workload for lli-14: a small loop, then 300 ms asleep so profd can find the process.
define i32 @work(i32 %n) {
entry:
  br label %loop
loop:
  %i = phi i32 [0, %entry], [%i1, %loop]
  %i1 = add i32 %i, 1
  %c = icmp slt i32 %i1, %n
  br i1 %c, label %loop, label %done
done:
  ret i32 %i1
}
declare i32 @usleep(i32)
define i32 @main() {
  %r = call i32 @work(i32 1000)
  %s = call i32 @usleep(i32 300000)
  ret i32 0
}
