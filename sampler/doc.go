// Package sampler samples the target processes' user-space instruction pointers with one
// perf event and counts them per (pid, ip).
//
// Event choice: Config.Event names cycles (the default), instructions, branch-misses,
// cache-misses, cpu-clock, task-clock or a raw PMU event r<hex>, sampled at Config.FreqHz
// (default 999 Hz) or every Config.Period events, in user space only unless
// Config.IncludeKernel. PMU events get the highest precise_ip the PMU accepts. Where the
// event cannot be opened because there is no PMU (virtual machines) or the PMU lacks it, the
// sampler samples cpu-clock instead and logs that once at Warn; Config.StrictEvent makes it
// an *EventError (errors.Is ErrEventNotSupported) instead. Sampler.Event returns the
// EventChoice {Requested, Used, Reason, ...} for logs and profile metadata.
//
// Back ends:
//   - BackendBPF (package bpf): per-CPU events run a BPF program that keeps the targets'
//     samples and counts them in the kernel. Nothing is decoded in the daemon; samples
//     carry no timestamps.
//   - BackendRing: go-perf ring buffers, per CPU (all processes, filtered here) or per
//     thread (inheriting events on each thread of a target, so threads started later are
//     followed; what an unprivileged user can do). Samples carry CLOCK_MONOTONIC times,
//     the clock of jitdump records.
//
// BackendAuto uses BPF where the program loads and says why when it falls back to rings.
//
// Usage:
//
//	s, err := sampler.New(sampler.Config{Logger: log})
//	if err != nil { ... }
//	defer s.Close()
//	log.Info("sampling", "event", s.Event())
//	s.AddTarget(pid)
//	s.Start(ctx)
//	...
//	d, err := s.Drain() // d.Counts[sampler.Key{PID: pid, IP: ip}]: N samples, from FirstNs to LastNs
//
// A Sampler's methods are safe for concurrent use.
package sampler
