package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/symsource/fifo"
)

// setUpTarget starts reading the symbols of target pid: its symbol queue, its FIFO and its
// files. Called by applyChanges.
func (d *daemonRun) setUpTarget(pid uint32) {
	image := d.admit(pid)
	if d.cfg.All {
		d.setUpHostTarget(pid, image)
		return
	}
	d.parts.symbols.addTarget(pid)
	st, err := procfs.ReadStatus(pid)
	if err == nil {
		_, err = procfs.StartTicks(pid) // a zombie has a status, and no root to look in
	}
	if err != nil {
		d.exitedBeforeSetup(pid, err)
		return
	}
	if err := d.parts.fifo.AddTarget(pid, fifo.Owner{UID: st.UID, GID: st.GID}); err != nil {
		d.log.Warn("profd: no symbol FIFO for target; jitdump and perf-map files still read", "pid", pid, "err", err)
	}
	if err := d.parts.files.AddTarget(pid, st.UID); err != nil {
		if exited(err) {
			d.exitedBeforeSetup(pid, err)
			return
		}
		d.log.Warn("profd: jitdump and perf-map files of target not read", "pid", pid, "err", err)
	}
	fmt.Fprintf(d.out, "profd: attached to pid %d (%s), symbols FIFO %s\n", pid, image, d.parts.fifo.FIFOPath(pid))
}

// exitedBeforeSetup counts target pid, which exited before its symbol sources were set up
// (err, when one says so): it is sampled, and has nothing to read symbols from.
func (d *daemonRun) exitedBeforeSetup(pid uint32, err error) {
	if err != nil && !exited(err) {
		d.log.Warn("profd: no symbol FIFO or files for target", "pid", pid, "err", err)
		return
	}
	d.tally.exitedEarly.Add(1)
	d.log.Debug("profd: target exited before its symbol sources were set up", "pid", pid, "err", err)
}

// exited reports whether err says that a process is gone (or a zombie).
func exited(err error) bool {
	// A process that is exiting answers reads of its /proc files with ESRCH.
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, procfs.ErrExited) || errors.Is(err, syscall.ESRCH)
}

// retireTargets runs when targets have exited. Their FIFOs are read to the end, their last
// samples are drained (once for them all), and their final captures are taken and queued
// for the next flush; then everything profd held for them is released. Called by
// applyChanges, before a new process that reuses one of the pids is added.
// Targets the sampler refused (missed) are dropped without a capture.
func (d *daemonRun) retireTargets(pids []uint32, missed map[uint32]bool) {
	looked := make([][]string, len(pids))
	for _, pid := range pids {
		d.lastSourceCheck(pid)
	}
	for i, pid := range pids {
		looked[i] = d.lookedFor(pid)
		d.parts.fifo.RemoveTarget(pid)
		d.parts.files.RemoveTarget(pid)
		d.parts.symbols.removeTarget(pid)
	}
	d.mu.Lock()
	d.drainLocked()
	now := monotonicNs()
	counts := d.locked.counts
	st := d.parts.smp.Stats()
	end := profileio.CaptureEnd{EndNs: now, EndTime: time.Now(), LostSamples: st.Lost + st.Dropped}
	meta := d.meta()
	for i, pid := range pids {
		if counts.Has(pid) && missed[pid] {
			counts.RemoveProcess(pid)
			delete(d.locked.targets, pid)
		} else if counts.Has(pid) {
			counts.NameLate(pid, now, true)
			counts.WarnUnnamed(pid, looked[i])
			d.boundLocked()
			d.locked.retired = append(d.locked.retired, d.snapshot(pid, meta, end, true))
			counts.RemoveProcess(pid)
			delete(d.locked.targets, pid)
		}
		d.parts.jit.RemovePid(pid)
		d.parts.look.forget(pid)
		d.locked.flushQueue.Forget(pid) // its reply FIFO is gone: no one to answer
	}
	d.publishLocked()
	d.mu.Unlock()
	for _, pid := range pids {
		d.replies.forget(pid)
		d.parts.smp.RemoveTarget(pid)
		d.log.Info("profd: target exited", "pid", pid)
	}
	select {
	case d.wake.goneNote <- struct{}{}:
	default:
	}
}
