package targets

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/fdwait"
)

// exitWatch tells when one process exits without polling /proc: a pidfd (Linux 5.3; the
// non-blocking flag, 5.10) becomes readable when its process has exited, and the runtime's
// poller waits for that (package fdwait), so the wait costs no thread, no timer and no
// wake-up.
type exitWatch struct {
	w *fdwait.Waiter
}

// watchExit opens a pidfd for pid. The caller checks afterwards that pid is still the
// process it meant (the pid may have been reused in between).
func watchExit(pid uint32) (*exitWatch, error) {
	fd, err := unix.PidfdOpen(int(pid), unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("targets: pid %d: %w", pid, os.NewSyscallError("pidfd_open", err))
	}
	w, err := fdwait.New(fd, "pidfd:"+strconv.FormatUint(uint64(pid), 10))
	if err != nil {
		return nil, fmt.Errorf("targets: pid %d: %w", pid, err)
	}
	return &exitWatch{w: w}, nil
}

// wait returns nil once the process has exited, and an error wrapping os.ErrClosed once
// close was called.
func (e *exitWatch) wait() error { return e.w.Wait(-1, fdwait.Readable) }

// close unblocks wait and releases the pidfd.
func (e *exitWatch) close() { e.w.Close() }
