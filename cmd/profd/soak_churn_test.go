package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/profileio"
)

// TestSoakChurn is `make soak-churn`: a JIT that keeps loading and unloading code (testjit
// -C: 2 000 functions of 4 KiB a round, about 8 000 records a second, nearly all of them
// never sampled) beside a small JIT that asks for its profiles after every round and waits
// up to 5 s for each answer, with profd flushing every 3 s, for PROFD_SOAK_DURATION
// (default 10m). It checks that profd's RSS is flat after the first minute (the median of
// each minute's readings within 10 % of the second minute's: RSS swings with the garbage
// collector's cycles, so one reading, or a peak, says more of the cycle than of a trend),
// that every flush of a target takes at most 1 s, and that every flush request of the small
// JIT is answered within its 5 s.
func TestSoakChurn(t *testing.T) {
	duration := soakDuration(t, "PROFD_SOAK_CHURN", "make soak-churn", 10*time.Minute)
	if duration < 2*time.Minute {
		t.Fatalf("PROFD_SOAK_DURATION %v: at least 2m (RSS is compared with its value at the first minute)", duration)
	}
	profd, testjit := binaries(t)
	base := t.TempDir()
	fifoDir, outDir := filepath.Join(base, "fifo"), filepath.Join(base, "out")

	// The JITs wait for their FIFOs, which profd makes when it attaches to them.
	churn := exec.Command(testjit, "-d", fifoDir, "-w", "30000", "-C", "2000", "-S", "4096", "-m", "100", "-r", "1000000000")
	churn.Stdout = io.Discard
	small := exec.Command(testjit, "-d", fifoDir, "-w", "30000", "-m", "50", "-r", "1000000000", "-F")
	smallOut, err := small.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*exec.Cmd{churn, small} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	pids := strconv.Itoa(churn.Process.Pid) + "," + strconv.Itoa(small.Process.Pid)
	cmd := exec.Command(profd, "--pid", pids, "--event", "cpu-clock", "--fifo-dir", fifoDir, "--out", outDir,
		"--flush-interval", "3s", "--log-level", "info")
	cmd.Stdout = io.Discard
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	// Every flush's duration, from profd's log; every flush request's wait, from the small
	// JIT's output (the time from its line before "flushed" to that line).
	var mu sync.Mutex
	var flushes []time.Duration
	var slowest string
	var waits []time.Duration
	var unanswered []string
	stopping := false // profd is being stopped: a request now goes unanswered
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		sc := bufio.NewScanner(logs)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			m := tookRE.FindStringSubmatch(sc.Text())
			if m == nil || !strings.Contains(sc.Text(), "profd: flushed") {
				continue
			}
			d, err := time.ParseDuration(m[1])
			if err != nil {
				continue
			}
			mu.Lock()
			flushes = append(flushes, d)
			if d == slices.Max(flushes) {
				slowest = sc.Text()
			}
			mu.Unlock()
		}
	}()
	go func() {
		sc := bufio.NewScanner(smallOut)
		last := time.Now()
		for sc.Scan() {
			now := time.Now()
			if line := sc.Text(); strings.HasPrefix(line, "flushed ") {
				mu.Lock()
				if stopping {
					mu.Unlock()
					continue
				}
				waits = append(waits, now.Sub(last))
				if !strings.HasPrefix(line, "flushed rc=0 ") {
					unanswered = append(unanswered, line)
				}
				mu.Unlock()
			}
			last = now
		}
	}()

	type point struct {
		at    time.Duration
		rssKB int
	}
	var points []point
	var peakAtMinute int
	start := time.Now()
	for time.Since(start) < duration {
		time.Sleep(10 * time.Second)
		p := point{time.Since(start).Round(time.Second), rssKB(t, cmd.Process.Pid)}
		points = append(points, p)
		if p.at <= time.Minute {
			peakAtMinute = statusKB(t, cmd.Process.Pid, "VmHWM")
		}
		mu.Lock()
		n, w := len(flushes), len(waits)
		mu.Unlock()
		t.Logf("%6v  rss %7d kB  flushes %5d  flush requests %4d  load %s", p.at, p.rssKB, n, w, loadAverage())
	}
	peak := statusKB(t, cmd.Process.Pid, "VmHWM")
	mu.Lock()
	stopping = true
	mu.Unlock()
	stopped := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("profd: %v", err)
	}
	<-logsDone
	exitTook := time.Since(stopped)

	mu.Lock()
	defer mu.Unlock()
	var atMinute point
	maxAfter := point{}
	for _, p := range points {
		switch {
		case p.at <= time.Minute:
			atMinute = p
		case p.rssKB > maxAfter.rssKB:
			maxAfter = p
		}
	}
	sorted := slices.Sorted(slices.Values(flushes))
	sortedWaits := slices.Sorted(slices.Values(waits))
	if len(sorted) == 0 || len(sortedWaits) == 0 {
		t.Fatalf("%d flushes logged, %d flush requests answered", len(sorted), len(sortedWaits))
	}
	t.Logf("RSS %d kB at %v (peak %d kB by then), at most %d kB after (at %v; peak %d kB); flushes %d, p50 %v, max %v; flush requests %d, wait max %v, unanswered %d; SIGTERM to exit %v; load %s",
		atMinute.rssKB, atMinute.at, peakAtMinute, maxAfter.rssKB, maxAfter.at, peak, len(sorted), sorted[len(sorted)/2], sorted[len(sorted)-1],
		len(sortedWaits), sortedWaits[len(sortedWaits)-1], len(unanswered), exitTook, loadAverage())
	// The churning JIT's final capture: the code of what drew no sample is not in it.
	capture := filepath.Join(outDir, "testjit-"+strconv.Itoa(churn.Process.Pid)+".profd")
	if c := readCaptureFile(t, capture); c != nil {
		framed := map[profileio.ObjectID]bool{}
		for _, st := range c.Stacks {
			for _, f := range st.Frames {
				framed[f.Object] = true
			}
		}
		var idle, idleWithCode int
		for _, o := range c.Objects {
			if len(o.Samples) == 0 && !framed[o.ID] {
				idle++
				if len(o.Object.Code) > 0 || len(o.Object.Lines) > 0 {
					idleWithCode++
				}
			}
		}
		var ended uint64
		for _, u := range c.Unmapped {
			if u.Mapping == profileio.EndedMapping {
				ended += u.Count
			}
		}
		jit, outside := c.TotalSamples()
		st, _ := os.Stat(capture)
		t.Logf("final capture of the churning JIT: %d bytes, %d objects, %d of them never sampled; %d samples, %d of them of functions let go of (%s)",
			st.Size(), len(c.Objects), idle, jit+outside, ended, profileio.EndedMapping)
		if idleWithCode > 0 {
			t.Errorf("the churning JIT's final capture carries the code or lines of %d of its %d functions that drew no sample", idleWithCode, idle)
		}
	}
	// Flat after the first minute: each later minute's median RSS (six readings, which the
	// garbage collector's cycles swing by a third either way) within 10 % of the second
	// minute's.
	medians := minuteMedians(points, func(p point) (time.Duration, int) { return p.at, p.rssKB })
	t.Logf("RSS medians by minute: %v kB", medians)
	for i := 2; i < len(medians); i++ {
		if float64(medians[i]) > 1.10*float64(medians[1]) || float64(medians[i]) < 0.90*float64(medians[1]) {
			t.Errorf("RSS median of minute %d is %d kB, not within 10 %% of the second minute's %d kB", i+1, medians[i], medians[1])
		}
	}
	if longest := sorted[len(sorted)-1]; longest > time.Second {
		t.Errorf("a flush took %v, more than 1 s:\n%s", longest, slowest)
	}
	if len(unanswered) > 0 || sortedWaits[len(sortedWaits)-1] > 5*time.Second {
		t.Errorf("%d of %d flush requests unanswered (first: %v); the longest wait %v", len(unanswered), len(waits), firstOf(unanswered), sortedWaits[len(sortedWaits)-1])
	}
}

// tookRE finds the duration of a flush in profd's log line.
var tookRE = regexp.MustCompile(` took=(\S+)`)

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
