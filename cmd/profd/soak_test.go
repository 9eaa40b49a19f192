package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profileio"
)

// TestSoak is `make soak`: an hour of a JIT-heavy host compressed into PROFD_SOAK_DURATION
// (default 3m). The profd binary watches a --jit-image while short-lived testjit processes
// come and go (two at a time, each flushing after every round), and SIGUSR1 arrives every
// 50 ms on top. It checks that profd's RSS and open file descriptors stay flat after warm-up,
// that every JIT that ran got its final profile, and that flushes kept coming.
func TestSoak(t *testing.T) {
	duration := soakDuration(t, "PROFD_SOAK", "make soak", 3*time.Minute)
	profd, testjit := binaries(t)
	base := t.TempDir()
	fifoDir, outDir := filepath.Join(base, "fifo"), filepath.Join(base, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	image := "profd-soak-jit"
	jitBin := filepath.Join(base, image)
	if out, err := exec.Command("cp", testjit, jitBin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}

	cmd := exec.Command(profd, "--jit-image", image, "--event", "cpu-clock", "--fifo-dir", fifoDir,
		"--out", outDir, "--log-level", "warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testenv.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var flushes atomic.Int64
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "profd flush #") || strings.HasPrefix(sc.Text(), "profd final flush #") {
				flushes.Add(1)
			}
		}
	}()
	waitForFile(t, filepath.Join(fifoDir, "profd.pid"))
	time.Sleep(200 * time.Millisecond)
	idleFds, idleLinks := fdCount(t, cmd.Process.Pid), fdLinks(cmd.Process.Pid) // no target yet

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	started := map[int]bool{}
	var failed []string
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c := exec.Command(jitBin, "-d", fifoDir, "-m", "10", "-r", "3", "-w", "3000", "-f")
				var out bytes.Buffer
				c.Stdout = &out
				if err := c.Start(); err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
					return
				}
				err := c.Wait()
				mu.Lock()
				started[c.Process.Pid] = true
				if err != nil || !strings.Contains(out.String(), "profd connected") {
					failed = append(failed, "pid "+strconv.Itoa(c.Process.Pid)+": "+firstLine(out.String())+" "+errString(err))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				cmd.Process.Signal(syscall.SIGUSR1)
			}
		}
	}()

	type point struct {
		at        time.Duration
		rssKB     int
		fds       int
		flushes   int64
		processes int
	}
	var points []point
	start := time.Now()
	every := duration / 12
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(every):
			mu.Lock()
			n := len(started)
			mu.Unlock()
			p := point{time.Since(start).Round(time.Second), rssKB(t, cmd.Process.Pid), fdCount(t, cmd.Process.Pid), flushes.Load(), n}
			points = append(points, p)
			t.Logf("%6v  rss %6d kB  fds %3d  flushes %6d  jit processes %5d", p.at, p.rssKB, p.fds, p.flushes, p.processes)
		}
	}
	wg.Wait()
	time.Sleep(time.Second) // the last JITs' final flushes
	// No target left: every fd a target needed (FIFO, eventfd, perf events, tailed files)
	// must be closed again. The BPF back end may hold a spare primary and a spare overflow
	// counts map per shard between drains (bpf.Program keeps drained maps for reuse), and
	// the first drain may come after the idle count, so up to four bpf-maps more are allowed.
	const spareMaps = 4
	if fds, links := fdCount(t, cmd.Process.Pid), fdLinks(cmd.Process.Pid); fds > idleFds+spareMaps ||
		kinds(links)["anon_inode:bpf-map"]-kinds(idleLinks)["anon_inode:bpf-map"] < fds-idleFds {
		t.Errorf("%d fds open with no target left, %d before the first one:\nbefore %v\nafter  %v", fds, idleFds, idleLinks, links)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-scanned
	if err := cmd.Wait(); err != nil {
		t.Fatalf("profd: %v\n%s", err, stderr.String())
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d JIT runs failed or ran without profd; first: %s", len(failed), len(started), failed[0])
	}
	if len(points) < 6 {
		t.Fatalf("only %d measurements", len(points))
	}

	// Flat after warm-up (the first quarter): RSS within 25 % + 4 MiB; fds bounded by what
	// two live targets need (they vary with the targets alive at the moment).
	warm := points[len(points)/4]
	last := points[len(points)-1]
	maxRSS := 0
	for _, p := range points[len(points)/4:] {
		if p.fds > idleFds+30 {
			t.Errorf("%d fds at %v, %d with no target", p.fds, p.at, idleFds)
		}
		maxRSS = max(maxRSS, p.rssKB)
	}
	if float64(maxRSS) > 1.25*float64(warm.rssKB)+4096 {
		t.Errorf("RSS grew from %d kB (at %v) to %d kB", warm.rssKB, warm.at, maxRSS)
	}
	for i := 1; i < len(points); i++ {
		if points[i].flushes <= points[i-1].flushes {
			t.Errorf("no flush between %v and %v", points[i-1].at, points[i].at)
		}
	}
	// Every JIT process got a final profile with its samples. A reused pid overwrites the
	// file of the earlier process; the set of pids must match.
	files, _ := filepath.Glob(filepath.Join(outDir, image+"-*.profd"))
	have := map[int]bool{}
	var empty int
	for _, f := range files {
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), image+"-"), ".profd"))
		have[pid] = true
		if c := readCaptureFile(t, f); c != nil {
			if j, _ := c.TotalSamples(); j == 0 {
				empty++
			}
		}
	}
	var missing []int
	for pid := range started {
		if !have[pid] {
			missing = append(missing, pid)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d JIT processes have no final profile: %v", len(missing), len(started), missing[:min(10, len(missing))])
	}
	if empty*10 > len(files) {
		t.Errorf("%d of %d final profiles have no JIT samples", empty, len(files))
	}
	t.Logf("%d JIT processes, %d flushes, RSS %d → %d kB, fds with no target %d", len(started), last.flushes, warm.rssKB, last.rssKB, idleFds)
}

// soakDuration skips a soak test unless the environment variable gate is set (target names
// the make target that sets it), and returns PROFD_SOAK_DURATION, def when it is unset.
func soakDuration(t *testing.T, gate, target string, def time.Duration) time.Duration {
	t.Helper()
	if os.Getenv(gate) == "" {
		t.Skipf("set %s=1 (%s)", gate, target)
	}
	testenv.Requires(t, testenv.Root)
	s := os.Getenv("PROFD_SOAK_DURATION")
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("PROFD_SOAK_DURATION: %v", err)
	}
	return d
}

func rssKB(t *testing.T, pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

func fdCount(t *testing.T, pid int) int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// fdLinks lists pid's open fds as "N->target".
func fdLinks(pid int) []string {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink(filepath.Join(dir, e.Name()))
		out = append(out, e.Name()+"->"+l)
	}
	return out
}

// kinds counts fdLinks by what they point at.
func kinds(links []string) map[string]int {
	m := map[string]int{}
	for _, l := range links {
		_, target, _ := strings.Cut(l, "->")
		m[target]++
	}
	return m
}

func waitForFile(t *testing.T, path string) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("no %s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readCaptureFile(t *testing.T, path string) *profileio.Capture {
	f, err := os.Open(path)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer f.Close()
	c, err := profileio.ReadCapture(f)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return nil
	}
	return c
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
