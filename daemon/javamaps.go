package daemon

import (
	"context"
	"time"
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
	if !d.cfg.All || len(wrote) == 0 {
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
