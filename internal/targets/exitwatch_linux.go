package targets

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// exitWatch tells when one process exits without polling /proc: a pidfd (Linux 5.3; the
// non-blocking flag, 5.10) becomes readable when its process has exited, and the runtime's
// network poller waits for that, so the wait costs no thread, no timer and no wake-up.
type exitWatch struct {
	f *os.File
}

// watchExit opens a pidfd for pid. The caller checks afterwards that pid is still the
// process it meant (the pid may have been reused in between).
func watchExit(pid int) (*exitWatch, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("targets: pid %d: %w", pid, os.NewSyscallError("pidfd_open", err))
	}
	// A non-blocking descriptor is registered with the network poller by os.NewFile.
	return &exitWatch{f: os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid))}, nil
}

// wait returns nil once the process has exited, and an error wrapping os.ErrClosed once
// close was called.
func (e *exitWatch) wait() error {
	rc, err := e.f.SyscallConn()
	if err != nil {
		return err
	}
	var pollErr error
	err = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		if err != nil && !errors.Is(err, unix.EINTR) {
			pollErr = os.NewSyscallError("poll", err)
			return true
		}
		return n > 0 // not yet: the poller waits for the pidfd to become readable
	})
	if err != nil {
		return err
	}
	return pollErr
}

// close unblocks wait and releases the pidfd.
func (e *exitWatch) close() { e.f.Close() }
