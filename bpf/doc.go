// Package bpf holds profd's BPF sampling program (profile.c), its bpf2go output for both
// endiannesses (committed; `make generate` rebuilds it with clang-14) and a thin loader.
//
// The program runs on perf_event overflows. It keeps samples whose tgid is in a target set
// (or, when the loader asks, every process's user-mode samples but profd's, of some users
// and cgroups), counts them per (tgid, user ip) in hash maps, with the times of each key's
// first and last sample since the last drain, and counts what it throws away: samples of
// other processes, kernel-mode samples of targets (only taken when the perf event includes
// the kernel; they are not attributed to an address) and samples lost to full maps.
//
// The counts maps sit in the slots of an array of maps; the program picks a key's shard by a
// hash of the key (one shard fills both shard slots when MaxEntries is small). Each shard
// has a primary map, sized by the loader to the keys recent drains found (a drain reads
// every bucket of a map it reads), and an overflow map for keys that find the primary map
// full, read only when the program counted an overflow. Drain installs
// fresh, empty maps with one batch update (the kernel returns from it only after an RCU
// grace period, so every program run that found an old map has finished: perf_event
// programs run inside an RCU read-side section), then reads the old maps, one goroutine per
// shard, with a map-element iterator program (profd_dump) where the kernel has BTF, else
// batch lookups, else key by key. No count that arrives during a drain is lost or counted
// twice, and no entry is deleted under a writer.
//
// With Config.Stacks the loader attaches a second program, profd_sample_stacks, which counts
// each sample by (tgid, tid, thread name, user frames, kernel frames) instead, in a hash map
// in the stack_counts array of maps that DrainStacks swaps and reads the same way. A
// user-mode sample also keeps the first WordCandidates of the WordSlots words at its stack
// pointer that may be return addresses, and which words they were (Stack.Words,
// Stack.WordSlots): the bytes before each end with a call instruction, or, in the Go code of
// a process SetGoText names, the first word lies in that code, or, in the JIT code of a
// process SetJITText names, the word lies in that code. Where the function sampled
// has not set the frame pointer, the one where its return address lies is the caller's,
// which the kernel's walk by frame pointers skips; the caller of DrainStacks decides which,
// if any (a word nearer the stack pointer may be a local's, or a return address an earlier
// call left there).
//
// Usage (the sampler package does this):
//
//	prog, err := bpf.Load(bpf.Config{MaxEntries: 1 << 18})
//	if err != nil { ... }
//	defer prog.Close()
//	ev.SetBPF(uint32(prog.FD()))      // for each per-CPU perf event
//	prog.AddTarget(pid)
//	prog.Drain(func(tgid uint32, ip uint64, c bpf.Count) { ... }) // c.N samples, c.FirstNs to c.LastNs
//
// The register layout the program reads is x86-64's; Load returns ErrNotSupported elsewhere.
// A Program's methods are safe for concurrent use.
package bpf
