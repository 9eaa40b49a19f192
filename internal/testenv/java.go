package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
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

// RemoveJVMFiles removes what a JVM of process pid leaves in /tmp: its perf map, and its
// attach socket when it was killed.
func RemoveJVMFiles(pid int) {
	os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid))
	os.Remove(fmt.Sprintf("/tmp/.java_pid%d", pid))
}
