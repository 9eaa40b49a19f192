package testenv

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// ChildOf waits up to timeout for process parent to have a child for which ok (nil: any)
// is true, and returns its pid, or 0 if none came: unshare --fork runs its command in the
// namespaces it made as such a child.
func ChildOf(parent int, timeout time.Duration, ok func(pid int) bool) int {
	for end := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", parent, parent))
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil && (ok == nil || ok(pid)) {
			return pid
		}
		if time.Now().After(end) {
			return 0
		}
	}
}

// Piped is a process a test writes lines to (In) and reads lines from (Out).
type Piped struct {
	Cmd *exec.Cmd
	In  io.WriteCloser
	Out *bufio.Reader
}

// StartPiped starts name with args, its standard input and output piped to the test. The
// test's cleanup closes its input, kills it and waits for it.
func StartPiped(t testing.TB, name string, args ...string) *Piped {
	t.Helper()
	cmd := exec.Command(name, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return &Piped{Cmd: cmd, In: in, Out: bufio.NewReader(out)}
}

// ReachableTempDir is t.TempDir with it and the directories above it, up to the system's
// temporary directory, made mode 0711: every user can reach a path in it by name, none can
// list it.
func ReachableTempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for p := dir; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
