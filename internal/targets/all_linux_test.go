package targets

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"golang.org/x/sys/unix"
)

// startSleepAs starts sleep 30 as uid (and gid uid); the test's cleanup kills it.
func startSleepAs(t *testing.T, uid uint32) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// startUIDChanger starts, as root, a process that sets its real uid to what setUID says
// (its effective uid stays root, so it can go back), without an exec; the test's cleanup
// kills it.
func startUIDChanger(t *testing.T) (pid int, setUID func(uid int)) {
	t.Helper()
	perl := testenv.StartPiped(t, "perl", "-e", `$| = 1; while (<STDIN>) { chomp; $< = $_; print "uid $<\n" }`)
	lines := bufio.NewScanner(perl.Out)
	return perl.Cmd.Process.Pid, func(uid int) {
		t.Helper()
		fmt.Fprintln(perl.In, uid)
		if want := fmt.Sprint("uid ", uid); !lines.Scan() || lines.Text() != want {
			t.Fatalf("perl did not change its real uid to %d: %q", uid, lines.Text())
		}
	}
}

// startAll starts a watcher of every process f admits, reporting to h; it is closed as the
// test ends.
func startAll(t *testing.T, f Filter, h Handler) *Watcher {
	t.Helper()
	return startWatcher(t, Config{All: true, Filter: f}, h)
}

// startWatcher starts a watcher of cfg, reporting to h; it is closed as the test ends.
func startWatcher(t *testing.T, cfg Config, h Handler) *Watcher {
	t.Helper()
	w, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	t.Cleanup(w.Close)
	return w
}

// With All and a uid filter, a process of that real uid started before and one after
// the watcher are targets; root's processes, kernel threads and the watcher's own process
// are not.
func TestAllByUID(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	before := startSleepAs(t, 65534)
	rootSleep := testenv.Sleeper(t)
	var r recorder
	w := startAll(t, Filter{UIDs: []uint32{65534}}, r.handler())
	eventually(t, "nobody's earlier sleep", func() bool { return r.has(&r.added, before.Process.Pid) })
	after := startSleepAs(t, 65534)
	eventually(t, "nobody's later sleep", func() bool { return r.has(&r.added, after.Process.Pid) })
	got := w.Targets()
	for _, pid := range []int{rootSleep.Process.Pid, os.Getpid(), 2} { // 2: kthreadd
		if slices.Contains(got, uint32(pid)) {
			t.Errorf("Targets() = %v holds pid %d", got, pid)
		}
	}
}

// With All, every process is a target but kernel threads, the watcher's own and those
// running an excluded image; a target that execs an excluded image leaves the targets
// (reported as removed while it still runs).
func TestAllExcludeImage(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	sleep := testenv.Sleeper(t)
	sh := exec.Command("sh", "-c", "sleep 0.3; exec sleep 30")
	var r recorder
	w, err := New(Config{All: true, Filter: Filter{ExcludeImages: []string{"sleep"}}}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	defer w.Close()
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	eventually(t, "the shell", func() bool { return r.has(&r.added, sh.Process.Pid) })
	eventually(t, "the shell, exec'd into sleep, to go", func() bool { return r.has(&r.removed, sh.Process.Pid) })
	if r.has(&r.added, sleep.Process.Pid) {
		t.Errorf("sleep %d, an excluded image, was added", sleep.Process.Pid)
	}
	if err := sh.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the shell's process exited: %v", err)
	}
	got := w.Targets()
	if slices.Contains(got, uint32(os.Getpid())) || slices.Contains(got, 2) {
		t.Errorf("Targets() holds profd's own process or kthreadd: %v", got)
	}
	if len(got) < 2 {
		t.Errorf("Targets() = %v: with All, every other process of the host is one", got)
	}
}

// A --cgroup that does not exist is refused by New.
func TestAllMissingCgroup(t *testing.T) {
	_, err := New(Config{All: true, Filter: Filter{Cgroups: []string{"/profd-test-no-such-cgroup"}}}, Handler{})
	if !errors.Is(err, ErrNoCgroup) {
		t.Fatalf("New with a missing cgroup: %v, want ErrNoCgroup", err)
	}
}

func TestResolveCgroup(t *testing.T) {
	mount := t.TempDir()
	if err := os.MkdirAll(filepath.Join(mount, "system.slice", "a.service"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"/system.slice/a.service", mount + "/system.slice/a.service/", "/system.slice//a.service"} {
		c, err := resolveCgroup(mount, arg)
		if err != nil || c.rel != "/system.slice/a.service" {
			t.Errorf("resolveCgroup(%q) = %+v, %v; want /system.slice/a.service", arg, c, err)
		}
		if !c.under("/system.slice/a.service") || !c.under("/system.slice/a.service/x") || c.under("/system.slice/a.serviceX") {
			t.Errorf("%q: under matches the wrong paths", arg)
		}
	}
	if c, err := resolveCgroup(mount, mount); err != nil || !c.under("/anything") {
		t.Errorf("the mount itself: %+v, %v; want the root, which holds every process", c, err)
	}
	for _, arg := range []string{"/system.slice/b.service", "system.slice", "/sys/fs/cgroup/cpu/x"} {
		if _, err := resolveCgroup(mount, arg); err == nil {
			t.Errorf("resolveCgroup(%q) accepted it", arg)
		}
	}
}

func TestCheckContainer(t *testing.T) {
	for id, ok := range map[string]bool{"0123456789ab": true, "0123456789AB": true, "0123456789a": false,
		"0123456789abcdefg": false, string(make([]byte, 65)): false} {
		if err := CheckContainer(id); (err == nil) != ok {
			t.Errorf("CheckContainer(%q) = %v", id, err)
		}
	}
}

// Images with All narrow it: only their processes are targets.
func TestAllWithImages(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	sleep := testenv.Sleeper(t)
	var r recorder
	w, err := New(Config{All: true, Images: []string{"sleep"}, Interval: 20 * time.Millisecond}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	defer w.Close()
	eventually(t, "the sleep", func() bool { return r.has(&r.added, sleep.Process.Pid) })
	if slices.Contains(w.Targets(), 1) {
		t.Errorf("init is a target with All narrowed to sleep: %v", w.Targets())
	}
}

// A --cgroup directory removed while the watcher runs is warned about once, and again only
// after it came back and went again.
func TestCgroupGoneWarnedOnce(t *testing.T) {
	mount := t.TempDir()
	dir := filepath.Join(mount, "app.service")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := resolveCgroup(mount, "/app.service")
	if err != nil {
		t.Fatal(err)
	}
	f := &filter{cgroups: []cgroupDir{c}, gone: map[string]bool{}, seenIDs: map[string][]string{}, warnedID: map[string]bool{}}
	if w := f.warnings(); len(w) != 0 {
		t.Fatalf("warnings while it exists: %q", w)
	}
	os.Remove(dir)
	if w := f.warnings(); len(w) != 1 {
		t.Fatalf("warnings once it is gone: %q, want one", w)
	}
	if w := f.warnings(); len(w) != 0 {
		t.Errorf("warned again: %q", w)
	}
	os.Mkdir(dir, 0o755)
	f.warnings()
	os.Remove(dir)
	if w := f.warnings(); len(w) != 1 {
		t.Errorf("gone a second time: %q, want one warning", w)
	}
}

// A container prefix that matches two containers is warned about once.
func TestContainerPrefixAmbiguous(t *testing.T) {
	f := &filter{containers: []string{"0123456789ab"}, gone: map[string]bool{}, seenIDs: map[string][]string{}, warnedID: map[string]bool{}}
	a, b := "0123456789ab"+strings.Repeat("0", 52), "0123456789ab"+strings.Repeat("1", 52)
	if !f.containerMatches(a, "") || !f.containerMatches(b, "") || f.containerMatches(strings.Repeat("2", 64), "") {
		t.Fatal("containerMatches by prefix is wrong")
	}
	if w := f.warnings(); len(w) != 1 || !strings.Contains(w[0], "several containers") {
		t.Errorf("warnings %q, want one about the ambiguous prefix", w)
	}
	if w := f.warnings(); len(w) != 0 {
		t.Errorf("warned again: %q", w)
	}
}

// cgroupIDs names the --cgroup directories; with containers, the cgroups of those seen, each
// within a --cgroup directory when both are given (the deeper of the two); a container's
// cgroup found gone is forgotten. A directory made again has a new id.
func TestCgroupIDs(t *testing.T) {
	mount := t.TempDir() // a stand-in for the hierarchy: cgroupIDs reads directories' inodes
	id := func(rel string) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(mount, rel), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	ctrA, ctrB := "0123456789ab"+strings.Repeat("0", 52), "0123456789ab"+strings.Repeat("1", 52)
	scopeA, scopeB := "/system.slice/docker-"+ctrA+".scope", "/machine.slice/docker-"+ctrB+".scope"
	for _, rel := range []string{"/system.slice/x.service", scopeA + "/inner", scopeB} {
		if err := os.MkdirAll(filepath.Join(mount, rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	newFilter := func(cgroups []string, containers []string) *filter {
		f := &filter{mount: mount, containers: containers, containerCgroups: map[string]bool{}, seenIDs: map[string][]string{}}
		for _, rel := range cgroups {
			f.cgroups = append(f.cgroups, cgroupDir{rel: rel, dir: filepath.Join(mount, rel)})
		}
		return f
	}

	f := newFilter([]string{"/system.slice/x.service", "/system.slice"}, nil)
	if got, want := f.cgroupIDs(), sorted(id("/system.slice/x.service"), id("/system.slice")); !slices.Equal(got, want) {
		t.Errorf("--cgroup alone: %v, want %v", got, want)
	}

	f = newFilter(nil, []string{"0123456789ab"})
	if got := f.cgroupIDs(); len(got) != 0 {
		t.Errorf("no container seen yet: %v, want none", got)
	}
	f.containerMatches(ctrA, scopeA)
	if !f.takeFound() || f.takeFound() {
		t.Error("takeFound: want true once after a container's first process, then false")
	}
	f.containerMatches(ctrA, scopeA)
	f.containerMatches(ctrB, scopeB)
	if got, want := f.cgroupIDs(), sorted(id(scopeA), id(scopeB)); !slices.Equal(got, want) {
		t.Errorf("two containers seen: %v, want %v", got, want)
	}

	// Within /system.slice: container A's scope; within A's scope/inner: that directory.
	f = newFilter([]string{"/system.slice", scopeA + "/inner"}, []string{"0123456789ab"})
	f.containerMatches(ctrA, scopeA)
	f.containerMatches(ctrB, scopeB)
	if got, want := f.cgroupIDs(), sorted(id(scopeA), id(scopeA+"/inner")); !slices.Equal(got, want) {
		t.Errorf("--cgroup and --container: %v, want %v", got, want)
	}

	f = newFilter(nil, []string{"0123456789ab"})
	f.containerMatches(ctrA, scopeA)
	f.containerMatches(ctrB, scopeB)
	if err := os.Remove(filepath.Join(mount, scopeB)); err != nil {
		t.Fatal(err)
	}
	if got, want := f.cgroupIDs(), []uint64{id(scopeA)}; !slices.Equal(got, want) || f.containerCgroups[scopeB] {
		t.Errorf("container B gone: %v (B still held: %v), want %v", got, f.containerCgroups[scopeB], want)
	}

	f = newFilter([]string{"/system.slice/x.service"}, nil)
	old := id("/system.slice/x.service")
	held, err := os.Open(filepath.Join(mount, "/system.slice/x.service")) // its inode not reused meanwhile
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	os.Remove(filepath.Join(mount, "/system.slice/x.service"))
	os.Mkdir(filepath.Join(mount, "/system.slice/x.service"), 0o755)
	if got := f.cgroupIDs(); len(got) != 1 || got[0] == old {
		t.Errorf("the cgroup made again: %v, want its new id in place of %d", got, old)
	}
}

// sorted returns ids ascending.
func sorted(ids ...uint64) []uint64 {
	slices.Sort(ids)
	return ids
}

// With All and a uid filter, a process that changes its real user without an exec joins the
// targets and leaves them at once, well before the scan's full check of it is due again: the
// change-of-user notification has it checked.
func TestAllUIDChangeWithoutExec(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("perl"))
	pid, setUID := startUIDChanger(t)
	var r recorder
	w := startAll(t, Filter{UIDs: []uint32{65534}}, r.handler())
	if !w.execOK.Load() {
		t.Skip("no exec notifications: targets are found by scans alone")
	}
	if slices.Contains(w.Targets(), uint32(pid)) {
		t.Fatalf("root's perl is a target of --uid 65534")
	}
	setUID(65534)
	// Scans come every 5 s: 2 s is the notification's doing.
	waitFor(t, "perl, now of uid 65534, added", 2*time.Second, func() bool { return r.has(&r.added, pid) })
	setUID(0)
	waitFor(t, "perl, back to root, removed", 2*time.Second, func() bool { return r.has(&r.removed, pid) })
}

// With All and a cgroup filter, a process moved out of the cgroup leaves the targets at the
// next scan, and one moved back joins them again: nothing notifies a move, so a scan reads
// every process's cgroup even while it trusts its last full check of the rest.
func TestAllCgroupMove(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	t.Parallel() // it waits for scans
	mount, err := cgroup2Mount()
	if err != nil {
		t.Skip(err)
	}
	name := fmt.Sprintf("profd-test-%d", os.Getpid())
	in, out := filepath.Join(mount, name+"-in"), filepath.Join(mount, name+"-out")
	for _, dir := range []string{in, out} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Skipf("cgroup v2 at %s is not writable: %v", mount, err)
		}
		t.Cleanup(func() { os.Remove(dir) })
	}
	sleep := testenv.Sleeper(t) // killed before the cgroups are removed
	pid := sleep.Process.Pid
	moveTo := func(dir string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	moveTo(in)
	var r recorder
	var scans atomic.Int32
	h := r.handler()
	h.Scanned = func() { scans.Add(1) }
	w := startAll(t, Filter{Cgroups: []string{"/" + name + "-in"}}, h)
	eventually(t, "the sleep in the cgroup", func() bool { return slices.Contains(w.Targets(), uint32(pid)) })
	within := 3 * (w.scanInterval() + time.Second)
	// A new target is checked in full at the scan after the one that found it; from the
	// next, that check is trusted.
	waitFor(t, "two scans", 2*within, func() bool { return scans.Load() >= 3 })
	moveTo(out)
	waitFor(t, "the sleep moved out, removed", within, func() bool { return r.has(&r.removed, pid) })
	moveTo(in)
	waitFor(t, "the sleep moved back, a target again", within, func() bool { return slices.Contains(w.Targets(), uint32(pid)) })
}

// waitFor waits up to d for cond.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
