package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// JavaClasses compiles profd's Java workload, workloads/runtimes/Hot.java, into a directory
// of the test's own and returns it; it skips t without java and javac.
func JavaClasses(t testing.TB) string {
	t.Helper()
	Requires(t, Tool("java"), Tool("javac"))
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "workloads", "runtimes", "Hot.java")
	dir := t.TempDir()
	if out, err := exec.Command("javac", "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return dir
}

// RemoveJVMFiles removes what a JVM of process pid, killed or reaped a moment ago, leaves
// in /tmp: its perf map, and its attach socket when it was killed.
func RemoveJVMFiles(pid int) { RemoveRuntimeFiles(pid, time.Time{}) }

// RemoveRuntimeFiles removes what a JIT runtime of process pid leaves in /tmp (a perf map, a
// JVM's attach socket, the BEAM's jitdump), but a file written after ended, when the
// process was seen to exit (zero: it runs, or was reaped a moment ago): its pid may be
// another process's by then (tests running beside this one start thousands), and the file
// that process's.
func RemoveRuntimeFiles(pid int, ended time.Time) {
	for _, path := range []string{fmt.Sprintf("/tmp/perf-%d.map", pid), fmt.Sprintf("/tmp/.java_pid%d", pid),
		fmt.Sprintf("/tmp/jit-%d.dump", pid)} {
		if st, err := os.Lstat(path); err == nil && (ended.IsZero() || !st.ModTime().After(ended)) {
			os.Remove(path)
		}
	}
}
