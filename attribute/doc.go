// Package attribute names sampled counts: it turns what the sampler drains (counts by
// process and address with their times, counts by thread and call chain) into counts of
// the code that ran there, by the time-versioned map of JIT code (package jitmap), by the
// symbols of the files a process maps (package internal/elfsym), or by mapping, and takes
// a target's counts as a capture (package profileio).
//
// It reads nothing of a process itself: a Lookup answers what it needs to know of one
// (its image name, its mappings, a mapped file's symbols, thread names, kernel symbols), so
// that the daemon answers from /proc and tests from a table.
//
//	counts := attribute.New(jit, lookup, logger)
//	image := counts.AddProcess(pid, nowNs) // before its samples are drained
//	counts.Add(drained)                     // each sampler.Drained
//	counts.RecordsApplied(pid, events)      // after each batch of symbol events the map took
//	counts.NameLate(pid, nowNs, false)      // after records that may name kept samples
//	counts.Bound(budget)                    // after the map's Reclaim: kept code within budget
//	snap := counts.Snapshot(pid, meta, end) // the capture, native frames not named yet
//	complete, cut := snap.Name(ctx)         // outside the caller's lock: reads files' symbols
//	counts.ForgetEnded(pid, nowNs, keep)    // after a snapshot that ends an interval
//
// Samples in JIT memory that no code object names yet are kept, to be named when their
// code's record arrives (NameLate); they are looked up again only where the records told of
// (RecordsApplied) put code. NameUnnamed names the unnamed counts of a capture the same way,
// against symbols found afterwards.
//
// Counts is not safe for concurrent use: its caller serialises every call (the daemon
// holds its lock). A Snapshot belongs to its caller; Snapshot.Name may run concurrently with
// Counts' methods, but not with itself on the same Snapshot. NameUnnamed is safe to call
// concurrently on different captures.
package attribute
