package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
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
func sharedDirs(t *testing.T) dirs {
	t.Helper()
	base := t.TempDir()
	for p := base; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
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
func reachableTestJIT(t *testing.T) string {
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
