package daemon

import (
	"fmt"
	"slices"

	"github.com/profd/profd/internal/procfs"
)

// inheritCode links target pid to the target it was forked from, when it runs in a copy of
// that one's address space (it has not exec'd since: procfs.ForkCopy), so that the code the
// parent's JIT described names pid's samples too (attribute.Counts.Inherit): a server that
// forks its workers after its JIT compiled, or whose workers compile into memory they share
// and write their symbols to the file their parent opened (PHP-FPM's opcache JIT). A parent
// that is no target yet (a scan found the children first) is linked when it is set up; one
// that never is names nothing. It also links the targets set up before pid that were forked
// from it. Called by setUpTarget, after pid was admitted.
func (d *daemonRun) inheritCode(pid uint32) {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return
	}
	// The fork's notification names the parent even after it exited (a daemon's launcher
	// may be gone by now, its child handed to init); a scan's find has its parent read.
	from, forked := d.parts.watch.ForkedFrom(pid)
	if !forked && st.Parent > 1 {
		parent, err := procfs.ReadStat(st.Parent)
		from, forked = st.Parent, err == nil && procfs.ForkCopy(st, parent)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.locked.targets[pid]
	if t == nil {
		return
	}
	if forked {
		t.forkedFrom = from
		if d.locked.targets[from] != nil || d.lingering.has(from) {
			d.locked.counts.Inherit(pid, from)
			t.inherits = true
		} else {
			d.locked.orphans[from] = append(d.locked.orphans[from], pid)
		}
	}
	for _, child := range d.locked.orphans[pid] {
		if c := d.locked.targets[child]; c != nil && c.forkedFrom == pid {
			d.locked.counts.Inherit(child, pid)
			c.inherits = true
		}
	}
	delete(d.locked.orphans, pid)
}

// forgetOrphanLocked drops retiring target pid from the children waiting for their parent
// to be set up. Callers hold d.mu.
func (d *daemonRun) forgetOrphanLocked(pid uint32) {
	t := d.locked.targets[pid]
	if t == nil || t.forkedFrom == 0 {
		return
	}
	waiting := slices.DeleteFunc(d.locked.orphans[t.forkedFrom], func(c uint32) bool { return c == pid })
	if len(waiting) == 0 {
		delete(d.locked.orphans, t.forkedFrom)
	} else {
		d.locked.orphans[t.forkedFrom] = waiting
	}
}

// withParentLocked is looked, where target pid's symbols were looked for, and, when pid was
// forked from a process that was never profiled, that process: its JIT may name pid's code
// in files of its own, which profd reads only for targets. Callers hold d.mu.
func (d *daemonRun) withParentLocked(pid uint32, looked []string) []string {
	t := d.locked.targets[pid]
	if t == nil || t.forkedFrom == 0 || t.inherits {
		return looked
	}
	return append(slices.Clip(looked), fmt.Sprintf("not in the files of pid %d, the process it was forked from and runs code of, which is not profiled (profile it too: --pid, or a filter it passes)", t.forkedFrom))
}

// lingers returns those of pids, exiting targets, whose code targets that are not among
// them still run and look up (jitmap.Map.Heirs), or will once set up (forked from it, by
// the watcher's notifications): a server's launcher that opened the JIT's perf map and
// exited once it had forked the master (PHP-FPM run as a daemon). Such a target's outputs
// end as any other's, but its symbol queue, its files and its code map stay while those
// run (endLingering), so that what they compile and write to its files names their samples.
func (d *daemonRun) lingers(pids []uint32, execed map[uint32]bool) map[uint32]bool {
	var out map[uint32]bool
	for _, pid := range pids {
		if !execed[pid] && d.hasHeirs(pid, pids) {
			if out == nil {
				out = map[uint32]bool{}
			}
			out[pid] = true
		}
	}
	return out
}

// endHeirless ends the lingering processes (lingers) no target looks up the code of any
// more (endLingering). A process lingering for another that lingered (a launcher for its
// server, which lingered for its workers) is let go once that one is: the links to it go
// with that one's code map.
func (d *daemonRun) endHeirless() {
	for {
		ended := d.lingering.takeUnless(func(pid uint32) bool { return d.hasHeirs(pid, nil) })
		if len(ended) == 0 {
			return
		}
		for _, pid := range ended {
			d.endLingering(pid)
		}
	}
}

// hasHeirs reports whether targets other than leaving look up pid's code (jitmap.Map.Heirs)
// or were forked from it and will once set up (the watcher's notifications tell).
func (d *daemonRun) hasHeirs(pid uint32, leaving []uint32) bool {
	return slices.ContainsFunc(d.parts.jit.Heirs(pid), func(h uint32) bool { return !slices.Contains(leaving, h) }) ||
		d.parts.watch.HasForked(pid)
}

// endLingering releases what a lingering process (lingers) kept for its heirs: its files,
// its symbol queue and its code map. Called when its last heir retired (endHeirless), or
// before a new process that reuses its pid is added (endLingeringPid).
func (d *daemonRun) endLingering(pid uint32) {
	d.parts.files.RemoveTarget(pid)
	d.parts.symbols.removeTarget(pid)
	d.parts.jit.RemovePid(pid)
	d.log.Debug("profd: the code of an exited target, kept for the processes that inherited it, let go", "pid", pid)
}

// endLingeringPid ends lingering process pid now, if it is one: a new process has its pid.
// Those that lingered for it alone go too.
func (d *daemonRun) endLingeringPid(pid uint32) {
	if d.lingering.take(pid) {
		d.endLingering(pid)
		d.endHeirless()
	}
}
