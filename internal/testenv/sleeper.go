package testenv

import (
	"os/exec"
	"testing"
)

// Sleeper starts a process that only sleeps (a target that does nothing, one that does not
// catch SIGQUIT); the test's cleanup kills and reaps it.
func Sleeper(t testing.TB) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}
