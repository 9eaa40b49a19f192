package procfs

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The namespace ioctls of linux/nsfs.h (_IO(0xb7, n)); NS_GET_OWNER_UID writes a uid_t
// through its argument.
const (
	nsGetParent   = 0xb702
	nsGetOwnerUID = 0xb704
)

// maxUserNamespaceDepth is how deep the kernel nests user namespaces.
const maxUserNamespaceDepth = 32

// ownUserNamespace is the device and inode of profd's own user namespace.
var ownUserNamespace = sync.OnceValues(func() (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Stat("/proc/self/ns/user", &st)
	return st, err
})

// UserNamespaceOwner tells, for a process in a user namespace below profd's, who made the
// outermost of them (the one whose parent is profd's): its owner, a user of profd's
// namespace. That is the user a rootless container belongs to, whatever ids its
// processes map to (a user may map tens of thousands). It returns false for a process in
// profd's own namespace, and when it cannot tell (the process exited; a kernel before
// 4.11).
func UserNamespaceOwner(pid uint32) (uint32, bool) {
	own, err := ownUserNamespace()
	if err != nil {
		return 0, false
	}
	path := Path(pid, "ns/user")
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Dev == own.Dev && st.Ino == own.Ino {
		return 0, false
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer func() { unix.Close(fd) }()
	for range maxUserNamespaceDepth {
		parent, err := unix.IoctlRetInt(fd, nsGetParent)
		if err != nil {
			return 0, false // EPERM: its parent is no namespace of profd's or below
		}
		err = unix.Fstat(parent, &st)
		if err == nil && st.Dev == own.Dev && st.Ino == own.Ino {
			unix.Close(parent)
			var uid uint32
			if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), nsGetOwnerUID, uintptr(unsafe.Pointer(&uid))); errno != 0 {
				return 0, false
			}
			return uid, true
		}
		unix.Close(fd)
		fd = parent
		if err != nil {
			return 0, false
		}
	}
	return 0, false
}
