package hotspot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/procfs"
)

// ErrNoListener: the JVM has no attach listener and did not start one when signalled: its
// attach mechanism is disabled where profd does not look (a flags file), or it was too busy
// to answer in time.
var ErrNoListener = errors.New("no attach listener")

// ErrNoHandler: the JVM has no attach listener and no handler for SIGQUIT, whose default
// action would kill it, so it is not signalled: one started with -Xrs, or one so young that
// it has not set its handlers yet.
var ErrNoHandler = errors.New("SIGQUIT not caught")

// ErrUserNamespace: the JVM runs in a user namespace of its own (a rootless container),
// where profd's root is nobody: the JVM would refuse its connection, and take the trigger
// file for a stranger's (printing a thread dump at SIGQUIT). It is not asked.
var ErrUserNamespace = errors.New("in a user namespace of its own")

// ErrAttachDisabled: the JVM was started with -XX:+DisableAttachMechanism: it has no attach
// listener, and prints a thread dump at SIGQUIT. It is not signalled.
var ErrAttachDisabled = errors.New("attach mechanism disabled (-XX:+DisableAttachMechanism)")

// ErrRefused: the JVM answered the request with an error (one older than JDK 17 has no
// Compiler.perfmap).
var ErrRefused = errors.New("the JVM refused the request")

const (
	// request is the attach protocol's version 1 command "jcmd" with the diagnostic command
	// as its first argument and the other two empty, each string NUL-terminated.
	request = "1\x00jcmd\x00Compiler.perfmap\x00\x00\x00"
	// replyBytes bounds what is read of a reply: a result code and a line or two.
	replyBytes = 64 << 10
	// listenerPoll is how often the socket is looked for after the signal.
	listenerPoll = 20 * time.Millisecond
)

// IsHotSpot reports whether process pid runs HotSpot (isHotSpot).
func IsHotSpot(pid uint32) (bool, error) {
	maps, err := procfs.ReadMaps(pid)
	if err != nil && !errors.Is(err, procfs.ErrTooLarge) {
		return false, err
	}
	return isHotSpot(maps), nil
}

// attachment is what one request needs of the JVM: its /tmp, through its root, and who it
// is.
type attachment struct {
	pid    uint32 // in profd's pid namespace
	ownPid uint32 // in the JVM's: its socket's and trigger file's names
	uid    int    // the JVM's effective user
	start  uint64 // its start time, so that a reused pid is never signalled
	tmp    int    // O_PATH of its /tmp
}

// WritePerfMap asks the JVM of process pid to write its perf map, /tmp/perf-PID.map in its
// mount namespace (PID its own pid), as `jcmd PID Compiler.perfmap` does: through the
// socket of its attach listener, which it is signalled to start when it has none (once:
// signalled reports whether it was), and only when mayStart. It returns when the JVM has
// written the map, or when ctx is done. pid must be a HotSpot JVM (IsHotSpot): another
// process that catches SIGQUIT may do anything with it; and one that has run a while: a JVM
// signalled in the midst of its start may start its listener and remove its socket.
//
// Every path is looked up inside the JVM's root without following symlinks, and the
// socket's peer must be the process itself, so neither a symlink nor a socket another
// process made can lead the request elsewhere.
func WritePerfMap(ctx context.Context, pid uint32, mayStart bool) (signalled bool, err error) {
	a, err := open(pid)
	if err != nil {
		return false, err
	}
	defer unix.Close(a.tmp)
	conn, err := a.connect()
	if errors.Is(err, unix.ENOENT) && mayStart {
		signalled, err = a.startListener(ctx)
		if err == nil {
			conn, err = a.connect()
		}
	}
	if err != nil {
		return signalled, err
	}
	defer conn.Close()
	return signalled, a.ask(ctx, conn)
}

// open finds the JVM's /tmp and who it is.
func open(pid uint32) (*attachment, error) {
	st, err := procfs.ReadStatus(pid)
	if err != nil {
		return nil, err
	}
	start, err := procfs.StartTicks(pid)
	if err != nil {
		return nil, err
	}
	own, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		return nil, err
	}
	if theirs, err := os.Readlink(procfs.Path(pid, "ns/user")); err != nil {
		return nil, err
	} else if theirs != own {
		return nil, fmt.Errorf("hotspot: pid %d: %w", pid, ErrUserNamespace)
	}
	if err := procfs.RefuseFUSE(procfs.Root(pid) + "/tmp"); err != nil {
		return nil, fmt.Errorf("hotspot: pid %d: its /tmp: %w", pid, err) // its socket and trigger file are there
	}
	root, err := unix.Open(procfs.Root(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hotspot: pid %d: its root: %w", pid, os.NewSyscallError("open", err))
	}
	defer unix.Close(root)
	tmp, err := unix.Openat2(root, "tmp", &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil, fmt.Errorf("hotspot: pid %d: its /tmp: %w", pid, os.NewSyscallError("openat2", err))
	}
	return &attachment{pid: pid, ownPid: st.OwnPid(), uid: st.UID, start: start, tmp: tmp}, nil
}

// socketName is the name of the JVM's attach socket in its /tmp.
func (a *attachment) socketName() string {
	return ".java_pid" + strconv.FormatUint(uint64(a.ownPid), 10)
}

// triggerName is the name of the file in its /tmp that makes the JVM start its listener at
// SIGQUIT.
func (a *attachment) triggerName() string {
	return ".attach_pid" + strconv.FormatUint(uint64(a.ownPid), 10)
}

// connect connects to the JVM's attach socket: a socket of the JVM's user (or root) in its
// /tmp, whose listener is the JVM itself. An error wrapping unix.ENOENT says there is none.
func (a *attachment) connect() (*os.File, error) {
	path, err := unix.Openat(a.tmp, a.socketName(), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hotspot: pid %d: /tmp/%s: %w", a.pid, a.socketName(), os.NewSyscallError("open", err))
	}
	defer unix.Close(path)
	var st unix.Stat_t
	if err := unix.Fstat(path, &st); err != nil {
		return nil, fmt.Errorf("hotspot: pid %d: %w", a.pid, os.NewSyscallError("fstat", err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || (st.Uid != uint32(a.uid) && st.Uid != 0) {
		return nil, fmt.Errorf("hotspot: pid %d: /tmp/%s is not a socket of the JVM's user (mode %#o, owner %d)", a.pid, a.socketName(), st.Mode, st.Uid)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	// The O_PATH descriptor's magic link names the very socket file found above.
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: "/proc/self/fd/" + strconv.Itoa(path)}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("hotspot: pid %d: /tmp/%s: %w", a.pid, a.socketName(), os.NewSyscallError("connect", err))
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil || cred.Pid != int32(a.pid) {
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("hotspot: pid %d: %w", a.pid, os.NewSyscallError("getsockopt", err))
		}
		return nil, fmt.Errorf("hotspot: pid %d: /tmp/%s is served by pid %d, not the JVM", a.pid, a.socketName(), cred.Pid)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(fd), "hotspot:"+a.socketName()), nil
}

// startListener makes the trigger file the JVM looks for and sends it SIGQUIT, then waits
// for its socket while the JVM runs. It reports whether the signal was sent.
func (a *attachment) startListener(ctx context.Context) (bool, error) {
	made := true
	trigger, err := unix.Openat(a.tmp, a.triggerName(), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	switch {
	case errors.Is(err, unix.EEXIST):
		made = false // another attacher's, in its midst: it is theirs to remove
	case err != nil:
		return false, fmt.Errorf("hotspot: pid %d: /tmp/%s: %w", a.pid, a.triggerName(), os.NewSyscallError("open", err))
	default:
		unix.Close(trigger)
	}
	if made {
		defer unix.Unlinkat(a.tmp, a.triggerName(), 0)
	}
	if err := a.signal(); err != nil {
		return false, err
	}
	tick := time.NewTicker(listenerPoll)
	defer tick.Stop()
	for {
		var st unix.Stat_t
		if err := unix.Fstatat(a.tmp, a.socketName(), &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			return true, nil
		}
		if start, err := procfs.StartTicks(a.pid); err != nil || start != a.start {
			return true, fmt.Errorf("hotspot: pid %d: exited after SIGQUIT", a.pid)
		}
		select {
		case <-ctx.Done():
			return true, fmt.Errorf("hotspot: pid %d: no /tmp/%s after SIGQUIT: %w", a.pid, a.socketName(), ErrNoListener)
		case <-tick.C:
		}
	}
}

// signal sends SIGQUIT to the JVM, through a pidfd opened while its start time is the one
// read, and only while it catches the signal and its options do not disable its attach
// mechanism.
func (a *attachment) signal() error {
	pidfd, err := unix.PidfdOpen(int(a.pid), 0)
	if err != nil {
		return fmt.Errorf("hotspot: pid %d: %w", a.pid, os.NewSyscallError("pidfd_open", err))
	}
	defer unix.Close(pidfd)
	if start, err := procfs.StartTicks(a.pid); err != nil || start != a.start {
		return fmt.Errorf("hotspot: pid %d: exited", a.pid)
	}
	if st, err := procfs.ReadStatus(a.pid); err != nil || !st.Catches(int(unix.SIGQUIT)) {
		return fmt.Errorf("hotspot: pid %d: not signalled, it would die of it: %w", a.pid, ErrNoHandler)
	}
	if attachDisabled(a.pid) {
		return fmt.Errorf("hotspot: pid %d: not signalled: %w", a.pid, ErrAttachDisabled)
	}
	if err := unix.PidfdSendSignal(pidfd, unix.SIGQUIT, nil, 0); err != nil {
		return fmt.Errorf("hotspot: pid %d: %w", a.pid, os.NewSyscallError("pidfd_send_signal", err))
	}
	return nil
}

// ask sends the request on conn and reads the reply: a result code on its own line, then
// the command's output.
func (a *attachment) ask(ctx context.Context, conn *os.File) error {
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := io.WriteString(conn, request); err != nil {
		return fmt.Errorf("hotspot: pid %d: sending the request: %w", a.pid, err)
	}
	reply, err := io.ReadAll(io.LimitReader(conn, replyBytes))
	if err != nil {
		return fmt.Errorf("hotspot: pid %d: reading the reply: %w", a.pid, err)
	}
	return checkReply(a.pid, reply)
}

// checkReply reads a reply: "0" on its first line is success; any other code is an error
// that quotes the output's first line.
func checkReply(pid uint32, reply []byte) error {
	code, rest, _ := bytes.Cut(reply, []byte("\n"))
	if string(bytes.TrimSpace(code)) == "0" {
		return nil
	}
	first, _, _ := bytes.Cut(rest, []byte("\n"))
	return fmt.Errorf("hotspot: pid %d: result %q: %s: %w", pid, truncate(code, 16), truncate(bytes.TrimSpace(first), 200), ErrRefused)
}

// truncate is at most n bytes of b as valid UTF-8, "..." marking a cut.
func truncate(b []byte, n int) string {
	cut := len(b) > n
	if cut {
		b = b[:n]
	}
	s := strings.ToValidUTF8(string(b), "?")
	if cut {
		s += "..."
	}
	return s
}
