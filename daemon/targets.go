package daemon

import (
	"fmt"
	"os"
	"time"

	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/symsource/fifo"
)

// addTarget runs on the watcher's goroutine when a target appears.
func (d *daemon) addTarget(pid uint32) {
	// The owner is known before any flush can write the target's files.
	st, stErr := procfs.ReadStatus(pid)
	owner, uid := outfile.WriterOwns, -1
	if stErr == nil {
		owner, uid = outputOwner(st.UID, st.GID), st.UID
	}
	// The counts exist before sampling starts: samples of a pid without them are strays of
	// a process already retired (see attribute.Counts.AddProcess).
	d.mu.Lock()
	image := d.locked.counts.AddProcess(pid, monotonicNs())
	if d.locked.targets[pid] == nil {
		d.locked.processes[pid]++
		d.locked.targets[pid] = &liveTarget{base: outputBase(image, pid, d.locked.processes[pid]), owner: owner, uid: uid}
	}
	d.mu.Unlock()
	if err := d.parts.smp.AddTarget(pid); err != nil {
		d.log.Warn("profd: cannot sample target", "pid", pid, "err", err)
		d.mu.Lock()
		d.locked.counts.RemoveProcess(pid)
		delete(d.locked.targets, pid)
		d.mu.Unlock()
		return
	}
	d.parts.symbols.addTarget(pid)
	if stErr != nil {
		d.log.Warn("profd: no symbol FIFO or files for target; its outputs are profd's user's", "pid", pid, "err", stErr)
		return
	}
	if err := d.parts.fifo.AddTarget(pid, fifo.Owner{UID: st.UID, GID: st.GID}); err != nil {
		d.log.Warn("profd: no symbol FIFO for target; jitdump and perf-map files still read", "pid", pid, "err", err)
	}
	if err := d.parts.files.AddTarget(pid, st.UID); err != nil {
		d.log.Warn("profd: jitdump and perf-map files of target not read", "pid", pid, "err", err)
	}
	select {
	case d.wake.addedNote <- struct{}{}:
	default:
	}
	fmt.Fprintf(d.out, "profd: attached to pid %d (%s), symbols FIFO %s\n", pid, image, d.parts.fifo.FIFOPath(pid))
	d.log.Info("profd: target added", "pid", pid, "image", image, "fifo", d.parts.fifo.FIFOPath(pid))
}

// outputOwner is who a target's output files belong to: the target's (effective) user and
// group, so that it can read its own profiles and no other user can; profd's own user when
// it cannot give files away (it does not run as root).
func outputOwner(uid, gid int) outfile.Owner {
	if os.Geteuid() != 0 {
		return outfile.WriterOwns
	}
	return outfile.Owner{UID: uid, GID: gid}
}

// removeTarget runs on the watcher's goroutine when a target exits. Its FIFO is read to the
// end, its last samples are drained, and its final capture is taken and queued for the next
// flush; then everything profd held for it is released. All of that happens before the
// watcher can report a new process that reuses the pid, so the two never mix.
func (d *daemon) removeTarget(pid uint32) {
	looked := append([]string{d.parts.fifo.FIFOPath(pid)}, d.parts.files.Looked(pid)...)
	d.parts.fifo.RemoveTarget(pid)
	d.parts.files.RemoveTarget(pid)
	d.parts.symbols.removeTarget(pid)
	d.mu.Lock()
	d.drainLocked()
	now := monotonicNs()
	if counts := d.locked.counts; counts.Has(pid) {
		counts.NameLate(pid, true)
		counts.WarnUnnamed(pid, looked)
		st := d.parts.smp.Stats()
		end := profileio.CaptureEnd{EndNs: now, EndTime: time.Now(), LostSamples: st.Lost + st.Dropped}
		d.locked.retired = append(d.locked.retired, d.snapshot(pid, d.meta(), end, true))
		counts.RemoveProcess(pid)
		delete(d.locked.targets, pid)
	}
	d.parts.jit.RemovePid(pid)
	d.locked.flushQueue.Forget(pid) // its reply FIFO is gone: no one to answer
	d.mu.Unlock()
	d.replies.forget(pid)
	d.parts.smp.RemoveTarget(pid)
	d.log.Info("profd: target exited", "pid", pid)
	select {
	case d.wake.goneNote <- struct{}{}:
	default:
	}
}
