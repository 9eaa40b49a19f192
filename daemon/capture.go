package daemon

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/profileio"
)

// nativeWait bounds how long a flush waits for the symbols of the files native samples
// fell in (they are read from the first sample on, in the background).
const nativeWait = 3 * time.Second

// snapshot takes pid's capture for writing. Callers hold d.mu.
func (d *daemonRun) snapshot(pid uint32, meta profileio.CaptureMeta, end profileio.CaptureEnd, final bool) pending {
	s := d.locked.counts.Snapshot(pid, meta, end)
	w := pending{pid: pid, image: d.locked.counts.Image(pid), capture: s.Capture, snap: s, final: final, owner: outfile.WriterOwns, uid: -1}
	if t := d.locked.targets[pid]; t != nil {
		w.base, w.owner, w.uid, w.firstNs, w.container = t.base, t.owner, t.uid, t.addedNs, t.container
	}
	return w
}

// meta describes the sampling for captures. Callers hold d.mu.
func (d *daemonRun) meta() profileio.CaptureMeta {
	ev := d.parts.smp.Event()
	host, _ := os.Hostname()
	m := profileio.CaptureMeta{Event: ev.Used, RequestedEvent: ev.Requested, Fallback: ev.Reason,
		Backend: string(d.parts.smp.Backend()), Host: host, Kernel: kernelRelease(),
		StartNs: d.startNs, StartTime: d.startTime}
	if d.cfg.PeriodEvents > 0 {
		m.PeriodEvents = d.cfg.PeriodEvents
	} else {
		m.FrequencyHz = d.cfg.FreqHz
	}
	return m
}

// nameDeadline is when a flush starting now stops waiting for files' symbols: after
// nativeWait, and for the final flush before the stop timeout is spent.
func (d *daemonRun) nameDeadline(final bool) time.Time {
	by := time.Now().Add(nativeWait)
	if final && !d.flushing.finalBy.IsZero() && d.flushing.finalBy.Before(by) {
		by = d.flushing.finalBy
	}
	return by
}

// name names w's native and kernel frames, waiting until w.nameBy at most for files' symbols
// still being read, and warns about its cut call chains. It runs outside the daemon's lock,
// on the flushing goroutine.
func (d *daemonRun) name(w pending) {
	if w.snap == nil {
		return
	}
	by := w.nameBy
	if by.IsZero() {
		by = time.Now().Add(nativeWait)
	}
	ctx, cancel := context.WithDeadline(d.flushing.ctx, by)
	defer cancel()
	complete, cut := w.snap.Name(ctx)
	d.noteCut(w, complete, cut)
}

// cutWarnShare is the share of a target's stack samples whose chains must be cut for one
// warning about it, and cutWarnMin how many at least: a process that ran a few
// milliseconds (under --all, a host's shells and short commands) says little about its
// frame pointers, and would make a warning of every program the host ran.
const (
	cutWarnShare = 0.5
	cutWarnMin   = 100
)

// noteCut logs, once per target (with --all, once per image: a host runs many programs
// built without frame pointers), that most of its call chains stop short of where its
// threads start, and why that usually is.
func (d *daemonRun) noteCut(w pending, complete, cut uint64) {
	d.flushing.mu.Lock()
	defer d.flushing.mu.Unlock()
	key := d.cutKey(w)
	if d.flushing.cutWarned[key] || cut < cutWarnMin || float64(cut) <= cutWarnShare*float64(complete+cut) {
		return
	}
	d.flushing.cutWarned[key] = true
	if d.cfg.Unwind == UnwindDWARF {
		d.log.Warn("profd: most of the target's call chains stop before the function its thread started in: code with neither frame information (.eh_frame) nor frame pointers on the way, or stacks deeper than the copy of each sample's",
			"pid", w.pid, "image", w.image, "cut", cut, "complete", complete)
		return
	}
	d.log.Warn("profd: most of the target's call chains stop before the function its thread started in: code without frame pointers on the way (--unwind dwarf walks it by its .eh_frame; or build it with them: C, C++: -fno-omit-frame-pointer; node: --interpreted-frames-native-stack; Java: -XX:+PreserveFramePointer)",
		"pid", w.pid, "image", w.image, "cut", cut, "complete", complete)
}

// cutKey is what noteCut warns once for: an explicit --pid's process, else an image
// (--jit-image and --all find many processes of one image, built alike).
func (d *daemonRun) cutKey(w pending) string {
	if slices.Contains(d.cfg.Pids, w.pid) {
		return strconv.FormatUint(uint64(w.pid), 10)
	}
	return "image:" + w.image
}

// kernelRelease is the running kernel's release, as uname -r prints it, read once: every
// target's capture carries it, and a storm of short processes retires hundreds a second.
var kernelRelease = sync.OnceValue(func() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
})
