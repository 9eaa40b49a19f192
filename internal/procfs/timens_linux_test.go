package procfs

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// A process in a time namespace whose CLOCK_MONOTONIC is 100 000 s ahead of the host's is
// that far ahead; profd's own namespace is not.
func TestMonotonicOffset(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("unshare"))
	if off, err := MonotonicOffset(uint32(os.Getpid())); err != nil || off != 0 {
		t.Fatalf("MonotonicOffset(self) = %d, %v; want 0", off, err)
	}
	if _, err := os.Stat("/proc/self/timens_offsets"); err != nil {
		t.Skipf("no time namespaces: %v", err)
	}
	cmd := exec.Command("unshare", "--fork", "--time", "--monotonic", "100000", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(testenv.ChildOf(cmd.Process.Pid, 10*time.Second, nil))
	if pid == 0 {
		t.Fatal("unshare started no child in 10 s")
	}
	if off, err := MonotonicOffset(pid); err != nil || off != 100_000e9 {
		t.Errorf("MonotonicOffset(the child in its time namespace) = %d, %v; want 100000 s", off, err)
	}
}

func TestParseMonotonicOffset(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"monotonic           0         0\nboottime            0         0\n", 0, false},
		{"monotonic      -3600 250000000\nboottime 5 0\n", -3600*1e9 + 250_000_000, false},
		{"boottime 5 0\n1 7 1\n", 7e9 + 1, false},
		{"", 0, false},
		{"monotonic 1 1000000000\n", 0, true},
		{"monotonic 99999999999999 0\n", 0, true},
		{"monotonic x 0\n", 0, true},
	} {
		got, err := parseMonotonicOffset([]byte(tc.in))
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("parseMonotonicOffset(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParseMonotonicOffset(f *testing.F) {
	f.Add([]byte("monotonic      100000         0\nboottime            0         0\n"))
	f.Add([]byte("1 -5 999999999\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseMonotonicOffset(data)
		if err != nil && got != 0 {
			t.Fatalf("%d with error %v", got, err)
		}
	})
}
