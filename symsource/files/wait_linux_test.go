package files

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestEventWaiter: Wait returns at a timeout, at a Wake (once), and with events when a
// watched directory has some.
func TestEventWaiter(t *testing.T) {
	w, err := newEventWaiter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if events, err := w.Wait(10 * time.Millisecond); events || err != nil {
		t.Fatalf("nothing happened: events %v, %v", events, err)
	}
	w.Wake()
	start := time.Now()
	if events, err := w.Wait(time.Hour); events || err != nil || time.Since(start) > time.Minute {
		t.Fatalf("woken: events %v, %v after %v", events, err, time.Since(start))
	}
	if events, _ := w.Wait(10 * time.Millisecond); events {
		t.Fatal("a wake counted twice, or as events")
	}
	dir := t.TempDir()
	if _, err := unix.InotifyAddWatch(w.Fd(), dir, dirEvents); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/perf-1.map", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if events, err := w.Wait(time.Hour); !events || err != nil {
		t.Fatalf("a file made: events %v, %v", events, err)
	}
}
