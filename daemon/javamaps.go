package daemon

import (
	"context"
	"math"
	"time"

	"github.com/profd/profd/jitmap"
)

// javaMapsTick is how often the asking goroutine looks for JVMs due: a new one is asked
// within it of being old enough to be signalled, whatever the period.
const javaMapsTick = time.Second

// startJavaMaps starts asking, when cfg.JavaPerfMapEvery is set (newDaemonRun made the
// asker).
func (d *daemonRun) startJavaMaps() {
	if d.java.asker == nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	d.java.stop, d.java.done = stop, make(chan struct{})
	go func() {
		defer close(d.java.done)
		t := time.NewTicker(min(javaMapsTick, d.cfg.JavaPerfMapEvery))
		defer t.Stop()
		for {
			d.askJVMs(ctx, time.Now().Add(d.cfg.JavaPerfMapEvery), false)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// stopJavaMaps stops the asking goroutine and asks every JVM once more, until by, so that
// the final profiles name what they compiled since the last time. Called at the stop,
// while the watcher and the files' readers still run.
func (d *daemonRun) stopJavaMaps(by time.Time) {
	if d.java.asker == nil {
		return
	}
	d.java.stop()
	<-d.java.done
	d.askJVMs(context.Background(), by, true)
}

// renewJVM tells the asker that target pid was added: a process that exec'd (a launcher
// script that runs `exec java`) is added anew, and may run HotSpot now. Called on the
// watcher's goroutine.
func (d *daemonRun) renewJVM(pid uint32) {
	if d.java.asker != nil {
		d.java.asker.Renew(pid)
	}
}

// askJVMs asks the targets' JVMs that are due (all: every one), until by. With --all, a
// target whose files were not read yet is checked for them at once when its JVM wrote its
// map.
func (d *daemonRun) askJVMs(ctx context.Context, by time.Time, all bool) {
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	wrote := d.java.asker.Ask(ctx, d.parts.watch.Targets(), all)
	if len(wrote) == 0 {
		return
	}
	d.markJVMs(wrote)
	if !d.cfg.All {
		return
	}
	d.changes.applying.Lock()
	defer d.changes.applying.Unlock()
	for _, pid := range wrote {
		if h := d.host.waiting[pid]; h != nil && !d.checkSources(pid, d.parts.look.Image(pid), h, true) {
			delete(d.host.waiting, pid)
		}
	}
}

// markJVMs notes that the targets pids run HotSpot JVMs (they wrote perf maps when asked),
// and hands the sampler the span of the code each one's maps named so far: a JVM's code
// cache, where its interpreter enters compiled methods with a return address it pushed and
// a jump (sampler.JITCode). The records of later maps extend it (jitSpan).
func (d *daemonRun) markJVMs(pids []uint32) {
	if !d.cfg.Stacks {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, pid := range pids {
		t := d.locked.targets[pid]
		if t == nil || t.jvm {
			continue
		}
		t.jvm = true
		lo, hi := uint64(math.MaxUint64), uint64(0)
		for _, o := range d.parts.jit.Objects(pid) {
			lo, hi = min(lo, o.Addr), max(hi, o.Addr+o.Size)
		}
		d.parts.smp.JITCode(pid, lo, hi)
	}
}

// jitSpan hands the sampler the span of the code b loads, when b is a JVM's (markJVMs).
// Callers hold d.mu.
func (d *daemonRun) jitSpan(b jitmap.Batch) {
	if t := d.locked.targets[b.Pid]; t == nil || !t.jvm {
		return
	}
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for _, ev := range b.Events {
		if load, ok := ev.(*jitmap.CodeLoad); ok {
			lo, hi = min(lo, load.Object.Addr), max(hi, load.Object.Addr+load.Object.Size)
		}
	}
	d.parts.smp.JITCode(b.Pid, lo, hi)
}
