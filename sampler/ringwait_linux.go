package sampler

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	perf "github.com/elastic/go-perf"
	"golang.org/x/sys/unix"
)

// ringWaiter lets the ring reader sleep until a ring passes its wake-up watermark (the
// events are opened with Watermark, so the kernel makes a ring's fd readable when it is
// half full), a timeout passes, or wake is called. The ring fds sit in an epoll set whose
// own fd is registered with the runtime's network poller, so the wait costs no thread and
// no polling (a goroutine blocked in poll(2) keeps Go's monitor thread polling every 20 µs
// until it takes the P back).
type ringWaiter struct {
	f       *os.File // the epoll fd, registered with the network poller
	events  []unix.EpollEvent
	stopped atomic.Bool
}

func newRingWaiter() (*ringWaiter, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("sampler: ring waiter: %w", os.NewSyscallError("epoll_create1", err))
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sampler: ring waiter: %w", os.NewSyscallError("fcntl", err))
	}
	w := &ringWaiter{f: os.NewFile(uintptr(fd), "ring-epoll"), events: make([]unix.EpollEvent, 64)}
	if err := w.f.SetReadDeadline(time.Time{}); err != nil { // not registered with the poller
		w.f.Close()
		return nil, fmt.Errorf("sampler: ring waiter: %w", err)
	}
	return w, nil
}

// add watches ev's ring. A closed event leaves the set by itself.
func (w *ringWaiter) add(ev *perf.Event) error {
	fd, err := ev.FD()
	if err != nil {
		return err
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var ctlErr error
	err = rc.Control(func(epfd uintptr) {
		ctlErr = unix.EpollCtl(int(epfd), unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
	})
	if err == nil && ctlErr != nil {
		err = os.NewSyscallError("epoll_ctl", ctlErr)
	}
	if err != nil {
		return fmt.Errorf("sampler: watch ring: %w", err)
	}
	return nil
}

// wait returns when a ring is ready, d has passed, or stop was called (then at once).
func (w *ringWaiter) wait(d time.Duration) error {
	if err := w.f.SetReadDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	if w.stopped.Load() { // a stop before the deadline was set
		return nil
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	// A perf fd's readiness is consumed by whoever polls it first, and the runtime's poller
	// polls the epoll set when it reports the set ready: so the set may look empty by the
	// time this goroutine asks. Being woken by the poller is the signal; the first call only
	// looks for a ring that is ready already.
	woken := false
	err = rc.Read(func(epfd uintptr) bool {
		if woken {
			return true
		}
		woken = true
		n, err := unix.EpollWait(int(epfd), w.events, 0)
		return err == nil && n > 0
	})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

// stop ends the current wait and makes every later one return at once.
func (w *ringWaiter) stop() {
	w.stopped.Store(true)
	_ = w.f.SetReadDeadline(time.Unix(1, 0))
}

func (w *ringWaiter) close() { w.f.Close() }
