package fifo

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
)

// privateDir returns a path for a FIFO directory whose parent every user can traverse.
func privateDir(t *testing.T) string {
	t.Helper()
	parent := testenv.ReachableTempDir(t)
	return filepath.Join(parent, "profd")
}

func TestOpenDirMakesPrivateDirWithPidFile(t *testing.T) {
	path := privateDir(t)
	d, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o711 || !st.IsDir() {
		t.Errorf("directory mode %v, want drwx--x--x", st.Mode())
	}
	pid, err := os.ReadFile(filepath.Join(path, "profd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(pid)); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("profd.pid holds %q, want %d", got, os.Getpid())
	}
	p, err := d.createPipe(4242, os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	p.close()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close the directory is still there (or %v)", err)
	}
}

func TestOpenDirRefusesGroupWritableDir(t *testing.T) {
	path := privateDir(t)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o773); err != nil {
		t.Fatal(err)
	}
	_, err := OpenDir(path)
	if !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "writable") {
		t.Fatalf("OpenDir on a mode 0773 directory: %v, want ErrUnsafeDir naming the mode", err)
	}
	if _, err := os.Lstat(filepath.Join(path, "profd.pid")); err == nil {
		t.Error("a pid file was written into the refused directory")
	}
}

func TestOpenDirRefusesWrongOwner(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	path := privateDir(t)
	if err := os.Mkdir(path, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := OpenDir(path)
	if !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "owner uid 65534") {
		t.Fatalf("OpenDir on a directory owned by uid 65534: %v, want ErrUnsafeDir naming the owner", err)
	}
}

func TestOpenDirRefusesSymlink(t *testing.T) {
	path := privateDir(t)
	real := filepath.Join(filepath.Dir(path), "elsewhere")
	if err := os.Mkdir(real, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, path); err != nil {
		t.Fatal(err)
	}
	_, err := OpenDir(path)
	if !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("OpenDir on a symlink: %v, want ErrUnsafeDir", err)
	}
}

func TestOpenDirRefusesDirOfLiveProfd(t *testing.T) {
	path := privateDir(t)
	d, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// A second profd (same program name, another live pid) must not take it over.
	sleeper := exec.Command(os.Args[0], "-test.run=^TestHelperSleep$")
	sleeper.Env = append(os.Environ(), "PROFD_FIFO_SLEEP=1")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	if err := os.WriteFile(filepath.Join(path, "profd.pid"), []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(path); !errors.Is(err, ErrDirInUse) {
		t.Fatalf("OpenDir on a directory a live profd holds: %v, want ErrDirInUse", err)
	}
}

// TestOpenDirRemovesStaleFIFOs: the FIFOs a profd that died left in its directory go when
// the next one opens it; what is not a FIFO of profd's naming stays, and so does a live
// profd's FIFO (OpenDir refuses its directory).
func TestOpenDirRemovesStaleFIFOs(t *testing.T) {
	path := privateDir(t)
	if err := os.Mkdir(path, 0o711); err != nil {
		t.Fatal(err)
	}
	stale := []string{"7810.map", "7810.reply", ".7811.map.new", ".7811.reply.new"}
	kept := []string{"7812.mapx", "x.map", ".7813.map", "notes"}
	for _, name := range stale {
		if err := unix.Mkfifo(filepath.Join(path, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range kept[:len(kept)-1] {
		if err := unix.Mkfifo(filepath.Join(path, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(path, "7814.map"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, "7814.map") // not a FIFO: not profd's to remove
	if err := os.WriteFile(filepath.Join(path, "notes"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, name := range stale {
		if _, err := os.Lstat(filepath.Join(path, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale FIFO %s left (%v)", name, err)
		}
	}
	for _, name := range kept {
		if _, err := os.Lstat(filepath.Join(path, name)); err != nil {
			t.Errorf("%s removed: %v", name, err)
		}
	}
	// The descriptor OpenDir keeps still serves: a FIFO is made through it.
	p, err := d.createPipe(4242, os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	p.close()
}

// TestOpenDirTakesStalePidOfOtherUser: a stale profd.pid whose pid another user's process
// got, named as profd is, does not keep profd out of its directory.
func TestOpenDirTakesStalePidOfOtherUser(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	path := privateDir(t)
	d, err := OpenDir(path)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	os.MkdirAll(path, 0o711)
	// sleep, under this binary's name (its comm), where uid 65534 may run it.
	bin := filepath.Join(t.TempDir(), filepath.Base(os.Args[0]))
	for _, dir := range []string{filepath.Dir(bin), filepath.Dir(filepath.Dir(bin))} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("cp", "/bin/sleep", bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	sleeper := exec.Command(bin, "60")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	self, _ := os.ReadFile("/proc/self/comm")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", sleeper.Process.Pid)); string(comm) == string(self) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the sleeper's comm is %q, want %q", comm, self)
		}
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	if err := os.WriteFile(filepath.Join(path, "profd.pid"), []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err = OpenDir(path)
	if err != nil {
		t.Fatalf("OpenDir with the stale pid of another user's process of the same name: %v", err)
	}
	d.Close()
}

// TestHelperSleep is a process of the test binary's name for TestOpenDirRefusesDirOfLiveProfd.
func TestHelperSleep(t *testing.T) {
	if os.Getenv("PROFD_FIFO_SLEEP") == "" {
		t.Skip("helper process only")
	}
	time.Sleep(time.Minute)
}

func TestCreatePipeRefusesSymlink(t *testing.T) {
	d, err := OpenDir(privateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(d.Path(), "77.map")); err != nil {
		t.Fatal(err)
	}
	_, err = d.createPipe(77, 65534, 65534)
	if !errors.Is(err, ErrNotFIFO) || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("createPipe over a symlink: %v, want ErrNotFIFO naming the symlink", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(victim, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		t.Errorf("the symlink's target was changed: %+v %v", st, err)
	}
}

func TestCreatePipeRefusesRegularFile(t *testing.T) {
	d, err := OpenDir(privateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	planted := filepath.Join(d.Path(), "78.map")
	if err := os.WriteFile(planted, []byte("planted"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = d.createPipe(78, os.Geteuid(), os.Getegid())
	if !errors.Is(err, ErrNotFIFO) || !strings.Contains(err.Error(), "regular file") {
		t.Fatalf("createPipe over a regular file: %v, want ErrNotFIFO naming the regular file", err)
	}
	if b, _ := os.ReadFile(planted); string(b) != "planted" {
		t.Errorf("the planted file changed to %q", b)
	}
}

func TestCreatePipeOwnedByTargetUser(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	d, err := OpenDir(privateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := d.createPipe(79, 65534, 65534)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	var st unix.Stat_t
	if err := unix.Lstat(p.path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Mode&0o7777 != 0o600 || st.Uid != 65534 {
		t.Fatalf("FIFO mode %#o uid %d, want FIFO 0600 owned by 65534", st.Mode, st.Uid)
	}
	// The target's user reaches its FIFO through the 0711 directory and can write to it.
	w := exec.Command("/bin/sh", "-c", `printf 'hello' > "$1"`, "sh", p.path)
	w.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := w.CombinedOutput(); err != nil {
		t.Fatalf("writing the FIFO as uid 65534: %v: %s", err, out)
	}
	buf := make([]byte, 16)
	n, _ := unix.Read(p.fd, buf)
	if string(buf[:n]) != "hello" {
		t.Errorf("read %q from the FIFO, want hello", buf[:n])
	}
	// Another unprivileged user may not open it.
	o := exec.Command("/bin/sh", "-c", `exec 3>"$1"`, "sh", p.path)
	o.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65533, Gid: 65533}}
	if err := o.Run(); err == nil {
		t.Error("uid 65533 opened uid 65534's FIFO")
	}
}

// TestCreatePipeAppearsOwned: a JIT polls for its FIFO and opens it as soon as the name
// appears, so the name may never show a FIFO its user cannot open yet. A watcher stats the
// names while FIFOs are made and removed again and again.
func TestCreatePipeAppearsOwned(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	d, err := OpenDir(privateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const pids = 4
	done := make(chan struct{})
	bad := make(chan string, 1)
	go func() {
		defer close(bad)
		var st unix.Stat_t
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			path := filepath.Join(d.Path(), fifoName(uint32(100+i%pids)))
			if unix.Lstat(path, &st) == nil && (st.Uid != 65534 || st.Mode&0o7777 != 0o600) {
				bad <- fmt.Sprintf("%s appeared with mode %#o uid %d", path, st.Mode&0o7777, st.Uid)
				return
			}
		}
	}()
	for i := 0; i < 20000; i++ {
		p, err := d.createPipe(uint32(100+i%pids), 65534, 65534)
		if err != nil {
			t.Fatal(err)
		}
		p.remove()
	}
	close(done)
	if msg, ok := <-bad; ok {
		t.Error(msg)
	}
	if names, _ := filepath.Glob(filepath.Join(d.Path(), ".*")); len(names) != 0 {
		t.Errorf("temporary names left: %v", names)
	}
}

// TestAddTargetAnewForOtherOwner: a process that exec'd another program keeps its FIFOs
// (the same files) when its user is the same; when it changed users before the exec, its
// FIFOs are made anew for the new user, and the last user can no longer write into them.
func TestAddTargetAnewForOtherOwner(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	s, _, _ := startServer(t, Config{})
	pid := uint32(os.Getpid())
	if err := s.AddTarget(pid, Owner{UID: 65534, GID: 65534}); err != nil {
		t.Fatal(err)
	}
	w := openWriter(t, s.FIFOPath(pid)) // a writer of the first program
	defer w.Close()
	links := func() uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Fstat(int(w.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return st.Nlink
	}
	if err := s.AddTarget(pid, Owner{UID: 65534, GID: 65534}); err != nil || links() != 1 {
		t.Fatalf("added again for the same user: %v, %d links to the FIFO, want it kept", err, links())
	}
	if err := s.AddTarget(pid, Owner{UID: 65533, GID: 65533}); err != nil {
		t.Fatal(err)
	}
	if n := links(); n != 0 {
		t.Errorf("after the user changed, the last user's FIFO has %d links, want it removed", n)
	}
	for _, path := range []string{s.FIFOPath(pid), s.ReplyPath(pid)} {
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 65533 || st.Gid != 65533 {
			t.Errorf("%s: uid %d gid %d after the user changed, want 65533", path, st.Uid, st.Gid)
		}
	}
	o := exec.Command("/bin/sh", "-c", `exec 3>"$1"`, "sh", s.FIFOPath(pid))
	o.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := o.Run(); err == nil {
		t.Error("the last user opened the new user's FIFO")
	}
}
