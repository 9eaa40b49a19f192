package files

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// eventWaiter waits for the Tailer's inotify descriptor in poll(2), with an eventfd beside
// it for wake-ups: not through the Go runtime's network poller, which would wake at every
// event the kernel queues (a program making files in /tmp as fast as it can makes tens of
// thousands a second) even while the Tailer sleeps between batches. The waiting goroutine
// holds a thread while it waits.
type eventWaiter struct {
	fd, wakeFd int
}

func newEventWaiter() (*eventWaiter, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("files: %w", os.NewSyscallError("inotify_init1", err))
	}
	wakeFd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("files: %w", os.NewSyscallError("eventfd", err))
	}
	return &eventWaiter{fd: fd, wakeFd: wakeFd}, nil
}

// Fd is the inotify descriptor, non-blocking.
func (w *eventWaiter) Fd() int { return w.fd }

// Wait returns when the inotify descriptor has events (events), when Wake was called since
// the last Wait returned, or when timeout passes (timeout < 0: never).
func (w *eventWaiter) Wait(timeout time.Duration) (events bool, err error) {
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(w.wakeFd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("files: %w", os.NewSyscallError("poll", err))
		}
		if fds[1].Revents != 0 {
			var b [8]byte
			_, _ = unix.Read(w.wakeFd, b[:])
		}
		return fds[0].Revents != 0, nil
	}
}

// Wake makes the current Wait return, or the next one at once.
func (w *eventWaiter) Wake() {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	_, _ = unix.Write(w.wakeFd, b[:])
}

// Close closes both descriptors; call it once nothing waits.
func (w *eventWaiter) Close() {
	unix.Close(w.fd)
	unix.Close(w.wakeFd)
}
