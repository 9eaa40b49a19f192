package targets

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// execSocketBytes is the process-event socket's receive buffer: each event's datagram takes
// under a kilobyte of it, so thousands of events fit.
const execSocketBytes = 4 << 20

// execListener receives exec, fork and change-of-user notifications from the kernel's process-events
// connector (needs CAP_NET_ADMIN). Closing it unblocks read.
type execListener struct {
	f   *os.File
	buf []byte
}

func listenExec() (*execListener, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("targets: exec events: %w", os.NewSyscallError("socket", err))
	}
	// Every process event of the machine comes through this socket (forks, execs and exits
	// of every process, not just targets'): a large buffer rides out a storm of them while
	// the watcher checks the processes, rather than losing them (ENOBUFS) and scanning.
	// Raising it past rmem_max needs CAP_NET_ADMIN, which the connector needs anyway.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, execSocketBytes); err != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, execSocketBytes)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("targets: exec events: %w", os.NewSyscallError("bind", err))
	}
	if err := unix.Sendto(fd, listenMessage(), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("targets: exec events: %w", os.NewSyscallError("sendto", err))
	}
	return &execListener{f: os.NewFile(uintptr(fd), "proc-connector"), buf: make([]byte, 1<<16)}, nil
}

// read blocks until a datagram arrives and returns the processes that exec'd, were forked or
// changed user (changedProcesses). After Close it returns an error wrapping os.ErrClosed.
func (l *execListener) read() ([]procChange, error) {
	n, err := l.f.Read(l.buf)
	if err != nil {
		if errors.Is(err, unix.ENOBUFS) {
			return nil, errEventsLost // the kernel dropped events: a scan catches up
		}
		return nil, err
	}
	return changedProcesses(l.buf[:n])
}

func (l *execListener) Close() error { return l.f.Close() }

// errEventsLost: the kernel dropped exec notifications (the socket's buffer was full).
var errEventsLost = errors.New("targets: exec notifications lost")
