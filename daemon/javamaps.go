package daemon

import (
	"context"
	"time"

	"github.com/profd/profd/symsource/hotspot"
)

// javaMaps asks the HotSpot JVMs among the targets for their perf maps every
// cfg.JavaPerfMapEvery (package hotspot), on a goroutine of its own, and once more as profd
// stops: HotSpot writes its map only when asked, and package files reads it then.
type javaMaps struct {
	asker *hotspot.Asker
	stop  context.CancelFunc
	done  chan struct{}
}

// startJavaMaps starts asking, when cfg.JavaPerfMapEvery is set.
func (d *daemonRun) startJavaMaps() {
	if d.cfg.JavaPerfMapEvery <= 0 {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	d.java = javaMaps{asker: hotspot.NewAsker(d.log), stop: stop, done: make(chan struct{})}
	go func() {
		defer close(d.java.done)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			next := time.Now().Add(d.cfg.JavaPerfMapEvery)
			if again := d.askJVMs(ctx, next); again > 0 && again < d.cfg.JavaPerfMapEvery {
				next = time.Now().Add(again) // a JVM too young to be signalled yet
			}
			t.Reset(time.Until(next))
		}
	}()
}

// stopJavaMaps stops the asking goroutine and asks once more, until by, so that the final
// profiles name what the JVMs compiled since the last time. Called at the stop, while the
// watcher and the files' readers still run.
func (d *daemonRun) stopJavaMaps(by time.Time) {
	if d.java.asker == nil {
		return
	}
	d.java.stop()
	<-d.java.done
	d.askJVMs(context.Background(), by)
}

// askJVMs asks every target's JVM, until by, and returns how soon one too young to be
// signalled may be asked (hotspot.Asker.Ask). With --all, a target whose files were not read
// yet is checked for them at once when its JVM wrote its map.
func (d *daemonRun) askJVMs(ctx context.Context, by time.Time) time.Duration {
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	wrote, again := d.java.asker.Ask(ctx, d.parts.watch.Targets())
	if !d.cfg.All || len(wrote) == 0 {
		return again
	}
	d.changes.applying.Lock()
	defer d.changes.applying.Unlock()
	for _, pid := range wrote {
		if h := d.host.waiting[pid]; h != nil && !d.checkSources(pid, d.parts.look.Image(pid), h) {
			delete(d.host.waiting, pid)
		}
	}
	return again
}
