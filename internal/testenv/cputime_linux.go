package testenv

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// UserCPU is the user CPU time process pid has taken, to the kernel's tick (10 ms). Tests
// that need a workload to have run for a while wait on it rather than on the clock: a busy
// machine gives the workload a fraction of a core.
func UserCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// After "(comm) ", utime is the 12th field (the 14th of the line).
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	if len(f) < 12 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	ticks, err := strconv.ParseUint(string(f[11]), 10, 64)
	if err != nil {
		t.Fatalf("/proc/%d/stat: utime %q: %v", pid, f[11], err)
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}
