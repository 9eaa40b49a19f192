package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// Unprivileged users the tests run targets as.
const (
	targetUID = 65534 // nobody
	otherUID  = 65533
)

// sharedDirs is newDirs whose paths other users can reach (but not list), with an --out
// profd makes itself.
func sharedDirs(t testing.TB) dirs {
	t.Helper()
	base := testenv.ReachableTempDir(t)
	return dirs{fifo: filepath.Join(base, "fifo"), jitdump: filepath.Join(base, "jitdump"), out: filepath.Join(base, "out")}
}

// asUser runs argv as uid (and gid uid) and returns its error.
func asUser(uid uint32, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	return cmd.Run()
}

// startAsUser starts testjit-like argv as uid; the test's cleanup kills it.
func startAsUser(t *testing.T, uid uint32, argv ...string) *child {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	return startCmd(t, cmd)
}

// reachableTestJIT is workloads' testjit, in a directory other users may pass through.
func reachableTestJIT(t testing.TB) string {
	t.Helper()
	testjit, _ := workloads(t)
	if err := os.Chmod(filepath.Dir(testjit), 0o711); err != nil {
		t.Fatal(err)
	}
	return testjit
}

// TestOutputsPrivateToTargetUser: a JIT running as an unprivileged user gets output files
// mode 0600 that it owns, in an --out profd made 0711; it reads them back through the paths
// of its flush reply, and another unprivileged user can open none of them.
func TestOutputsPrivateToTargetUser(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit := reachableTestJIT(t)
	d := sharedDirs(t)
	jit := startAsUser(t, targetUID, testjit, "-d", d.fifo, "-m", "100", "-r", "1", "-w", "10000", "-F", "-R")
	pid := jit.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)

	if st, err := os.Stat(d.out); err != nil || st.Mode().Perm() != outDirPerm {
		t.Errorf("--out profd made: %v (%v), want mode 0711", st.Mode().Perm(), err)
	}
	var paths []string
	for _, f := range AllFormats {
		paths = append(paths, outputPath(d, "testjit", pid, f))
	}
	out := jit.out.String()
	if !strings.Contains(out, "flushed rc=0 status=0 paths="+strings.Join(paths, ",")+"\n") {
		t.Fatalf("testjit's flush request not answered with its four outputs:\n%s", out)
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := info.Sys().(*syscall.Stat_t)
		if info.Mode().Perm() != 0o600 || st.Uid != targetUID || st.Gid != targetUID {
			t.Errorf("%s: mode %v owner %d:%d, want 0600 owned by %d:%d", p, info.Mode().Perm(), st.Uid, st.Gid, targetUID, targetUID)
		}
		// The JIT read each file of its reply, as its own user, to the end.
		if !strings.Contains(out, "read "+p+" ") || strings.Contains(out, "read "+p+" error") || strings.Contains(out, "read "+p+" 0\n") {
			t.Errorf("testjit (uid %d) could not read %s back:\n%s", targetUID, p, out)
		}
		if err := asUser(otherUID, "/bin/sh", "-c", `exec 3<"$1"`, "sh", p); err == nil {
			t.Errorf("uid %d opened %s, uid %d's output", otherUID, p, targetUID)
		}
		if err := asUser(targetUID, "/bin/sh", "-c", `exec 3<"$1"`, "sh", p); err != nil {
			t.Errorf("uid %d cannot open its own %s: %v", targetUID, p, err)
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", r.logs.String())
	}
}

// TestGroupByImagePerUser: two processes of one image running as two users make two
// groups under --group-by image, each with its own process and functions only, owned by its
// user; with --all-users they make one, owned by root.
func TestGroupByImagePerUser(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit := reachableTestJIT(t)
	for _, allUsers := range []bool{false, true} {
		t.Run(map[bool]string{false: "per-user", true: "all-users"}[allUsers], func(t *testing.T) {
			d := sharedDirs(t)
			jits := map[uint32]*child{}
			for _, uid := range []uint32{targetUID, otherUID} {
				jits[uid] = startAsUser(t, uid, testjit, "-d", d.fifo, "-m", "100", "-r", "1", "-w", "10000", "-F")
			}
			pidOf := func(uid uint32) uint32 { return uint32(jits[uid].pid()) }
			r := startRun(t, Config{Pids: []uint32{pidOf(targetUID), pidOf(otherUID)}, Event: "cpu-clock",
				FifoDir: d.fifo, OutDir: d.out, GroupBy: GroupByImage, AllUsers: allUsers})
			for _, jit := range jits {
				jit.wait(t, 60*time.Second)
			}
			r.wait(t, 30*time.Second)
			if allUsers {
				c := readCapture(t, filepath.Join(d.out, "testjit.profd"))
				if len(c.Processes) != 2 {
					t.Errorf("--all-users: the image's capture has %d processes, want both", len(c.Processes))
				}
				checkOwner(t, filepath.Join(d.out, "testjit.profd"), 0)
				return
			}
			if fileExists(filepath.Join(d.out, "testjit.profd")) {
				t.Errorf("an output for both users' processes was written")
			}
			for uid, jit := range jits {
				base := filepath.Join(d.out, "testjit-uid"+strconv.Itoa(int(uid)))
				if !strings.Contains(jit.out.String(), "flushed rc=0 status=0 paths="+base+".prof.txt,") {
					t.Errorf("uid %d's JIT not answered with its group's paths:\n%s", uid, jit.out.String())
				}
				c := readCapture(t, base+".profd")
				if len(c.Processes) != 1 || c.Processes[0].Pid != uint32(jit.pid()) {
					t.Errorf("%s.profd: processes %+v, want only pid %d", base, c.Processes, jit.pid())
				}
				if len(c.Objects) == 0 {
					t.Errorf("%s.profd: no JIT function", base)
				}
				for _, o := range c.Objects {
					if o.Pid != uint32(jit.pid()) {
						t.Errorf("%s.profd holds %s of pid %d, another user's process", base, o.Object.Name, o.Pid)
					}
				}
				checkOwner(t, base+".profd", uid)
			}
			if t.Failed() {
				t.Logf("logs:\n%s", r.logs.String())
			}
		})
	}
}

// checkOwner fails t unless path is mode 0600 and owned by uid.
func checkOwner(t *testing.T, path string, uid uint32) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := info.Sys().(*syscall.Stat_t); info.Mode().Perm() != 0o600 || st.Uid != uid {
		t.Errorf("%s: mode %v owner %d, want 0600 owned by %d", path, info.Mode().Perm(), st.Uid, uid)
	}
}
