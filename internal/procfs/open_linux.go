package procfs

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Errors of OpenFile and OpenMapped besides the system's, which come as *os.SyscallError.
var (
	ErrNotRegular  = errors.New("procfs: not a regular file")
	ErrNotReadable = errors.New("procfs: the process's user may not read the file")
	ErrReplaced    = errors.New("procfs: not the file the process maps")
)

// Cred is whom profd reads a file for when a process names it: the process's effective
// user and groups. The zero Cred is root's.
type Cred struct {
	UID    int   // -1: unknown, who may read nothing
	Groups []int // its effective group and its supplementary groups
}

// everyoneUID is Everyone's UID.
const everyoneUID = -2

// Everyone stands for every user at once: it may read a file whose mode lets others read
// it, as what is read for one process is shared with every user's.
var Everyone = Cred{UID: everyoneUID}

// MayRead reports whether c's user may read a file of status st, by its mode bits: profd
// reads as root, and must not put into the outputs a process's user reads anything of a
// file that user could not read.
func (c Cred) MayRead(st *unix.Stat_t) bool {
	switch {
	case c.UID == 0:
		return true
	case c.UID == everyoneUID:
		return st.Mode&0o004 != 0
	case c.UID < 0:
		return false
	case st.Uid == uint32(c.UID):
		return st.Mode&0o400 != 0
	case slices.Contains(c.Groups, int(st.Gid)):
		return st.Mode&0o040 != 0
	}
	return st.Mode&0o004 != 0
}

// AsUser calls open on an OS thread of its own whose file-system user and groups are c's
// (setfsuid, setfsgid and setgroups change that thread alone), so that the kernel checks
// the file open opens, and every directory on its way, with c's rights and not profd's. The
// thread is not given back to the runtime: it ends with the call. Root's Cred calls open as
// it is; one without a user or groups opens nothing (ErrNotReadable). Groups[0] is the
// file-system group.
func (c Cred) AsUser(open func() (int, error)) (int, error) {
	switch {
	case c.UID == 0:
		return open()
	case c.UID < 0 || len(c.Groups) == 0:
		return -1, ErrNotReadable
	}
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread keeps c's rights, and ends here
		if err := c.become(); err != nil {
			done <- result{-1, err}
			return
		}
		fd, err := open()
		done <- result{fd, err}
	}()
	r := <-done
	return r.fd, r.err
}

// become gives the calling thread c's file-system user and groups, and checks that it has
// them (setfsuid and setfsgid report no failure).
func (c Cred) become() error {
	if err := unix.Setgroups(c.Groups); err != nil {
		return fmt.Errorf("procfs: %w", os.NewSyscallError("setgroups", err))
	}
	unix.SetfsgidRetGid(c.Groups[0])
	unix.SetfsuidRetUid(c.UID)
	gid, _ := unix.SetfsgidRetGid(-1) // an invalid id changes nothing, and returns the current one
	uid, _ := unix.SetfsuidRetUid(-1)
	if uid != c.UID || gid != c.Groups[0] {
		return fmt.Errorf("procfs: file-system user %d group %d, want %d and %d: %w", uid, gid, c.UID, c.Groups[0], ErrNotReadable)
	}
	return nil
}

// Want is what OpenFile asks of a file besides being a regular one.
type Want struct {
	ID       FileID // this file and no other (ErrReplaced); zero: any
	Reader   *Cred  // a file this user may read (ErrNotReadable); nil: any
	MaxBytes int64  // at most this many bytes (ErrTooLarge), for a file read whole; 0: any
}

// openFlags open a file a process controls for reading: non-blocking, so that a FIFO or a
// device put where a file was expected cannot hang profd in open(2).
const openFlags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC

// maxOpenTries bounds the opens of one file that an interruption or a race makes fail.
const maxOpenTries = 8

// OpenFile opens path, which a process names and may have made hostile, for reading as the
// process sees it from root (its /proc/PID/root, or a directory standing for it; "" is
// profd's own /): symbolic links are resolved inside root, magic links (/proc/PID/fd/N)
// refused. It does not block, and refuses anything but a regular file (ErrNotRegular) and
// a file want does not accept. Under a process's root (Root(pid)) or profd's own, a path
// through one of its FUSE mounts is refused (ErrFUSE); one that a symbolic link leads into
// is not told.
func OpenFile(root, path string, want Want) (*os.File, error) {
	name := root + path
	if pid, ok := rootPid(root); ok {
		if err := refuseFUSE(pid, 0, path); err != nil {
			return nil, fmt.Errorf("procfs: %s: %w", name, ErrFUSE)
		}
	}
	if root == "" {
		root = "/"
	}
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("procfs: %s: %w", root, os.NewSyscallError("open", err))
	}
	defer unix.Close(dir)
	how := unix.OpenHow{Flags: openFlags, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(dir, strings.TrimPrefix(path, "/"), &how)
	// EAGAIN: a rename in the root raced the lookup. A process renaming in a loop gets its
	// file refused, not profd held in the loop.
	for tries := 1; (err == unix.EINTR || err == unix.EAGAIN) && tries < maxOpenTries; tries++ {
		fd, err = unix.Openat2(dir, strings.TrimPrefix(path, "/"), &how)
	}
	if err != nil {
		return nil, fmt.Errorf("procfs: %s: %w", name, os.NewSyscallError("openat2", err))
	}
	return checked(fd, name, want)
}

// OpenMapped opens the file pid maps from start to end, which pid names path (in its mount
// namespace) and /proc/PID/maps identifies as id, for reading: through
// /proc/PID/map_files/START-END, which reaches the file as mapped even when it has been
// deleted or replaced; else (the mapping was split or unmapped since, or profd may not use
// map_files) by path through pid's root, refused (ErrReplaced) unless it is file id: the
// process may have moved a FIFO or another user's file over the path. It does not block,
// and refuses anything but a regular file (ErrNotRegular): a mapped device, say; nor a
// file on one of pid's FUSE mounts (ErrFUSE).
func OpenMapped(pid uint32, start, end uint64, path string, id FileID) (*os.File, error) {
	if err := refuseFUSE(pid, id.Dev, path); err != nil {
		return nil, err
	}
	mapped := MappedPath(pid, start, end)
	fd, err := unix.Open(mapped, openFlags, 0)
	for tries := 1; err == unix.EINTR && tries < maxOpenTries; tries++ {
		fd, err = unix.Open(mapped, openFlags, 0)
	}
	if err == nil {
		return checked(fd, mapped, Want{})
	}
	if id == (FileID{}) {
		return nil, fmt.Errorf("procfs: %s: %w, and %s cannot be told to be the file mapped: %w",
			mapped, os.NewSyscallError("open", err), path, ErrReplaced)
	}
	return OpenFile(Root(pid), path, Want{ID: id})
}

// MappedELF reports whether the file pid maps from start to end (named and identified as
// for OpenMapped) is an ELF image: whether it begins with ELF's magic number. A program run
// from a memfd (fexecve) or a file of /dev/shm is mapped under a name JIT memory takes too.
func MappedELF(pid uint32, start, end uint64, path string, id FileID) (bool, error) {
	f, err := OpenMapped(pid, start, end, path, id)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var magic [len(elf.ELFMAG)]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, fmt.Errorf("procfs: %s: %w", f.Name(), err)
	}
	return string(magic[:]) == elf.ELFMAG, nil
}

// MappedPath is /proc/PID/map_files/START-END: the file pid maps from start to end, while it
// does.
func MappedPath(pid uint32, start, end uint64) string {
	return Path(pid, fmt.Sprintf("map_files/%x-%x", start, end))
}

// checked refuses fd, a file opened by openFlags as name, unless it is a regular file that
// want accepts (fd is then closed), or returns it as an *os.File.
func checked(fd int, name string, want Want) (*os.File, error) {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	switch {
	case err != nil:
		err = fmt.Errorf("procfs: %s: %w", name, os.NewSyscallError("fstat", err))
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("procfs: %s: type %#o: %w", name, st.Mode&unix.S_IFMT, ErrNotRegular)
	case want.ID != (FileID{}) && (uint64(st.Dev) != want.ID.Dev || st.Ino != want.ID.Ino):
		err = fmt.Errorf("procfs: %s: device %#x inode %d, mapped %#x inode %d: %w",
			name, st.Dev, st.Ino, want.ID.Dev, want.ID.Ino, ErrReplaced)
	case want.Reader != nil && !want.Reader.MayRead(&st):
		err = fmt.Errorf("procfs: %s: owner uid %d, mode %#o, the process's uid %d: %w",
			name, st.Uid, st.Mode&0o777, want.Reader.UID, ErrNotReadable)
	case want.MaxBytes > 0 && st.Size > want.MaxBytes:
		err = fmt.Errorf("procfs: %s: %d bytes: %w (%d bytes)", name, st.Size, ErrTooLarge, want.MaxBytes)
	}
	if err == nil {
		// A regular file's reads do not heed O_NONBLOCK; without it, os.NewFile does not offer
		// the file to the runtime's poller, which would refuse it.
		err = unix.SetNonblock(fd, false)
		if err != nil {
			err = fmt.Errorf("procfs: %s: %w", name, os.NewSyscallError("fcntl", err))
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
