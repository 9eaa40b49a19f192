package daemon

import (
	"context"
	"maps"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
)

// How often a target's list of objects registered with the GDB JIT interface is walked for
// code compiled since: first as soon as its symbols are read, then minRegisteredWait after
// a walk that found objects, twice as long after each that found none new, up to
// maxRegisteredWait (a walk of a long list reads each entry; a process without the
// interface costs a map look-up, and once a second a read of its address space's size). A
// short-lived program's code is named while it runs: its memory is gone once it exits.
// The walking goroutine sleeps until the next target is due, or a target's symbols begin to
// be read, at most maxRegisteredWait; a target over its record allowance is tried again
// after minRegisteredWait.
const (
	minRegisteredWait = 50 * time.Millisecond
	maxRegisteredWait = 2 * time.Second
)

// registeredCostRatio: a target's next walk waits at least this many times the CPU time its
// last walk took, so that walking its list takes at most 2 % of a core whatever it
// registers: a list of tens of thousands of entries, each read from the process, that
// grows by one before every walk, would otherwise keep the walks at minRegisteredWait.
const registeredCostRatio = 50

// startRegistered starts walking the targets' lists (open made the reader).
func (d *daemonRun) startRegistered() {
	ctx, stop := context.WithCancel(context.Background())
	d.reg.stop, d.reg.done, d.reg.due = stop, make(chan struct{}), map[uint32]*registeredDue{}
	go func() {
		defer close(d.reg.done)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-d.parts.symbols.added:
			}
			t.Reset(time.Until(d.walkRegistered(false)))
		}
	}()
}

// stopRegistered stops the walking goroutine and walks every target's list once more, for
// the code compiled since the last walk. Called at the stop, while the watcher and the
// symbol stage still run.
func (d *daemonRun) stopRegistered() {
	if d.reg.stop == nil {
		return
	}
	d.reg.stop()
	<-d.reg.done
	d.walkRegistered(true)
}

// forgetRegistered lets go of what the walks keep of target pid (it exited, or exec'd).
func (d *daemonRun) forgetRegistered(pid uint32) {
	d.reg.reader.Forget(pid)
}

// walkRegistered sends the symbol stage the functions of the objects each target due (all:
// every target) registered, and unregistered, since its last walk, and returns when the
// next is due. A target whose symbols are not read (with --all, one whose sources are not
// set up: its queue's making wakes the walks) or that has used its allowance of records is
// left for a later walk: its list keeps what was not read.
func (d *daemonRun) walkRegistered(all bool) time.Time {
	now := time.Now()
	wake := now.Add(maxRegisteredWait)
	targets := d.parts.watch.Targets()
	for _, pid := range targets {
		next := d.reg.due[pid]
		if next == nil {
			next = &registeredDue{at: now, wait: minRegisteredWait}
			d.reg.due[pid] = next
		}
		if !d.parts.symbols.has(pid) {
			continue
		}
		if !all && now.Before(next.at) {
			wake = earlier(wake, next.at)
			continue
		}
		if !d.parts.symbols.ready(pid) {
			wake = earlier(wake, now.Add(minRegisteredWait))
			continue
		}
		added, removed, err := d.reg.reader.Changes(pid)
		next.walked(now, d.reg.reader.WalkTook(pid), len(added) > 0)
		wake = earlier(wake, next.at)
		if err != nil || len(added)+len(removed) == 0 {
			continue
		}
		ns := monotonicNs()
		events := make([]jitmap.Event, 0, len(added)+len(removed))
		for _, addr := range removed {
			events = append(events, &jitmap.CodeUnload{Pid: pid, TimeNs: ns, Addr: addr})
		}
		for _, o := range added {
			o.Source, o.LoadNs = codeobj.SourceGDBJIT, ns
			events = append(events, &jitmap.CodeLoad{Pid: pid, Object: o, TimeUnknown: true})
		}
		d.parts.symbols.addPaced(jitmap.Batch{Pid: pid, Source: codeobj.SourceGDBJIT, Stream: "GDB JIT interface", Events: events})
	}
	if len(d.reg.due) > len(targets) { // targets gone are let go of
		current := make(map[uint32]bool, len(targets))
		for _, pid := range targets {
			current[pid] = true
		}
		maps.DeleteFunc(d.reg.due, func(pid uint32, _ *registeredDue) bool { return !current[pid] })
	}
	return wake
}

// walked schedules the next walk of a target walked at start, whose list took took to walk
// (gdbjit.Reader.WalkTook: the look for its descriptor, done once, is not counted):
// minRegisteredWait after one that found objects, else twice the last wait, up to
// maxRegisteredWait; and never sooner than registeredCostRatio times took.
func (due *registeredDue) walked(start time.Time, took time.Duration, found bool) {
	due.wait = min(2*due.wait, maxRegisteredWait)
	if found {
		due.wait = minRegisteredWait
	}
	due.at = start.Add(max(due.wait, registeredCostRatio*took))
}

// earlier is the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
