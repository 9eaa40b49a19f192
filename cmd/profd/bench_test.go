package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

// benchProfd is the profd binary running for a benchmark, with its summaries parsed.
type benchProfd struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	// from the counters line of the latest summary
	flushes, jitSamples, outside, symbols, overBudget int
	attached                                          bool
	changed                                           chan struct{}
}

var countersRE = regexp.MustCompile(`samples (\d+) in JIT code, (\d+) outside;.*symbols (\d+) .*over budget (\d+)\);.* flush (\d+)`)

func startBenchProfd(b testing.TB, args ...string) *benchProfd {
	b.Helper()
	profd, _ := binaries(b)
	p := &benchProfd{cmd: exec.Command(profd, append(args, "--log-level", "error")...), changed: make(chan struct{}, 1)}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if strings.Contains(line, "attached to pid") {
				p.attached = true
			}
			if m := countersRE.FindStringSubmatch(line); m != nil {
				p.jitSamples, _ = strconv.Atoi(m[1])
				p.outside, _ = strconv.Atoi(m[2])
				p.symbols, _ = strconv.Atoi(m[3])
				p.overBudget, _ = strconv.Atoi(m[4])
				p.flushes, _ = strconv.Atoi(m[5])
			}
			p.mu.Unlock()
			select {
			case p.changed <- struct{}{}:
			default:
			}
		}
	}()
	b.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
	})
	return p
}

// waitUntil waits for cond on the parsed state.
func (p *benchProfd) waitUntil(b testing.TB, what string, cond func(p *benchProfd) bool) {
	b.Helper()
	deadline := time.After(60 * time.Second)
	for {
		p.mu.Lock()
		ok := cond(p)
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-p.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			b.Fatalf("timed out waiting for %s", what)
		}
	}
}

// flush asks for a flush and waits for its summary; it returns the samples counted so far.
func (p *benchProfd) flush(b testing.TB) (samples int) {
	b.Helper()
	p.mu.Lock()
	before := p.flushes
	p.mu.Unlock()
	p.cmd.Process.Signal(syscall.SIGUSR1)
	p.waitUntil(b, "a flush", func(p *benchProfd) bool { return p.flushes > before })
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jitSamples + p.outside
}

// cpuNs is the CPU time pid's threads have used, from schedstat (nanoseconds).
func cpuNs(b testing.TB, pid int) int64 {
	b.Helper()
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, task := range tasks {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		if f := strings.Fields(string(data)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += n
		}
	}
	return total
}

func statusKB(b testing.TB, pid int, field string) int {
	b.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// BenchmarkDaemonCPUPerSamples measures the profd binary's own CPU time per 1000 samples
// while it profiles a busy testjit at 999 Hz for 3 s per iteration (SIGUSR1 flushes at both
// ends of the window; their cost is included), without call stacks and with --stacks.
func BenchmarkDaemonCPUPerSamples(b *testing.B) {
	testenv.Requires(b, testenv.Root)
	for _, run := range []struct {
		name, backend string
		stacks        bool
	}{{"bpf", "bpf", false}, {"bpf-stacks", "bpf", true}, {"ring", "ring", false}, {"ring-stacks", "ring", true}} {
		backend := run.backend
		b.Run(run.name, func(b *testing.B) {
			_, testjit := binaries(b)
			base := b.TempDir()
			fifoDir := filepath.Join(base, "fifo")
			jit := exec.Command(testjit, "-d", fifoDir, "-m", "100000", "-w", "10000")
			if err := jit.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { jit.Process.Kill(); jit.Wait() }()
			p := startBenchProfd(b, "--pid", strconv.Itoa(jit.Process.Pid), "--event", "cpu-clock",
				"--backend", backend, "--fifo-dir", fifoDir, "--out", base, "--stacks="+strconv.FormatBool(run.stacks))
			p.waitUntil(b, "attach", func(p *benchProfd) bool { return p.attached })
			// A warm-up window: the first flush that meets samples in a file reads its
			// symbols once for the run (elfsym's BenchmarkColdFile measures that).
			time.Sleep(300 * time.Millisecond)
			p.flush(b)
			time.Sleep(time.Second)
			var cpu, samples int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s0, c0 := p.flush(b), cpuNs(b, p.cmd.Process.Pid)
				time.Sleep(3 * time.Second)
				s1, c1 := p.flush(b), cpuNs(b, p.cmd.Process.Pid)
				cpu += c1 - c0
				samples += int64(s1 - s0)
			}
			b.StopTimer()
			if samples == 0 {
				b.Fatal("no samples")
			}
			b.ReportMetric(float64(cpu)/1e6/(float64(samples)/1000), "cpu-ms/1000samples")
			b.ReportMetric(float64(samples)/float64(b.N)/3, "samples/s")
		})
	}
}

// BenchmarkRSS100kSymbols feeds 100 000 jitdump code loads (64 code bytes and a line each)
// through the FIFO of a live target and reports the profd binary's RSS, before and after a
// flush that writes every output for them.
func BenchmarkRSS100kSymbols(b *testing.B) {
	testenv.Requires(b, testenv.Root)
	const symbols = 100000
	for i := 0; i < b.N; i++ {
		base := b.TempDir()
		fifoDir := filepath.Join(base, "fifo")
		target := exec.Command("sleep", "600")
		if err := target.Start(); err != nil {
			b.Fatal(err)
		}
		pid := target.Process.Pid
		p := startBenchProfd(b, "--pid", strconv.Itoa(pid), "--event", "cpu-clock", "--fifo-dir", fifoDir, "--out", base)
		p.waitUntil(b, "attach", func(p *benchProfd) bool { return p.attached })
		rss0 := statusKB(b, p.cmd.Process.Pid, "VmRSS")

		cpu0 := cpuNs(b, p.cmd.Process.Pid)
		writeLoads(b, filepath.Join(fifoDir, strconv.Itoa(pid)+".map"), uint32(pid), symbols)
		// The pipe took every byte; wait until profd is idle again, having decoded them all.
		for last := cpuNs(b, p.cmd.Process.Pid); ; {
			time.Sleep(100 * time.Millisecond)
			now := cpuNs(b, p.cmd.Process.Pid)
			if now-last < 2e6 {
				break
			}
			last = now
		}
		ingest := cpuNs(b, p.cmd.Process.Pid) - cpu0
		rssLoaded := statusKB(b, p.cmd.Process.Pid, "VmRSS")
		flushStart := time.Now()
		p.flush(b)
		flushTook := time.Since(flushStart)
		p.mu.Lock()
		got := p.symbols
		p.mu.Unlock()
		if got != symbols {
			b.Fatalf("profd counted %d symbols, want %d", got, symbols)
		}
		rss := statusKB(b, p.cmd.Process.Pid, "VmRSS")
		hwm := statusKB(b, p.cmd.Process.Pid, "VmHWM")
		b.ReportMetric(float64(rss0)/1024, "MB-rss-start")
		b.ReportMetric(float64(rssLoaded)/1024, "MB-rss-100k")
		b.ReportMetric(float64(rss)/1024, "MB-rss-after-flush")
		b.ReportMetric(float64(hwm)/1024, "MB-rss-peak")
		b.ReportMetric(float64(ingest)/symbols, "cpu-ns/symbol")
		b.ReportMetric(float64(flushTook.Milliseconds()), "ms/flush-100k")
		target.Process.Kill()
		target.Wait()
	}
}

// writeLoads writes n CODE_LOADs as one jitdump stream to a FIFO, as a JIT would.
func writeLoads(b *testing.B, path string, pid uint32, n int) {
	b.Helper()
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	w, err := jitdumptest.NewWriter(f, jitmap.JitdumpHeader{Version: 1, ElfMach: 62, Pid: pid, TimestampNs: 1})
	if err != nil {
		b.Fatal(err)
	}
	code := make([]byte, 64)
	for i := range code {
		code[i] = 0x90 // nop
	}
	code[63] = 0xC3 // ret
	var name [32]byte
	for i := 0; i < n; i++ {
		addr := uint64(0x7f0000000000) + uint64(i)*64
		nm := strconv.AppendInt(append(name[:0], "jit_fn_"...), int64(i), 10)
		load := &jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{
			Name: string(nm), Addr: addr, Size: 64, Code: code, LoadNs: int64(i + 2), CodeIndex: uint64(i + 1),
			Lines: []codeobj.LineEntry{{Addr: addr, File: "jit.c", Line: uint32(i%1000 + 1)}}}}
		if err := w.CodeLoad(load); err != nil {
			b.Fatal(err)
		}
	}
}
