package fdwait

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newPipeWaiter(t *testing.T) (*Waiter, int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	w, err := New(p[0], "pipe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); unix.Close(p[1]) })
	return w, p[1]
}

// TestWaitReadable: a wait returns when a write makes the descriptor readable, long before
// its timeout.
func TestWaitReadable(t *testing.T) {
	w, wr := newPipeWaiter(t)
	go func() {
		time.Sleep(20 * time.Millisecond)
		unix.Write(wr, []byte{1})
	}()
	start := time.Now()
	if err := w.Wait(time.Minute, Readable); err != nil {
		t.Fatal(err)
	}
	if !Readable(uintptr(w.Fd())) || time.Since(start) > 30*time.Second {
		t.Errorf("returned after %v, readable %v", time.Since(start), Readable(uintptr(w.Fd())))
	}
}

// TestWaitTimeoutAndWake: with nothing to read the wait ends at its timeout, a Wake ends a
// wait at once, and a Wake before a wait makes it return at once.
func TestWaitTimeoutAndWake(t *testing.T) {
	w, _ := newPipeWaiter(t)
	start := time.Now()
	if err := w.Wait(30*time.Millisecond, Readable); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("timeout wait returned after %v", d)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		w.Wake()
	}()
	if err := w.Wait(-1, Readable); err != nil {
		t.Fatal(err)
	}
	w.Wake()
	done := make(chan error, 1)
	go func() { done <- w.Wait(-1, Readable) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a wait after a Wake did not return")
	}
}

// TestWaitAfterClose: Close ends a wait with os.ErrClosed.
func TestWaitAfterClose(t *testing.T) {
	w, _ := newPipeWaiter(t)
	done := make(chan error, 1)
	go func() { done <- w.Wait(-1, Readable) }()
	time.Sleep(20 * time.Millisecond)
	w.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("wait after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the wait")
	}
}

// TestWaitStartedAfterClose: a wait that starts once Close was called returns os.ErrClosed
// too (a watcher closes a pidfd whose goroutine has not begun to wait yet).
func TestWaitStartedAfterClose(t *testing.T) {
	w, _ := newPipeWaiter(t)
	w.Close()
	if err := w.Wait(-1, Readable); !errors.Is(err, os.ErrClosed) {
		t.Errorf("wait after Close: %v, want os.ErrClosed", err)
	}
}
