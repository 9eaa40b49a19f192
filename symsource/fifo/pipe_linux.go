package fifo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/fdwait"
)

// pipeBytes is the capacity profd asks for each FIFO.
const pipeBytes = 1 << 20

// fifoName is the name of a target's FIFO inside the directory.
func fifoName(pid uint32) string { return fmt.Sprintf("%d.map", pid) }

// replyName is the name of a target's reply FIFO inside the directory.
func replyName(pid uint32) string { return fmt.Sprintf("%d.reply", pid) }

// pipe is profd's end of one target's FIFO: the read end of its symbols FIFO, or both ends
// of its reply FIFO (so replies wait in the pipe until the JIT reads them). Its descriptor
// is non-blocking. The read end is waited for on the runtime's network poller (package
// fdwait), so an idle FIFO holds no thread; stop ends the wait.
type pipe struct {
	dir      *Dir
	name     string
	path     string
	access   int // unix.O_RDONLY or unix.O_RDWR
	fd       int
	dev, ino uint64

	// w waits on fd, the read end; nil for a reply FIFO. A reopen replaces it: mu orders
	// that against stop, so a stop wakes the new Waiter or the reader sees stopped first.
	mu      sync.Mutex
	w       *fdwait.Waiter
	stopped atomic.Bool
}

// createPipe makes the symbols FIFO <dir>/<pid>.map owned by uid:gid with mode 0600 and
// opens its read end.
func (d *Dir) createPipe(pid uint32, uid, gid int) (*pipe, error) {
	return d.createFIFO(fifoName(pid), uid, gid, unix.O_RDONLY)
}

// createReplyPipe makes the reply FIFO <dir>/<pid>.reply owned by uid:gid with mode 0600
// and opens it for reading and writing: replies are kept in the pipe until the JIT reads
// them, whether or not it has the FIFO open.
func (d *Dir) createReplyPipe(pid uint32, uid, gid int) (*pipe, error) {
	return d.createFIFO(replyName(pid), uid, gid, unix.O_RDWR)
}

// createFIFO makes the FIFO <dir>/name owned by uid:gid with mode 0600 and opens it with
// access. It never follows a symlink: an existing symlink, regular file or anything but a
// FIFO at that name is refused with ErrNotFIFO; a stale FIFO (from a profd that died) is
// replaced.
func (d *Dir) createFIFO(name string, uid, gid, access int) (*pipe, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	path := filepath.Join(d.path, name)
	var st unix.Stat_t
	switch err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFIFO {
			return nil, fmt.Errorf("fifo: %s: exists as %s: %w", path, fileType(t), ErrNotFIFO)
		}
		if err := unix.Unlinkat(d.fd, name, 0); err != nil {
			return nil, fmt.Errorf("fifo: %s: stale FIFO: %w", path, os.NewSyscallError("unlinkat", err))
		}
	case !errors.Is(err, unix.ENOENT):
		return nil, fmt.Errorf("fifo: %s: %w", path, os.NewSyscallError("fstatat", err))
	}
	// The FIFO is made, opened and given to its user under a temporary name, then renamed
	// into place: a JIT polling for its FIFO never finds one it may not open yet.
	tmp := "." + name + ".new"
	_ = unix.Unlinkat(d.fd, tmp, 0) // left by a profd that died here
	if err := unix.Mkfifoat(d.fd, tmp, 0o600); err != nil {
		return nil, fmt.Errorf("fifo: %s: %w", filepath.Join(d.path, tmp), os.NewSyscallError("mkfifoat", err))
	}
	p := &pipe{dir: d, name: tmp, path: path, access: access, fd: -1}
	fd, err := p.open()
	if err == nil {
		p.fd = fd
		err = owned(fd, path, uid, gid)
	}
	if err == nil && access == unix.O_RDONLY {
		if p.w, err = fdwait.New(fd, path); err != nil {
			p.fd = -1 // closed by New
			err = fmt.Errorf("fifo: %w", err)
		}
	}
	if err == nil {
		// RENAME_NOREPLACE fails with EEXIST on anything at the name, a dangling symlink
		// included; where the file system lacks it, only profd writes in its directory.
		rerr := unix.Renameat2(d.fd, tmp, d.fd, name, unix.RENAME_NOREPLACE)
		if errors.Is(rerr, unix.EINVAL) {
			rerr = unix.Renameat(d.fd, tmp, d.fd, name)
		}
		if errors.Is(rerr, unix.EEXIST) {
			err = fmt.Errorf("fifo: %s: appeared while being created: %w", path, ErrNotFIFO)
		} else if rerr != nil {
			err = fmt.Errorf("fifo: %s: %w", path, os.NewSyscallError("renameat2", rerr))
		}
	}
	if err != nil {
		p.close()
		_ = unix.Unlinkat(d.fd, tmp, 0)
		return nil, err
	}
	p.name = name
	d.created[name] = true
	// A bigger symbols pipe absorbs a JIT's bursts (a batch of compiled functions) while
	// the reader is busy. Best effort: the limit is /proc/sys/fs/pipe-max-size for
	// unprivileged users.
	if access == unix.O_RDONLY {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, pipeBytes)
	}
	return p, nil
}

// owned gives the FIFO open at fd to uid:gid with mode 0600.
func owned(fd int, path string, uid, gid int) error {
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return fmt.Errorf("fifo: %s: owner %d:%d: %w", path, uid, gid, os.NewSyscallError("fchown", err))
	}
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fmt.Errorf("fifo: %s: %w", path, os.NewSyscallError("fchmod", err))
	}
	return nil
}

// open opens the FIFO relative to the directory descriptor without following a symlink,
// and checks it is a FIFO and, after the first open, still the same one.
func (p *pipe) open() (int, error) {
	fd, err := unix.Openat(p.dir.fd, p.name, p.access|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return -1, fmt.Errorf("fifo: %s: a symlink: %w", p.path, ErrNotFIFO)
		}
		return -1, fmt.Errorf("fifo: %s: %w", p.path, os.NewSyscallError("openat", err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("fifo: %s: %w", p.path, os.NewSyscallError("fstat", err))
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFIFO {
		unix.Close(fd)
		return -1, fmt.Errorf("fifo: %s: is %s: %w", p.path, fileType(t), ErrNotFIFO)
	}
	if p.ino != 0 && (st.Dev != p.dev || st.Ino != p.ino) {
		unix.Close(fd)
		return -1, fmt.Errorf("fifo: %s: replaced by another FIFO: %w", p.path, ErrNotFIFO)
	}
	p.dev, p.ino = st.Dev, st.Ino
	return fd, nil
}

// reopen replaces the read end after the last writer closed: a fresh read end reports no
// hang-up until a new writer has come and gone, so the poller sleeps instead of waking on
// EOF again and again. The new end is opened before the old one closes, so bytes a new
// writer already sent stay; it gets a Waiter of its own.
func (p *pipe) reopen() error {
	fd, err := p.open()
	if err != nil {
		return err
	}
	w, err := fdwait.New(fd, p.path)
	if err != nil {
		return fmt.Errorf("fifo: %w", err)
	}
	p.mu.Lock()
	old := p.w
	p.w, p.fd = w, fd
	p.mu.Unlock()
	old.Close()
	return nil
}

// errWoken: stop was called (the target is removed or the Server is closing).
var errWoken = errors.New("woken")

// stop makes the reader's current wait, and every later one, return errWoken.
func (p *pipe) stop() {
	p.stopped.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w != nil {
		p.w.Wake()
	}
}

// wait waits on the runtime's poller, holding no thread, until the read end has bytes or
// its last writer closed, or stop was called (errWoken). Only the reader calls wait, read
// and reopen.
func (p *pipe) wait() error {
	// The reader is the only goroutine that replaces p.w, so it reads it without mu. A stop
	// that woke the Waiter a reopen replaced happened before that reopen took mu: seen here.
	if p.stopped.Load() {
		return errWoken
	}
	if err := p.w.Wait(-1, fdwait.Readable); err != nil {
		return fmt.Errorf("fifo: %s: %w", p.path, err)
	}
	if p.stopped.Load() {
		return errWoken
	}
	return nil
}

// read reads what the read end holds without waiting. It returns n > 0 with data, eof after
// the last writer closed (the pipe has been reopened for the next writer by then), or
// neither when there is nothing to read now.
func (p *pipe) read(buf []byte) (n int, eof bool, err error) {
	for {
		n, err := unix.Read(p.fd, buf)
		switch {
		case err == nil && n > 0:
			return n, false, nil
		case err == nil && n == 0:
			if err := p.reopen(); err != nil {
				return 0, true, err
			}
			return 0, true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return 0, false, nil
		default:
			return 0, false, fmt.Errorf("fifo: %s: %w", p.path, os.NewSyscallError("read", err))
		}
	}
}

// close closes the pipe's descriptor (and its Waiter); the Dir removes the FIFO itself.
func (p *pipe) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.w != nil:
		p.w.Close()
	case p.fd >= 0:
		unix.Close(p.fd)
	}
	p.w, p.fd = nil, -1
}

// remove closes the read end and unlinks the FIFO.
func (p *pipe) remove() {
	p.close()
	d := p.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed && d.created[p.name] {
		_ = unix.Unlinkat(d.fd, p.name, 0)
		delete(d.created, p.name)
	}
}

func fileType(t uint32) string {
	switch t {
	case unix.S_IFLNK:
		return "a symlink"
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	case unix.S_IFIFO:
		return "a FIFO"
	}
	return "an unknown file type"
}
