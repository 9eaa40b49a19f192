// Package unwind walks a sampled user stack: from the registers and the copy of the stack
// a perf sample carries (PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER), it finds each
// caller's return address by the call frame information of the file the code lies in (for
// a Go executable's own code, which has none, made from the frame depths its function
// table holds), or of the JIT object (package cfi), else by the frame pointer, as most JIT
// code keeps one. So a
// chain goes on through code built without frame pointers, where the kernel's walk stops.
//
//	u := unwind.New(unwind.Config{Logger: logger})
//	frames, _ := u.Unwind(pid, unwind.Regs{IP: ip, SP: sp, BP: bp}, stack, 127, nil)
//	u.Prepare(pid) // optional: ahead of pid's first sample
//	u.Forget(pid)  // when the process is no longer sampled
//	u.Close()     // waits for the files being read
//
// An Unwinder reads a process's mappings at its first sample and again for an address in
// none of them; the frame information of each file a walk first passes through once, in
// the background (until then its code is walked by frame pointers), shared by every
// process that maps it, within a bound. JIT code lies in anonymous memory: for a process
// whose JIT registers its objects with the GDB JIT interface (LLVM's MCJIT and ORC), the
// .eh_frame the JIT loaded for each object is read from the process's memory, looked for
// when the Unwinder meets the process and again for a sampled address in anonymous memory
// no object read describes (internal/gdbjit); a JIT's jitdump and perf map describe its
// code through the daemon (AddJITFrames, AddJITCode). Unwinder is safe for concurrent use.
//
// A walk through code whose frame information may yet come (a file being read, JIT code
// nothing describes yet) says where it first met it (Stop): a caller that keeps the sample
// walks on from there once Ready says the information came, and gets the chain whole.
//
//	frames, stop := u.Unwind(pid, regs, stack, 127, nil)
//	if stop.Wait && u.Ready(pid, stop) { // later
//		frames, stop = u.Unwind(pid, stop.Regs, stack[stop.Regs.SP-regs.SP:], 127, frames[:stop.N])
//	}
//
// GoLeaves and Unwinder.ReturnSlot serve walks by frame pointers instead (the kernel's):
// they tell where a function has not set the frame pointer and which word at the stack
// pointer is its return address (GoLeaves for the processes that run a Go executable, by its
// function table, where a function has no frame; ReturnSlot for any code, by its frame
// information), so that a sampler that took that word keeps it as the caller's return
// address the kernel's walk skips there.
package unwind
