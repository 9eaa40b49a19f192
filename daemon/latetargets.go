package daemon

import (
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/sampler"
)

// sortStraysLocked hands the strays what dr holds of processes that are not targets, and
// gives dr back what the strays hold of those that are targets now or that exited before
// they could be (added now, lateTargetLocked); it lets go of the samples of processes that
// wait past --max-targets, or stayed no target for strayHold, and of an earlier process of
// a pid reused. Callers hold d.mu.
func (d *daemonRun) sortStraysLocked(dr *sampler.Drained, nowNs int64) {
	s := &d.locked.strays
	ended := d.programsEndedLocked(dr)
	keep := func(pid uint32, firstNs int64) bool {
		execNs, ok := ended[pid]
		return d.locked.counts.Has(pid) && (!ok || firstNs < execNs)
	}
	if s.hold(dr, keep, nowNs) && !s.warned {
		s.warned = true
		d.log.Warn("profd: the samples of more processes that are not targets yet than profd holds; the samples of further ones are let go until those are added",
			"max_keys", maxStrayKeys)
	}
	for pid, p := range s.procs {
		// Samples from before the fork of the process that has the pid now were an earlier
		// process's, whose user may be another: its pid was reused since.
		if born := d.parts.look.bornNs(pid); born > 0 && !s.since(pid, born) {
			continue
		}
		_, execed := ended[pid]
		switch {
		case d.locked.counts.Has(pid) && execed && nowNs-p.heldNs < int64(strayHold):
			continue // for the target its new program becomes, added anew soon
		case d.locked.counts.Has(pid):
		case d.parts.watch.Waits(pid):
			s.drop(pid)
			continue
		case exitedNow(pid):
			if d.excludedExited(pid) {
				s.drop(pid)
				continue
			}
			d.lateTargetLocked(pid, p.firstNs)
		case nowNs-p.heldNs >= int64(strayHold) || d.parts.watch.Excluded(pid):
			s.drop(pid)
			continue
		default:
			continue
		}
		s.give(pid, dr)
	}
}

// programsEndedLocked returns, for each target with samples in dr whose program ended by an
// exec the watcher has not reported yet, when the exec was, as the mmap records tell: a
// process forked from a target is one itself, until the exec's notification retires it and
// adds it anew under its new program (or not at all, when that one is filtered out). Its
// samples since the exec are the new program's, not the old one's, however late the
// notification comes under load. An exec of the file the target runs (the same device and
// inode, whatever path a container names it by) is none: it stays the same target. Callers
// hold d.mu.
func (d *daemonRun) programsEndedLocked(dr *sampler.Drained) map[uint32]int64 {
	if d.parts.look.made == nil {
		return nil
	}
	var ended map[uint32]int64
	checked := map[uint32]bool{}
	check := func(pid uint32) {
		t := d.locked.targets[pid]
		if t == nil || checked[pid] {
			return
		}
		checked[pid] = true
		none := procfs.FileID{}
		names, ok := d.parts.look.remembered(pid)
		if !ok || names.exeID == none {
			return // nothing to tell its program's file by
		}
		execNs, file := d.parts.look.made.LastExec(pid)
		if execNs > t.addedNs && file != none && file != names.exeID {
			if ended == nil {
				ended = map[uint32]int64{}
			}
			ended[pid] = execNs
		}
	}
	for k := range dr.Counts {
		check(k.PID)
	}
	for _, st := range dr.Stacks {
		check(st.PID)
	}
	return ended
}

// excludedExited reports whether process pid, which exited before the watcher checked it,
// ran an --exclude-image, as its mmap records tell; with --exclude-image, a process whose
// file they do not tell counts as excluded (it cannot be checked).
func (d *daemonRun) excludedExited(pid uint32) bool {
	if len(d.cfg.ExcludeImages) == 0 {
		return false
	}
	path, id := d.parts.look.exitedFile(pid)
	return path == "" && id == (procfs.FileID{}) || d.parts.watch.ExcludedFile(path, id)
}

// exitedNow reports whether process pid has exited: it is gone from /proc, or a zombie.
func exitedNow(pid uint32) bool {
	_, err := procfs.StartTicks(pid)
	return err != nil
}

// lateTargetLocked makes pid, a process that exited before the watcher made it a target
// but drew samples, a target from its first sample's time, and queues its retirement: its
// capture is taken and written like that of any target that exited. Callers hold d.mu.
func (d *daemonRun) lateTargetLocked(pid uint32, firstNs int64) {
	d.parts.look.rememberExited(pid)
	image := d.admitLocked(pid, firstNs)
	d.tally.late.Add(1)
	d.notes.logTarget(d.log, "profd: target added from its samples: it exited before it was found", "pid", pid, "image", image)
	d.changes.push(targetChange{pid: pid, removed: true})
}
