package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
)

// TestParseFUSEMounts: the FUSE mounts of a mount table (fuse and fuse.TYPE, not fuseblk
// nor any other), with their devices and escaped mount points, and the paths looked up
// through them.
func TestParseFUSEMounts(t *testing.T) {
	const mountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /proc rw,nosuid shared:12 - proc proc rw
40 22 0:45 / /home/u/my\040files rw,nosuid,nodev,relatime shared:30 - fuse.sshfs u@host:/ rw,user_id=1000,group_id=1000,allow_other
41 22 0:46 / /var/lib/lxcfs rw,nosuid,nodev,relatime shared:31 - fuse lxcfs rw,user_id=0,group_id=0,allow_other
42 22 8:17 / /mnt/win rw,relatime shared:32 - fuseblk /dev/sdb1 rw,user_id=0,group_id=0,allow_other
43 22 0:47 / /tmp rw,nosuid,nodev shared:33 - tmpfs tmpfs rw
`
	m := parseFUSEMounts([]byte(mountinfo))
	for dev, want := range map[uint64]bool{unix.Mkdev(0, 45): true, unix.Mkdev(0, 46): true, unix.Mkdev(8, 17): false, unix.Mkdev(0, 47): false, unix.Mkdev(8, 1): false} {
		if m.devs[dev] != want {
			t.Errorf("device %d:%d: FUSE %v, want %v", unix.Major(dev), unix.Minor(dev), m.devs[dev], want)
		}
	}
	for path, want := range map[string]bool{
		"/home/u/my files/bin/app": true, "/home/u/my files": true, "/home/u/my filesx/app": false,
		"/var/lib/lxcfs/proc/cpuinfo": true, "/mnt/win/a.exe": false, "/tmp/perf-1.map": false, "/usr/bin/node": false,
	} {
		if got := m.covers(path); got != want {
			t.Errorf("covers(%q) = %v, want %v", path, got, want)
		}
	}
	if root := parseFUSEMounts([]byte("50 1 0:50 / / rw - fuse.fuse-overlayfs fuse-overlayfs rw\n")); !root.covers("/tmp/perf-1.map") {
		t.Error("a FUSE root does not cover every path")
	}
	if !mayBeFUSE(unix.Mkdev(0, 45)) || mayBeFUSE(unix.Mkdev(8, 1)) {
		t.Error("mayBeFUSE tells FUSE's anonymous devices from disks' wrongly")
	}
}

func TestRootPid(t *testing.T) {
	for root, want := range map[string]struct {
		pid uint32
		ok  bool
	}{"": {0, true}, "/proc/42/root": {42, true}, "/proc/42/root/x": {0, false}, "/srv/root": {0, false}, "/proc/x/root": {0, false}, "/proc/042/root": {0, false}} {
		pid, ok := rootPid(root)
		if ok != want.ok || ok && pid != want.pid {
			t.Errorf("rootPid(%q) = %d, %v, want %d, %v", root, pid, ok, want.pid, want.ok)
		}
	}
}

// FuzzParseFUSEMounts: any mount table parses, and each FUSE mount point found covers itself
// and what is under it.
func FuzzParseFUSEMounts(f *testing.F) {
	f.Add([]byte("40 22 0:45 / /home/u/my\\040files rw shared:30 - fuse.sshfs u@host:/ rw,user_id=1000\n"))
	f.Add([]byte("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n41 22 0:46 / /var/lib/lxcfs rw - fuse lxcfs rw\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := parseFUSEMounts(data)
		for _, p := range m.points {
			if !m.covers(p) || !m.covers(p+"/x") {
				t.Errorf("mount point %q does not cover itself and what is under it", p)
			}
		}
	})
}

// TestRefuseFUSEPaths: a path under a process's root is looked at in that process's
// namespace; there, a path under none of its FUSE mounts passes.
func TestRefuseFUSEPaths(t *testing.T) {
	self := uint32(os.Getpid())
	m, err := readFUSEMounts(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{Root(self) + "/proc/self/status", Root(self), "/proc/self/status", "/proc/1/rootx/y"} {
		if err := RefuseFUSE(path); err != nil && !m.covers("/proc/self/status") {
			t.Errorf("RefuseFUSE(%q) = %v: no FUSE mount covers it", path, err)
		}
	}
	if err := RefuseFUSE(Root(1<<31) + "/tmp/x"); err != nil {
		t.Errorf("a process gone: %v, want nothing refused", err)
	}
}

// TestOwnFUSEMountsFollowChanges: profd's own mount table is read once, and again only
// after it changed: a FUSE mount made since (one whose server never answers: nothing looks
// inside it) is refused at once, and no longer once it is gone.
func TestOwnFUSEMountsFollowChanges(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	dir := t.TempDir()
	if _, err := ownFUSEMounts(); err != nil {
		t.Fatal(err)
	}
	reads := own.reads
	for range 3 {
		ownFUSEMounts()
	}
	if own.reads != reads {
		t.Errorf("the mount table read %d times more, unchanged", own.reads-reads)
	}
	dev, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	defer unix.Close(dev) // ends the connection: nothing waits on it past the test
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", dev)
	if err := unix.Mount("profd-test", dir, "fuse.profdtest", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		t.Skipf("cannot mount a FUSE file system: %v", err)
	}
	mounted := true
	defer func() {
		if mounted {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	}()
	if err := RefuseFUSE(dir + "/perf-1.map"); !errors.Is(err, ErrFUSE) {
		t.Errorf("a path under a FUSE mount made since the table was read: %v, want ErrFUSE", err)
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	mounted = false
	if err := RefuseFUSE(dir + "/perf-1.map"); err != nil {
		t.Errorf("a path under a FUSE mount gone: %v", err)
	}
	ForgetOwnMounts() // a run's end
	for fd, name := range testenv.OpenFDs(t) {
		if name == "/proc/"+strconv.Itoa(os.Getpid())+"/mountinfo" {
			t.Errorf("descriptor %d still open on %s", fd, name)
		}
	}
}
