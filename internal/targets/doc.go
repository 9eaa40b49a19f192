// Package targets finds the processes profd samples: explicit pids, and every process that
// runs a --jit-image executable (the file a path or a name on PATH resolves to, never a
// process's comm), whether it was running when profd started or started later. Every
// target's exit is watched through a pidfd (the runtime's poller waits for it, with no
// timer). Image processes are found by scanning /proc and, with
// CAP_NET_ADMIN, by listening to the kernel's process-events connector, so a process is
// checked the moment it execs or is forked (a child that does not exec, such as a PostgreSQL
// backend, runs its parent's image); the scan runs every Interval (default 100 ms) without
// these notifications and every 5 s with them (at once when the kernel reports lost ones). It
// reports each process once when it appears and once when it goes (exit, or an exec to
// another image), by pid and start time, so a reused pid is a new target. An explicit pid
// that execs another executable is reported gone and found anew (seen at its exec with the
// notifications, else by a look at the explicit pids every Interval), so that each target
// runs one executable.
//
// With Config.All every process is a target but kernel threads and profd itself, narrowed
// by a Filter (cgroup v2 subtrees, container ids, real uids, excluded images; AND across
// kinds, OR within one) and Images; each process is checked as it forks, execs and changes
// user, and at the scans, and one that execs another executable is reported as removed and
// added anew. While the notifications work, a scan trusts a process's last full check for
// fullCheckEvery: it lists /proc and reads nothing of a process checked since (but its
// stat and cgroup with a cgroup filter, as nothing reports a move between cgroups).
//
// Config.MaxTargets and MaxPerUser bound the targets found by scanning, in all and per real
// user: a process past either waits, neither reported nor watched nor read again by scans,
// and is checked again, oldest first, when a target of its user (or any, past MaxTargets)
// leaves (bound.go).
//
// The daemon owns a Watcher; the sampler's tests use one too.
//
//	w, err := targets.New(targets.Config{PIDs: []int{1234}, Images: []string{"lli"}}, targets.Handler{
//		Added:   func(pid int) { s.AddTarget(pid) },
//		Removed: func(pid int) { s.RemoveTarget(pid) },
//	})
//	if err != nil { ... }
//	w.Start(ctx)
//	defer w.Close()
//
// Handler functions run on the watcher's goroutine, one at a time. Targets and Close are safe
// to call concurrently with it.
package targets
