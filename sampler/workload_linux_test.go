package sampler

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
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
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []addrRange
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || len(fields) > 5 || !strings.Contains(fields[1], "x") {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("maps line %q", sc.Text())
		}
		out = append(out, addrRange{l, h})
	}
	return out, sc.Err()
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

// cpuTimeNs is the user (and with system, also system) CPU time of every thread of pid,
// from /proc/PID/stat.
func cpuTimeNs(pid int, system bool) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	rest := s[strings.LastIndexByte(s, ')')+2:]
	f := strings.Fields(rest)
	// after "(comm) ": state is field 3, utime 14, stime 15 -> indexes 11, 12 here.
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	var st uint64
	if system {
		st, _ = strconv.ParseUint(f[12], 10, 64)
	}
	const clkTck = 100 // USER_HZ on Linux
	return (ut + st) * (1e9 / clkTck), nil
}
