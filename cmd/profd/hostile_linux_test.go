package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/symtest"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

// writeFIFO writes data to the FIFO at path with blocking writes, as a JIT that does not
// mind waiting would; it stops early when the reader goes away.
func writeFIFO(path string, data []byte) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, 1<<20)
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// startTestjit starts the project's test JIT writing its symbols to the FIFO in fifoDir.
func startTestjit(t testing.TB, fifoDir string) *exec.Cmd {
	t.Helper()
	_, testjit := binaries(t)
	c := exec.Command(testjit, "-d", fifoDir, "-m", "100000", "-w", "10000")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// BenchmarkSymbolIngest measures how many symbol records per second profd applies from one
// target's FIFO while it samples another target (the test JIT, at 999 Hz): code loads over
// 256 addresses, each replacing live code (the records that cost most).
func BenchmarkSymbolIngest(b *testing.B) {
	testenv.Requires(b, testenv.Root)
	const records = 200000
	for i := 0; i < b.N; i++ {
		base := b.TempDir()
		fifoDir := filepath.Join(base, "fifo")
		jit := startTestjit(b, fifoDir)
		target := testenv.Sleeper(b)
		p := startBenchProfd(b, "--pid", strconv.Itoa(jit.Process.Pid)+","+strconv.Itoa(target.Process.Pid),
			"--event", "cpu-clock", "--fifo-dir", fifoDir, "--out", base)
		p.waitUntil(b, "attach", func(p *benchProfd) bool { return p.attached })
		time.Sleep(500 * time.Millisecond)
		data := symtest.ChurnStream(b, uint32(target.Process.Pid), records, 256, false)
		before := p.flush(b)
		_ = before
		p.mu.Lock()
		symbols0 := p.symbols
		p.mu.Unlock()
		start := time.Now()
		if err := writeFIFO(filepath.Join(fifoDir, strconv.Itoa(target.Process.Pid)+".map"), data); err != nil {
			b.Fatal(err)
		}
		for {
			p.flush(b)
			p.mu.Lock()
			done := p.symbols-symbols0 >= records
			p.mu.Unlock()
			if done {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.ReportMetric(records/time.Since(start).Seconds(), "records/s")
	}
}

// BenchmarkPerfMapIngest measures profd's CPU per perf-map line it applies: a 200 000-line
// /tmp/perf-PID.map over 2 000 addresses of a live target's mapped code (profd reads each
// line's code bytes from the process, as for a JIT's), written at once, as profd meets the
// map of a JIT that ran long before it started.
func BenchmarkPerfMapIngest(b *testing.B) {
	testenv.Requires(b, testenv.Root)
	const lines, addrs = 200000, 2000
	for i := 0; i < b.N; i++ {
		base := b.TempDir()
		target := testenv.Sleeper(b)
		pid := target.Process.Pid
		text := largestText(b, uint32(pid))
		step := max(1, (text.End-text.Start-64)/addrs)
		var m bytes.Buffer
		for l := range lines {
			fmt.Fprintf(&m, "%x 40 LazyCompile:*fn%d /app/module%d.js:%d\n", text.Start+uint64(l%addrs)*step, l, l%500, l%9000)
		}
		mapPath := fmt.Sprintf("/tmp/perf-%d.map", pid)
		b.Cleanup(func() { os.Remove(mapPath) })
		p := startBenchProfd(b, "--pid", strconv.Itoa(pid), "--event", "cpu-clock", "--fifo-dir", filepath.Join(base, "fifo"),
			"--out", base, "--max-record-rate", "100000000")
		p.waitUntil(b, "attach", func(p *benchProfd) bool { return p.attached })
		start, cpu0 := time.Now(), cpuNs(b, p.cmd.Process.Pid)
		if err := os.WriteFile(mapPath, m.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
		for p.flush(b); ; p.flush(b) {
			p.mu.Lock()
			done := p.symbols >= lines
			p.mu.Unlock()
			if done {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		cpu := cpuNs(b, p.cmd.Process.Pid) - cpu0
		b.ReportMetric(float64(cpu)/1e3/lines, "cpu-us/line")
		b.ReportMetric(lines/time.Since(start).Seconds(), "lines/s")
	}
}

// largestText is the largest executable file mapping of process pid (its C library's, for
// a sleep), once the process has one of 64 KiB (a process just started may not have
// exec'd yet).
func largestText(b *testing.B, pid uint32) procfs.Mapping {
	b.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		maps, err := procfs.ReadMaps(pid)
		if err != nil {
			b.Fatal(err)
		}
		var text procfs.Mapping
		for _, m := range maps {
			if m.Executable() && strings.HasPrefix(m.Path, "/") && m.End-m.Start > text.End-text.Start {
				text = m
			}
		}
		if text.End-text.Start >= 1<<16 {
			return text
		}
		if time.Now().After(deadline) {
			b.Fatalf("no executable mapping of 64 KiB in %d: %+v", pid, maps)
		}
	}
}

// BenchmarkStopWithHostilePipe measures the time from SIGTERM to profd's exit when one
// target has filled its FIFO with records that each end code and keeps writing, and has a
// 100 000-line perf map, while the test JIT is profiled beside it.
func BenchmarkStopWithHostilePipe(b *testing.B) {
	testenv.Requires(b, testenv.Root)
	for i := 0; i < b.N; i++ {
		base := b.TempDir()
		fifoDir := filepath.Join(base, "fifo")
		jit := startTestjit(b, fifoDir)
		target := testenv.Sleeper(b)
		pid := target.Process.Pid
		mapPath := "/tmp/perf-" + strconv.Itoa(pid) + ".map"
		if err := os.WriteFile(mapPath, symtest.PerfMapLines(100000, 1024), 0o644); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.Remove(mapPath) })
		p := startBenchProfd(b, "--pid", strconv.Itoa(jit.Process.Pid)+","+strconv.Itoa(pid),
			"--event", "cpu-clock", "--fifo-dir", fifoDir, "--out", base)
		p.waitUntil(b, "attach", func(p *benchProfd) bool { return p.attached })
		time.Sleep(500 * time.Millisecond)
		data := symtest.ChurnStream(b, uint32(pid), 400000, 64, true)
		wrote := make(chan error, 1)
		go func() { wrote <- writeFIFO(filepath.Join(fifoDir, strconv.Itoa(pid)+".map"), data) }()
		time.Sleep(time.Second) // the pipe is full by now, and stays full
		start := time.Now()
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
		b.ReportMetric(time.Since(start).Seconds(), "s/stop")
		<-wrote
	}
}

// TestGrowingJitdumpRSS: a target's jitdump file grows without end (20 000 code loads a
// second at new addresses, each with 256 code bytes and a line table: 6 times the budget
// by the end) for 30 s. profd's memory stays within the target's symbol budget plus a
// constant, and so does its capture.
func TestGrowingJitdumpRSS(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	const budgetMB = 64
	base := t.TempDir()
	jitdumpDir := filepath.Join(base, "jitdumpdir")
	target := exec.Command("sleep", "600")
	target.Env = append(os.Environ(), "JITDUMPDIR="+jitdumpDir)
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Process.Kill(); target.Wait() })
	pid := target.Process.Pid
	dumpDir := filepath.Join(jitdumpDir, ".debug", "jit", "grow")
	if err := os.MkdirAll(dumpDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startBenchProfd(t, "--pid", strconv.Itoa(pid), "--event", "cpu-clock", "--fifo-dir", filepath.Join(base, "fifo"),
		"--out", base, "--max-symbol-mb", strconv.Itoa(budgetMB))
	p.waitUntil(t, "attach", func(p *benchProfd) bool { return p.attached })
	rss0 := statusKB(t, p.cmd.Process.Pid, "VmRSS")

	f, err := os.Create(filepath.Join(dumpDir, "jit-"+strconv.Itoa(pid)+".dump"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := jitdumptest.NewWriter(bw, jitmap.JitdumpHeader{Version: 1, ElfMach: 62, Pid: uint32(pid), TimestampNs: 1})
	if err != nil {
		t.Fatal(err)
	}
	code := make([]byte, 256)
	var written int64
	var maxRSS int
	nextLook := time.Now()
	for i, end := 0, time.Now().Add(30*time.Second); time.Now().Before(end); i++ {
		addr := 0x7c0000000000 + uint64(i)*256
		lines := []codeobj.LineEntry{{Addr: addr, File: "/src/grow.js", Line: uint32(i)}, {Addr: addr + 64, File: "/src/grow.js", Line: uint32(i + 1)}}
		if err := w.CodeLoad(&jitmap.CodeLoad{Pid: uint32(pid), Tid: uint32(pid), Object: codeobj.Object{
			Name: "grow_" + strconv.Itoa(i), Addr: addr, Size: 256, Code: code, Lines: lines, LoadNs: int64(i + 2),
			CodeIndex: uint64(i + 1)}}); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			bw.Flush()
			time.Sleep(50 * time.Millisecond)
		}
		if now := time.Now(); !now.Before(nextLook) {
			nextLook = now.Add(500 * time.Millisecond)
			maxRSS = max(maxRSS, statusKB(t, p.cmd.Process.Pid, "VmRSS"))
		}
	}
	bw.Flush()
	if st, err := f.Stat(); err == nil {
		written = st.Size()
	}
	p.flush(t)
	maxRSS = max(maxRSS, statusKB(t, p.cmd.Process.Pid, "VmRSS"))
	p.mu.Lock()
	over := p.overBudget
	p.mu.Unlock()
	capture, err := os.Stat(filepath.Join(base, "sleep-"+strconv.Itoa(pid)+".profd"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("jitdump grew to %d MB; profd RSS %d MB at start, at most %d MB; capture %d MB; %d records over budget",
		written>>20, rss0>>10, maxRSS>>10, capture.Size()>>20, over)
	if over == 0 {
		t.Errorf("no record counted over budget after %d MB of symbols", written>>20)
	}
	// What the budget holds, twice over (the Go heap grows to twice what it keeps before it
	// collects), plus what profd holds without any symbols and a margin for the decoders.
	if limit := rss0 + 2*budgetMB<<10 + 64<<10; maxRSS > limit {
		t.Errorf("profd RSS reached %d MB, want at most %d MB", maxRSS>>10, limit>>10)
	}
	if capture.Size() > budgetMB<<20 {
		t.Errorf("capture %d MB, want at most the %d MB budget", capture.Size()>>20, budgetMB)
	}
}
