// Package fdwait waits for a file descriptor to become readable without holding a thread:
// the descriptor is registered with the Go runtime's network poller, so a goroutine that
// waits costs no thread, no timer and no polling (a goroutine blocked in poll(2) instead
// keeps the runtime's monitor thread waking every 20 µs until it takes the P back). The
// poller wakes at every edge of the descriptor, so a descriptor that can become readable
// tens of thousands of times a second (an inotify descriptor watching /tmp) is better
// waited for in poll(2).
//
//	w, err := fdwait.New(fd, "pidfd") // takes fd over; Close closes it
//	err = w.Wait(time.Second, func(fd uintptr) bool { return readable(fd) })
//	w.Wake() // from another goroutine: the wait returns now
//
// A Waiter is safe for concurrent use; one goroutine waits at a time.
package fdwait

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Waiter waits on one descriptor.
type Waiter struct {
	f      *os.File
	fd     int
	woken  atomic.Bool // a Wake since the last Wait returned
	closed atomic.Bool
}

// New takes fd over (it is made non-blocking and closed by Close) and registers it with the
// poller.
func New(fd int, name string) (*Waiter, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fdwait: %s: %w", name, os.NewSyscallError("fcntl", err))
	}
	f := os.NewFile(uintptr(fd), name)
	// A deadline can only be set on a descriptor the poller took: this tells whether it did.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("fdwait: %s: %w", name, err)
	}
	return &Waiter{f: f, fd: fd}, nil
}

// Fd is the descriptor, for the caller's own system calls on it until Close. (os.File's Fd
// would take it out of non-blocking mode, and so out of the poller.)
func (w *Waiter) Fd() int { return w.fd }

// Wait returns nil when ready reports true, when timeout passes (timeout < 0: never), or at
// once when Wake was called since the last Wait returned. ready is called first and again
// each time the poller reports the descriptor readable; it reads or polls fd itself. After
// Close, Wait returns an error wrapping os.ErrClosed.
func (w *Waiter) Wait(timeout time.Duration, ready func(fd uintptr) bool) error {
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	if err := w.f.SetReadDeadline(deadline); err != nil {
		return w.closedErr(err)
	}
	if w.woken.Swap(false) { // a Wake before the deadline was set
		return nil
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		return w.closedErr(err)
	}
	err = rc.Read(func(fd uintptr) bool {
		return w.woken.Load() || ready(fd)
	})
	w.woken.Store(false)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return w.closedErr(err)
}

// closedErr is err, or an error wrapping os.ErrClosed when Close was called (the file's
// own error then says "use of closed file", which wraps nothing).
func (w *Waiter) closedErr(err error) error {
	if err != nil && w.closed.Load() {
		return fmt.Errorf("fdwait: %s: %w", w.f.Name(), os.ErrClosed)
	}
	return err
}

// Wake makes the current Wait return, or the next one at once.
func (w *Waiter) Wake() {
	w.woken.Store(true)
	_ = w.f.SetReadDeadline(time.Unix(1, 0))
}

// Close closes the descriptor, ending any Wait.
func (w *Waiter) Close() error {
	w.closed.Store(true)
	return w.f.Close()
}

// Readable reports whether fd has something to read, without waiting: the usual ready
// function.
func Readable(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}
