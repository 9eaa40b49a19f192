package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/sampler"
)

// stormJITSource spins in anonymous executable memory that no record names, for as many
// milliseconds as its first argument says (all the time, or as many milliseconds in every
// 20 as its second says): its samples are unnamed JIT samples, which a capture keeps with
// the time of their first sample.
const stormJITSource = `
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
	double start = now(), end = start + (argc > 1 ? atoi(argv[1]) : 100) / 1000.0;
	/* argv[2]: milliseconds spun in each 20 ms, sleeping the rest; 0 or none: all */
	double spin = (argc > 2 ? atoi(argv[2]) : 0) / 1000.0;
	/* mov rcx, rdi; 1: dec rcx; jnz 1b; ret */
	static const unsigned char loop[] = {0x48, 0x89, 0xf9, 0x48, 0xff, 0xc9, 0x75, 0xfb, 0xc3};
	void *p = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	memcpy(p, loop, sizeof loop);
	void (*f)(long) = (void (*)(long))p;
	for (double period = start; now() < end; period += 0.02) {
		while (now() < end && (spin == 0 || now() < period + spin))
			f(20000);
		if (spin > 0) {
			double left = period + 0.02 - now();
			if (left > 0) {
				struct timespec ts = {0, (long)(left * 1e9)};
				nanosleep(&ts, NULL);
			}
		}
	}
	return 0;
}
`

// stormLauncherSource starts argv[3] perSecond (argv[1]) times a second for argv[2] ms, each
// living 150 to 300 ms and spinning argv[4] ms in every 20 (0: all the time), and prints each child's pid and the CLOCK_MONOTONIC ns just before
// its start; it exits once they all have.
const stormLauncherSource = `
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static long long now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
	long long every = 1000000000LL / atoi(argv[1]), end = now() + atoll(argv[2]) * 1000000LL;
	srand(getpid());
	for (long long next = now(); next < end; next += every) {
		struct timespec at = {next / 1000000000LL, next % 1000000000LL};
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
		char ms[16];
		snprintf(ms, sizeof ms, "%d", 150 + rand() % 150);
		char *args[] = {argv[3], ms, argv[4], NULL};
		long long t0 = now();
		pid_t pid;
		if (posix_spawn(&pid, argv[3], NULL, NULL, args, environ) != 0)
			return 1;
		printf("%d %lld %lld\n", pid, t0, now());
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	while (wait(NULL) > 0)
		;
	return 0;
}
`

// buildStorm compiles stormJITSource, under a name no other test's process has, and
// stormLauncherSource; it returns their paths.
func buildStorm(t testing.TB) (jit, launcher string) {
	t.Helper()
	workloads(t) // gcc, x86-64
	dir := t.TempDir()
	for _, b := range []struct{ name, src string }{{"profd-stormjit", stormJITSource}, {"storm-launcher", stormLauncherSource}} {
		src := filepath.Join(dir, b.name+".c")
		if err := os.WriteFile(src, []byte(b.src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := runAll([]string{"gcc", "-O1", "-o", filepath.Join(dir, b.name), src}); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "profd-stormjit"), filepath.Join(dir, "storm-launcher")
}

// stormProc is one process of a storm: its pid, and CLOCK_MONOTONIC just before it was
// started.
type stormProc struct {
	pid     int
	startNs int64
	execNs  int64 // when posix_spawn returned: the child has exec'd
}

// forkStorm starts perSecond processes of jit a second for dur, each living 150 to 300 ms
// and spinning spinMs in every 20 (0: all the time), and returns them once all have exited.
func forkStorm(t testing.TB, jit, launcher string, perSecond int, dur time.Duration, spinMs int) []stormProc {
	t.Helper()
	out, err := exec.Command(launcher, strconv.Itoa(perSecond), strconv.Itoa(int(dur.Milliseconds())), jit,
		strconv.Itoa(spinMs)).Output()
	if err != nil {
		t.Fatalf("%s: %v", launcher, err)
	}
	var procs []stormProc
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var p stormProc
		if _, err := fmt.Sscan(line, &p.pid, &p.startNs, &p.execNs); err != nil {
			t.Fatalf("launcher's line %q: %v", line, err)
		}
		procs = append(procs, p)
	}
	return procs
}

// stormResult is what a run saw of a storm's processes.
type stormResult struct {
	procs   int
	added   int       // processes the log says were added
	sampled int       // processes whose capture has samples
	first   []float64 // ms from start to the first sample, for each sampled process
	// firstAfterExec: ms from the end of the child's exec (when posix_spawn returned) to its
	// first sample.
	firstAfterExec []float64
	// attachAfterExec: ms from the end of the child's exec to its "target added" line (when
	// its sampling had started), to the log's millisecond.
	attachAfterExec []float64
	// targets and missed are the final summary's counts of processes added and of those
	// found but not added; -1 if absent.
	targets, missed int
	// warnings are the log's warnings but the one each process's unnamed JIT samples draw
	// (the workload writes no symbols).
	warnings []string
}

var addedLine = regexp.MustCompile(`time=(\S+) level=(?:INFO|DEBUG) msg="profd: target added" pid=(\d+) `)

// stormRun runs profd on a storm of perSecond processes a second for dur, stops it, and
// reads what it wrote of each process.
func stormRun(t testing.TB, perSecond int, dur time.Duration, spinMs int, freqHz uint64) stormResult {
	t.Helper()
	testenv.Requires(t, testenv.Root, testenv.BPF, testenv.PerfEvent("cpu-clock"))
	bin, launcher := buildStorm(t)
	d := newDirs(t)
	r := startRun(t, Config{JITImages: []string{bin}, Event: "cpu-clock", Backend: sampler.BackendBPF, FreqHz: freqHz, FifoDir: d.fifo,
		OutDir: d.out, Formats: []Format{FormatCapture}})
	waitFor(t, "profd to start", 10*time.Second, func() bool { return strings.Contains(r.summary.String(), "watching for processes") })
	procs := forkStorm(t, bin, launcher, perSecond, dur, spinMs)
	// Every process has exited: profd is done with the storm once it has retired every
	// target it added (each retirement queues the final capture), or after 10 s.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		logs := r.logs.String()
		if strings.Count(logs, `msg="profd: target added"`) == strings.Count(logs, `msg="profd: target exited"`) {
			break
		}
	}
	r.stop(t)

	summary := r.summary.String()
	res := stormResult{procs: len(procs), targets: lastCounter(summary, "; targets "), missed: lastCounter(summary, "(missed ")}
	for _, l := range strings.Split(r.logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && !strings.Contains(l, "samples in JIT memory have no symbol") {
			res.warnings = append(res.warnings, l)
		}
	}
	// The log's times are wall-clock times, to the millisecond.
	wallMinusMono := time.Now().UnixNano() - monotonicNs()
	added := map[int]int64{}
	for _, m := range addedLine.FindAllStringSubmatch(r.logs.String(), -1) {
		pid, _ := strconv.Atoi(m[2])
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("log time %q: %v", m[1], err)
		}
		added[pid] = at.UnixNano() - wallMinusMono
	}
	for _, p := range procs {
		at, ok := added[p.pid]
		if !ok {
			continue
		}
		res.added++
		res.attachAfterExec = append(res.attachAfterExec, float64(at-p.execNs)/1e6)
		path := outputPath(d, filepath.Base(bin), p.pid, FormatCapture)
		if !fileExists(path) {
			t.Logf("pid %d: added, and no capture", p.pid)
			continue
		}
		c := readCapture(t, path)
		var first int64
		for _, u := range c.Unnamed {
			if first == 0 || u.FirstNs < first {
				first = u.FirstNs
			}
		}
		if jit, outside := c.TotalSamples(); jit+outside == 0 && first == 0 {
			continue
		}
		res.sampled++
		if first != 0 {
			res.first = append(res.first, float64(first-p.startNs)/1e6)
			res.firstAfterExec = append(res.firstAfterExec, float64(first-p.execNs)/1e6)
		}
	}
	return res
}

// percentile is the p-th percentile (0..1) of xs, which it sorts; 0 for none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[int(p*float64(len(xs)-1))]
}

// TestForkStorm starts 100 processes of a --jit-image a second for 5 s, each living 150 to
// 300 ms and spinning 1 ms in every 20 (so that the storm alone does not saturate the
// machine: some 22 live at once): at least 99 % of them are added and have samples in their
// captures, the summary counts the targets added and those missed, consistently with what
// the test saw, and no process draws a warning about its setup (one that exited first is
// counted, not warned about).
func TestForkStorm(t *testing.T) {
	res := stormRun(t, 100, 5*time.Second, 1, 4999)
	t.Logf("%d processes: %d added, %d sampled; summary: %d targets, %d missed; added a median %.1f ms after exec; first sample median %.1f ms (%.1f ms after exec)",
		res.procs, res.added, res.sampled, res.targets, res.missed, percentile(res.attachAfterExec, 0.5), percentile(res.first, 0.5), percentile(res.firstAfterExec, 0.5))
	if res.procs < 400 {
		t.Fatalf("only %d processes started in 5 s", res.procs)
	}
	if want := res.procs * 99 / 100; res.added < want || res.sampled < want {
		t.Errorf("%d of %d processes added and %d sampled, want at least %d", res.added, res.procs, res.sampled, want)
	}
	if len(res.warnings) > 0 {
		t.Errorf("%d warnings, the first: %s", len(res.warnings), res.warnings[0])
	}
	if res.missed < 0 || res.targets < 0 {
		t.Fatalf("the summary does not count the targets added and missed")
	}
	// The image is the test's own: every target the summary counts is one of its processes.
	if res.targets != res.added || res.missed > res.procs-res.added {
		t.Errorf("summary: %d targets added, %d missed; the test saw %d of its %d processes added",
			res.targets, res.missed, res.added, res.procs)
	}
}

// BenchmarkForkStorm is how the daemon follows 100 processes of a --jit-image a second for
// 3 s, each living 150 to 300 ms and spinning all the time (spin=all: some 22 spin at once,
// on every CPU there is) or 1 ms in every 20 (spin=5%), sampled at 999 Hz or 4999 Hz: the
// share added (added-%), the adds per second, and the time from just before each process's
// start (its parent's posix_spawn) to its first sample, median and 90th percentile
// (first-sample-ms), the median from the end of its exec (exec-first-sample-ms), and from
// there to its sampling's start, to the millisecond (exec-added-ms, median and 90th
// percentile). A sample is due every 1/freq of CPU time the process gets, however soon it
// is added.
func BenchmarkForkStorm(b *testing.B) {
	for _, bc := range []struct {
		name   string
		spinMs int
		freqHz uint64
	}{{"spin=all", 0, 0}, {"spin=5%", 1, 0}, {"spin=5%/4999Hz", 1, 4999}} {
		b.Run(bc.name, func(b *testing.B) {
			const perSecond, dur = 100, 3 * time.Second
			var added, procs float64
			var first, afterExec, attach []float64
			for i := 0; i < b.N; i++ {
				res := stormRun(b, perSecond, dur, bc.spinMs, bc.freqHz)
				added += float64(res.added)
				procs += float64(res.procs)
				first = append(first, res.first...)
				afterExec = append(afterExec, res.firstAfterExec...)
				attach = append(attach, res.attachAfterExec...)
			}
			b.ReportMetric(100*added/procs, "added-%")
			b.ReportMetric(added/float64(b.N)/dur.Seconds(), "adds/s")
			b.ReportMetric(percentile(first, 0.5), "first-sample-ms")
			b.ReportMetric(percentile(first, 0.9), "first-sample-p90-ms")
			b.ReportMetric(percentile(afterExec, 0.5), "exec-first-sample-ms")
			b.ReportMetric(percentile(attach, 0.5), "exec-added-ms")
			b.ReportMetric(percentile(attach, 0.9), "exec-added-p90-ms")
		})
	}
}

// BenchmarkAllChurn is profd --all (the default --group-by image) beside a loop of short
// processes, /bin/true as fast as the loop starts them, for 10 s: the daemon's CPU for each
// target it added and retired (cpu-ms/target), and the targets a second. It is what a
// host's build or script storm costs profd. The loop is a shell's (each child a fork and an
// exec: two targets), or a process with 5 000 executable mappings (a large runtime, a build
// agent) that posix_spawns each: a loop started before profd, whose mappings the records
// did not see made, so each child's are laid out over them.
func BenchmarkAllChurn(b *testing.B) {
	testenv.Requires(b, testenv.Root, testenv.BPF, testenv.PerfEvent("cpu-clock"))
	b.Run("shell", func(b *testing.B) { allChurn(b, "sh", "-c", "while :; do /bin/true; done") })
	b.Run("parent of 5000 mappings", func(b *testing.B) {
		testenv.Requires(b, testenv.Tool("python3"))
		code := filepath.Join(b.TempDir(), "code")
		if err := os.WriteFile(code, make([]byte, 4<<12), 0o644); err != nil {
			b.Fatal(err)
		}
		allChurn(b, "python3", "-c", manyMappingsLoop, code)
	})
}

// manyMappingsLoop maps pages of the file its argument names, executable, as 5 000
// mappings (the offsets alternate, so that the kernel merges none), then starts /bin/true
// again and again.
const manyMappingsLoop = `import mmap, os, sys
f = open(sys.argv[1], 'rb')
keep = [mmap.mmap(f.fileno(), 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC, offset=(i % 2) * 8192) for i in range(5000)]
while True:
    os.waitpid(os.posix_spawn('/bin/true', ['/bin/true'], {}), 0)
`

func allChurn(b *testing.B, loopArgv ...string) {
	const dur = 10 * time.Second
	var cpu time.Duration
	targets := 0
	for b.Loop() {
		d := newDirs(b)
		loop := startChild(b, nil, loopArgv...)
		time.Sleep(300 * time.Millisecond)
		before := selfCPU(b)
		r := startRun(b, Config{All: true, Event: "cpu-clock", FreqHz: 999, FifoDir: d.fifo, OutDir: d.out,
			Formats: []Format{FormatCapture}, GroupBy: GroupByImage, Duration: dur})
		r.wait(b, dur+30*time.Second)
		cpu += selfCPU(b) - before
		loop.cmd.Process.Kill()
		<-loop.done
		n := lastCounter(r.summary.String(), "; targets ")
		if n < 100 {
			b.Fatalf("%d targets in %v: the loop did not run\n%s", n, dur, r.summary.String())
		}
		targets += n
	}
	b.ReportMetric(float64(cpu.Milliseconds())/float64(targets), "cpu-ms/target")
	b.ReportMetric(float64(targets)/float64(b.N)/dur.Seconds(), "targets/s")
}

// selfCPU is the CPU time the test's process has used, user and system.
func selfCPU(b testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
