package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrFUSE: the file is on a FUSE file system. Its server is a process like any other, which
// any user may run (in a user namespace of their own, without privilege), and a request it
// takes and leaves unanswered holds the thread that made it, an open for good, past
// SIGKILL: profd could then neither flush nor exit. profd opens no such file.
var ErrFUSE = errors.New("procfs: on a FUSE file system, whose server may never answer: not opened")

// maxMountinfoBytes bounds what is read of a process's mount table: a host's with
// thousands of mounts (containers, snaps) is a few hundred kilobytes.
const maxMountinfoBytes = 16 << 20

// fuseMounts are the FUSE mounts of a mount namespace: their devices and mount points.
type fuseMounts struct {
	devs   map[uint64]bool
	points []string
}

// readFUSEMounts reads the FUSE mounts of pid's mount namespace (pid 0: profd's own) from
// its mountinfo.
func readFUSEMounts(pid uint32) (fuseMounts, error) {
	if pid == 0 {
		return ownFUSEMounts()
	}
	data, err := readBounded(Path(pid, "mountinfo"), maxMountinfoBytes)
	if err != nil {
		return fuseMounts{}, err
	}
	return parseFUSEMounts(data), nil
}

// own holds the FUSE mounts of profd's own mount namespace, where every file of a process
// gone is looked up (at its path, as profd sees it): read again only when the kernel marks
// the namespace's mount table changed, which it tells an open mountinfo by poll's POLLPRI
// (proc(5)), so that a storm of short processes does not read and parse the table once
// each, and no change is missed.
var own struct {
	sync.Mutex
	fd     int // the open /proc/self/mountinfo, when open
	open   bool
	mounts fuseMounts
	reads  int // tables read: for tests
}

func ownFUSEMounts() (fuseMounts, error) {
	const path = "/proc/self/mountinfo"
	own.Lock()
	defer own.Unlock()
	if !own.open {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fuseMounts{}, &os.PathError{Op: "open", Path: path, Err: err}
		}
		own.fd, own.open = fd, true
	} else if !mountsChanged(own.fd) {
		return own.mounts, nil
	}
	// The first read after the open, or after poll told of a change (telling of it once):
	// a change while it reads is told at the next call.
	var data []byte
	_, err := unix.Seek(own.fd, 0, io.SeekStart)
	if err != nil {
		err = &os.PathError{Op: "seek", Path: path, Err: err}
	} else {
		data, err = readFD(own.fd, path, maxMountinfoBytes)
	}
	if err != nil {
		unix.Close(own.fd) // opened and read whole again next time
		own.open = false
		return fuseMounts{}, err
	}
	own.mounts, own.reads = parseFUSEMounts(data), own.reads+1
	return own.mounts, nil
}

// ForgetOwnMounts closes profd's mount table, which the FUSE checks keep open, so that a
// run's end leaves no descriptor behind; the next check opens it again.
func ForgetOwnMounts() {
	own.Lock()
	defer own.Unlock()
	if own.open {
		unix.Close(own.fd)
		own.open = false
	}
}

// mountsChanged reports whether the mount table open as fd changed since poll last looked
// (or since it was opened); where poll fails, it says so.
func mountsChanged(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
	n, err := unix.Poll(fds, 0)
	for err == unix.EINTR {
		n, err = unix.Poll(fds, 0)
	}
	return err != nil || n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0
}

// parseFUSEMounts takes the FUSE mounts out of a mountinfo file (proc(5)): "ID PARENT
// MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS" a line.
// fuseblk (a block device's file system served by FUSE, which takes privilege to mount) is
// not counted.
func parseFUSEMounts(data []byte) fuseMounts {
	var m fuseMounts
	for line := range bytes.Lines(data) {
		fields := strings.Fields(string(line))
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+1 >= len(fields) {
			continue
		}
		if fstype := fields[sep+1]; fstype != "fuse" && !strings.HasPrefix(fstype, "fuse.") {
			continue
		}
		major, minor, ok := strings.Cut(fields[2], ":")
		maj, err1 := strconv.ParseUint(major, 10, 32)
		mnr, err2 := strconv.ParseUint(minor, 10, 32)
		if ok && err1 == nil && err2 == nil {
			if m.devs == nil {
				m.devs = map[uint64]bool{}
			}
			m.devs[unix.Mkdev(uint32(maj), uint32(mnr))] = true
		}
		m.points = append(m.points, unescapeMountPath(fields[4]))
	}
	return m
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a blank, \011, \012, \134).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// covers reports whether looking path up (absolute, in the mount namespace, no symbolic link
// followed) passes through a FUSE mount: one of them is mounted at path or above it.
func (m fuseMounts) covers(path string) bool {
	for _, p := range m.points {
		if p == "/" || path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// mayBeFUSE reports whether a file on device dev may be on a FUSE file system: FUSE's
// devices are anonymous ones, of major number 0, as tmpfs's, overlayfs's and NFS's are; a
// disk's file system never is.
func mayBeFUSE(dev uint64) bool { return unix.Major(dev) == 0 }

// refuseFUSE refuses (ErrFUSE) the file that pid (0: profd itself) maps or names as path, on
// device dev (0: unknown), when it is on a FUSE mount of pid's mount namespace. Where that
// table cannot be read (the process is gone), nothing is refused.
func refuseFUSE(pid uint32, dev uint64, path string) error {
	if dev != 0 && !mayBeFUSE(dev) {
		return nil
	}
	m, err := readFUSEMounts(pid)
	switch {
	case err != nil:
		// The process is gone, or going: its files are opened through what profd held of it
		// (its root), and FUSE allows no other user's process (root's included) into a
		// mount of a user's own unless it was mounted allow_other.
		return nil
	case dev != 0 && m.devs[dev]:
		return fmt.Errorf("procfs: %s: %w", path, ErrFUSE)
	case dev == 0 && m.covers(path):
		return fmt.Errorf("procfs: %s: %w", path, ErrFUSE)
	}
	return nil
}

// rootPid is the process whose root directory root is, as Root makes it (0 and true for
// "", profd's own); false for another directory.
func rootPid(root string) (uint32, bool) {
	if root == "" {
		return 0, true
	}
	s, ok := strings.CutPrefix(root, "/proc/")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "/root")
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), ok && err == nil && Root(uint32(n)) == root
}

// RefuseFUSE refuses (ErrFUSE) path as profd sees it when looking it up would pass through a
// FUSE mount; nil otherwise, and where the mount table cannot be read. A path under a
// process's root (Root(pid) + "/tmp/perf-1.map") is looked at in the process's mount
// namespace, another in profd's own. Where a symbolic link on the way leads is not told.
func RefuseFUSE(path string) error {
	if s, ok := strings.CutPrefix(path, "/proc/"); ok {
		digits, rest, _ := strings.Cut(s, "/")
		if rest == "root" || strings.HasPrefix(rest, "root/") {
			if pid, ok := rootPid("/proc/" + digits + "/root"); ok {
				return refuseFUSE(pid, 0, "/"+strings.TrimPrefix(strings.TrimPrefix(rest, "root"), "/"))
			}
		}
	}
	return refuseFUSE(0, 0, path)
}

// RefuseFUSEFile refuses (ErrFUSE) the file pid maps (or names) as path, on device dev (0:
// unknown), when it is on a FUSE mount of pid's mount namespace (pid 0: profd's own); nil
// otherwise, and where that table cannot be read (the process is gone).
func RefuseFUSEFile(pid uint32, dev uint64, path string) error { return refuseFUSE(pid, dev, path) }
