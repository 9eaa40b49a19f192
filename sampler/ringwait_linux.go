package sampler

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	perf "github.com/elastic/go-perf"
	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/fdwait"
)

// ringWaiter lets the ring reader sleep until a ring passes its wake-up watermark (the
// events are opened with Watermark, so the kernel makes a ring's fd readable when it is
// half full), a timeout passes, or stop is called. The ring fds sit in an epoll set whose
// own fd the runtime's network poller waits on (package fdwait).
type ringWaiter struct {
	w       *fdwait.Waiter // the epoll fd
	events  []unix.EpollEvent
	stopped atomic.Bool
}

func newRingWaiter() (*ringWaiter, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("sampler: ring waiter: %w", os.NewSyscallError("epoll_create1", err))
	}
	w, err := fdwait.New(fd, "ring-epoll")
	if err != nil {
		return nil, fmt.Errorf("sampler: ring waiter: %w", err)
	}
	return &ringWaiter{w: w, events: make([]unix.EpollEvent, 64)}, nil
}

// add watches ev's ring. A closed event leaves the set by itself.
func (r *ringWaiter) add(ev *perf.Event) error {
	fd, err := ev.FD()
	if err != nil {
		return err
	}
	if err := unix.EpollCtl(r.w.Fd(), unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		return fmt.Errorf("sampler: watch ring: %w", os.NewSyscallError("epoll_ctl", err))
	}
	return nil
}

// wait returns when a ring is ready, d has passed, or stop was called (then at once).
func (r *ringWaiter) wait(d time.Duration) error {
	if r.stopped.Load() {
		return nil
	}
	// A perf fd's readiness is consumed by whoever polls it first, and the runtime's poller
	// polls the epoll set when it reports the set ready: so the set may look empty by the
	// time this goroutine asks. Being woken by the poller is the signal; the first call only
	// looks for a ring that is ready already.
	woken := false
	return r.w.Wait(d, func(epfd uintptr) bool {
		if woken {
			return true
		}
		woken = true
		n, err := unix.EpollWait(int(epfd), r.events, 0)
		return err == nil && n > 0
	})
}

// stop ends the current wait and makes every later one return at once.
func (r *ringWaiter) stop() {
	r.stopped.Store(true)
	r.w.Wake()
}

func (r *ringWaiter) close() { r.w.Close() }
