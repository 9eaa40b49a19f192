package sampler

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/profd/profd/internal/procfs"
)

// lli is a running lli-14 with testdata/hotloop.ll.
type lli struct {
	cmd  *exec.Cmd
	done chan error
}

// startLLI runs `lli-14 -jit-kind=mcjit testdata/hotloop.ll args...`, its jitdump in a
// directory of the test's, and kills it at cleanup.
func startLLI(t testing.TB, args ...string) *lli {
	t.Helper()
	cmd := exec.Command("lli-14", append([]string{"-jit-kind=mcjit", "testdata/hotloop.ll"}, args...)...)
	cmd.Env = append(os.Environ(), "JITDUMPDIR="+t.TempDir()) // its jitdump, else left in /tmp
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start lli-14: %v", err)
	}
	l := &lli{cmd: cmd, done: make(chan error, 1)}
	go func() { l.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-l.done
	})
	return l
}

func (l *lli) pid() int { return l.cmd.Process.Pid }

// wait waits for lli to exit and fails t if it did not exit cleanly.
func (l *lli) wait(t testing.TB) {
	t.Helper()
	select {
	case err := <-l.done:
		l.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("lli-14: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("lli-14 did not exit")
	}
}

// addrRange is a half-open address range.
type addrRange struct{ lo, hi uint64 }

// anonExec lists pid's anonymous executable mappings (where MCJIT puts code).
func anonExec(pid int) ([]addrRange, error) {
	maps, err := procfs.ReadMaps(uint32(pid))
	var out []addrRange
	for _, m := range maps {
		if m.Executable() && m.Anonymous() {
			out = append(out, addrRange{m.Start, m.End})
		}
	}
	return out, err
}

// waitForJIT waits until pid has an anonymous executable mapping, i.e. MCJIT emitted code.
func waitForJIT(t testing.TB, pid int) []addrRange {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r, err := anonExec(pid)
		if err != nil {
			t.Fatalf("read maps of %d: %v", pid, err)
		}
		if len(r) > 0 {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("lli-14 (pid %d) mapped no JIT code in 20s", pid)
	return nil
}

func inRanges(ip uint64, rs []addrRange) bool {
	for _, r := range rs {
		if ip >= r.lo && ip < r.hi {
			return true
		}
	}
	return false
}

// pidCounts keeps pid's counts, by ip.
func pidCounts(d Drained, pid int) map[uint64]uint64 {
	out := make(map[uint64]uint64)
	for k, n := range d.Counts {
		if k.PID == uint32(pid) {
			out[k.IP] += n.N
		}
	}
	return out
}

func total(c map[uint64]uint64) uint64 {
	var n uint64
	for _, v := range c {
		n += v
	}
	return n
}

// overlap is Σ min of the two normalised distributions: 1 when they are equal, 0 when
// disjoint.
func overlap(a, b map[uint64]uint64) float64 {
	ta, tb := float64(total(a)), float64(total(b))
	if ta == 0 || tb == 0 {
		return 0
	}
	var s float64
	for ip, na := range a {
		s += min(float64(na)/ta, float64(b[ip])/tb)
	}
	return s
}
