package daemon

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

func TestMain(m *testing.M) {
	// Processes this package starts read profd.pid, which names this test binary while an
	// in-process run is active, and send it SIGUSR1. A request that arrives after a run
	// stopped listening must not kill the test binary (Go's default for SIGUSR1), so one
	// channel keeps listening for the whole binary; run's own channel works as before.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGUSR1)
	code := m.Run()
	for _, dir := range []string{builtDir, reoptDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// workloads compiles jit/testjit.c and examples/workload/hot.c (to IR for lli-14) once per
// test binary, returning their paths.
func workloads(t testing.TB) (testjit, hotLL string) {
	t.Helper()
	testenv.Requires(t, testenv.Tool("gcc"), testenv.Tool("clang-14"))
	if runtime.GOARCH != "amd64" {
		t.Skip("testjit emits x86-64 code")
	}
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "profd-daemon-test-")
		if buildErr != nil {
			return
		}
		buildErr = runAll(
			[]string{"gcc", "-std=c99", "-O1", "-D_GNU_SOURCE", "-o", filepath.Join(builtDir, "testjit"), "../jit/testjit.c"},
			[]string{"clang-14", "-O2", "-g", "-fdebug-info-for-profiling", "-S", "-emit-llvm",
				"-o", filepath.Join(builtDir, "hot.ll"), "../examples/workload/hot.c"})
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(builtDir, "testjit"), filepath.Join(builtDir, "hot.ll")
}

// runAll runs each command in turn (a build step), stopping at the first that fails with its
// command line and output.
func runAll(argvs ...[]string) error {
	for _, argv := range argvs {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
		}
	}
	return nil
}

// dirs is one run's private directories.
type dirs struct {
	fifo, jitdump, out string
}

func newDirs(t testing.TB) dirs {
	base := t.TempDir()
	d := dirs{fifo: filepath.Join(base, "fifo"), jitdump: filepath.Join(base, "jitdump"), out: filepath.Join(base, "out")}
	for _, p := range []string{d.jitdump, d.out} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// profdRun is an in-process daemon run.
type profdRun struct {
	summary testenv.SyncBuffer
	logs    testenv.SyncBuffer
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
}

// startRun validates cfg and starts run in the background; the test's cleanup stops it.
func startRun(t testing.TB, cfg Config) *profdRun {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r := &profdRun{done: make(chan struct{})}
	logger := slog.New(slog.NewTextHandler(&r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.err = run(ctx, cfg, logger, &r.summary)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// wait waits for run to return on its own.
func (r *profdRun) wait(t testing.TB, timeout time.Duration) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		r.cancel()
		<-r.done
		t.Fatalf("profd did not stop by itself within %v\nsummary:\n%s\nlogs:\n%s", timeout, r.summary.String(), r.logs.String())
	}
	if r.err != nil {
		t.Fatalf("run: %v\nlogs:\n%s", r.err, r.logs.String())
	}
}

// stop cancels run (what SIGTERM does) and waits for it.
func (r *profdRun) stop(t testing.TB) {
	t.Helper()
	r.cancel()
	<-r.done
	if r.err != nil {
		t.Fatalf("run: %v\nlogs:\n%s", r.err, r.logs.String())
	}
}

// waitAdded waits until run has added target pid (its sampler samples it), at most
// timeout.
func (r *profdRun) waitAdded(t testing.TB, pid int, timeout time.Duration) {
	t.Helper()
	added := `msg="profd: target added" pid=` + strconv.Itoa(pid) + " "
	waitFor(t, "profd to add target "+strconv.Itoa(pid), timeout, func() bool {
		return strings.Contains(r.logs.String(), added)
	})
}

func (r *profdRun) running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// flushes counts the summaries printed so far (final ones included).
func (r *profdRun) flushes() int {
	return strings.Count(r.summary.String(), "profd flush #") + strings.Count(r.summary.String(), "profd final flush #")
}

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// child is a started process whose stdout is collected.
type child struct {
	cmd     *exec.Cmd
	started time.Time
	out     testenv.SyncBuffer
	done    chan struct{}
	err     error
	ended   time.Time // when Wait returned; read after done is closed
}

func startChild(t testing.TB, env []string, argv ...string) *child {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	return startCmd(t, cmd)
}

// startGated starts cmd with a pipe on its stdin, for a program that begins its work when a
// byte comes there: written once profd (and perf) sample it, they see the same span of it.
func startGated(t testing.TB, cmd *exec.Cmd) (c *child, start io.WriteCloser) {
	t.Helper()
	start, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	return startCmd(t, cmd), start
}

// startCmd starts cmd, collecting its output; the test's cleanup kills it.
func startCmd(t testing.TB, cmd *exec.Cmd) *child {
	t.Helper()
	c := &child{cmd: cmd, done: make(chan struct{})}
	c.cmd.Stdout = &c.out
	c.cmd.Stderr = &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.started = time.Now()
	go func() {
		defer close(c.done)
		c.err = c.cmd.Wait()
		c.ended = time.Now()
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// endedAt is when c was seen to exit; zero while it runs.
func (c *child) endedAt() time.Time {
	select {
	case <-c.done:
		return c.ended
	default:
		return time.Time{}
	}
}

// removeRuntimeFiles removes what the JIT runtime c ran leaves in /tmp, but what a later
// process of its pid wrote (testenv.RemoveRuntimeFiles).
func (c *child) removeRuntimeFiles() { testenv.RemoveRuntimeFiles(c.pid(), c.endedAt()) }

func (c *child) wait(t testing.TB, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not finish within %v\n%s", c.cmd.Path, timeout, c.out.String())
	}
	if c.err != nil {
		t.Fatalf("%s: %v\n%s", c.cmd.Path, c.err, c.out.String())
	}
}

// perfRun is `perf record -k mono -e cpu-clock:u` of one process, for comparison.
type perfRun struct {
	*child
	data string
}

// perfAvailable reports whether perf can record here; the comparison is skipped without it.
func perfAvailable() bool {
	_, err := exec.LookPath("perf")
	return err == nil
}

// startPerf records pid at freqHz with the clock jitdump records use, with perf record's
// extra arguments (-g: call chains), and returns once perf's events are enabled. perf record
// -p reads the process's mappings, then enables its events: it opens them disabled here and
// is told to enable them through its control FIFO, whose acknowledgement says it has. What
// the process maps between the two perf never learns of (see waitCodeMapped).
func startPerf(t testing.TB, pid int, freqHz int, extra ...string) *perfRun {
	t.Helper()
	dir := t.TempDir()
	data, ctl, ack := filepath.Join(dir, "perf.data"), filepath.Join(dir, "ctl"), filepath.Join(dir, "ack")
	for _, fifo := range []string{ctl, ack} {
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := &perfRun{data: data}
	args := append([]string{"perf", "record", "-q", "-k", "mono", "-e", "cpu-clock:u",
		"-F", strconv.Itoa(freqHz), "-p", strconv.Itoa(pid), "-o", data,
		"-D", "-1", "--control", "fifo:" + ctl + "," + ack}, extra...)
	p.child = startChild(t, nil, args...)
	// Opened for reading and writing, a FIFO's open does not wait for perf's.
	ctlFile, err := os.OpenFile(ctl, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctlFile.Close()
	ackFile, err := os.OpenFile(ack, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ackFile.Close()
	if _, err := ctlFile.WriteString("enable\n"); err != nil {
		t.Fatal(err)
	}
	acked := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(ackFile).ReadString('\n')
		if err == nil && line != "ack\n" {
			err = fmt.Errorf("perf answered %q", line)
		}
		acked <- err
	}()
	// A machine busy with other tests' I/O has taken over 10 s to get there.
	select {
	case err := <-acked:
		if err != nil {
			t.Fatalf("perf record's control FIFO: %v", err)
		}
	case <-p.done:
		t.Fatalf("perf record ended before it started recording: %v\n%s", p.err, p.out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("perf record did not enable its events in 60 s\n%s", p.out.String())
	}
	return p
}

// waitCodeMapped waits until pid has mapped anonymous executable memory (a JIT's code) and,
// with dump, a jitdump file. Runtimes map them early in their start-up, about when perf
// would attach, and a mapping made while perf starts is one it never learns of: every sample
// there would have no object.
func waitCodeMapped(t testing.TB, pid int, dump bool) {
	t.Helper()
	dumpName := regexp.MustCompile(`/jit-\d+\.dump$`)
	waitFor(t, "the JIT's code mapped", 30*time.Second, func() bool {
		maps, err := procfs.ReadMaps(uint32(pid))
		if err != nil {
			t.Fatalf("pid %d: %v", pid, err)
		}
		anon, dumped := false, !dump
		for _, m := range maps {
			if m.Executable() {
				anon = anon || m.Anonymous()
				dumped = dumped || dumpName.MatchString(m.Path)
			}
		}
		return anon && dumped
	})
}

// finish waits for perf to end (it ends with its target) or stops it with SIGINT.
func (p *perfRun) finish(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Signal(os.Interrupt)
		<-p.done
	}
}

// script waits for perf to end and runs perf script with args on its recording, after
// perf inject --jit (once per recording) when jit is set, which names the code of jitdump
// files.
func (p *perfRun) script(t testing.TB, jit bool, args ...string) []byte {
	t.Helper()
	p.finish(t)
	in := p.data
	if jit {
		in = p.data + ".jit"
		if !fileExists(in) {
			if out, err := exec.Command("perf", "inject", "--jit", "-i", p.data, "-o", in).CombinedOutput(); err != nil {
				os.Remove(in)
				t.Fatalf("perf inject --jit: %v\n%s", err, out)
			}
		}
	}
	out, err := exec.Command("perf", append([]string{"script", "-i", in}, args...)...).Output()
	if err != nil {
		t.Fatalf("perf script: %v", err)
	}
	return out
}

// perfSample is one sample of perf script: its time in ns, ip, symbol ("[unknown]" when
// perf could not name it) and object (the file mapped there, "//anon", a perf map, ...).
type perfSample struct {
	timeNs int64
	ip     uint64
	sym    string
	dso    string
	mapped string // in a recording perf inject --jit rewrote, the object before it did
}

// perfScriptLine is `perf script -F pid,time,ip,sym,dso --ns`: symbol names may hold spaces
// and parentheses; the object comes last, in parentheses.
var perfScriptLine = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\.(\d+):\s+([0-9a-f]+)\s+(.*)\s+\(([^()]*)\)\s*$`)

// samples runs perf script (see script) and returns pid's user-space samples.
func (p *perfRun) samples(t testing.TB, pid int, jit bool) []perfSample {
	t.Helper()
	// -G: a recording with call chains gives the leaf on the sample's line too.
	out := p.script(t, jit, "-G", "-F", "pid,time,ip,sym,dso", "--ns")
	var ss []perfSample
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := perfScriptLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if got, err := strconv.Atoi(m[1]); err != nil || got != pid {
			continue
		}
		s, err1 := strconv.ParseInt(m[2], 10, 64)
		ns, err2 := strconv.ParseInt(m[3], 10, 64)
		ip, err3 := strconv.ParseUint(m[4], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		ss = append(ss, perfSample{timeNs: s*1e9 + ns, ip: ip, sym: strings.TrimSpace(m[5]), dso: m[6]})
	}
	if len(ss) == 0 {
		t.Fatalf("perf recorded no samples of pid %d", pid)
	}
	if jit {
		// perf inject --jit lays each jitdump record's code over whatever was mapped at its
		// address when the record is later than that mapping: V8's records of the builtins
		// embedded in node's executable win or lose depending on whether perf attached
		// before node wrote them. The recording as made says what was mapped.
		mapped := map[[2]uint64]string{}
		for _, r := range p.samples(t, pid, false) {
			mapped[[2]uint64{uint64(r.timeNs), r.ip}] = r.dso
		}
		for i := range ss {
			ss[i].mapped = mapped[[2]uint64{uint64(ss[i].timeNs), ss[i].ip}]
		}
	}
	return ss
}

// perfFrame is one frame of a perf script call chain: its symbol ("[unknown]" when perf
// could not name it) and object.
type perfFrame struct{ sym, dso string }

// perfStack is one sample of a recording with call chains: its thread and its frames, leaf
// first.
type perfStack struct {
	tid    int
	frames []perfFrame
}

var (
	// perfFrameLine is a frame line of `perf script -F pid,tid,ip,sym,dso` with call chains,
	// perfStackHead the line that opens a sample.
	perfFrameLine = regexp.MustCompile(`^\s+([0-9a-f]+)\s+(.*)\s+\(([^()]*)\)\s*$`)
	perfStackHead = regexp.MustCompile(`^\s*(\d+)/(\d+)\s*$`)
)

// stacks runs perf script (see script) on a recording made with -g and returns pid's samples
// with their call chains.
func (p *perfRun) stacks(t testing.TB, pid int, jit bool) []perfStack {
	t.Helper()
	out := p.script(t, jit, "-F", "pid,tid,ip,sym,dso")
	var stacks []perfStack
	ours := false // the current sample is pid's, the last of stacks
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := perfFrameLine.FindStringSubmatch(line); m != nil {
			if ours {
				st := &stacks[len(stacks)-1]
				st.frames = append(st.frames, perfFrame{sym: strings.TrimSpace(m[2]), dso: m[3]})
			}
			continue
		}
		if m := perfStackHead.FindStringSubmatch(line); m != nil {
			got, err := strconv.Atoi(m[1])
			if ours = err == nil && got == pid; ours {
				tid, _ := strconv.Atoi(m[2])
				stacks = append(stacks, perfStack{tid: tid})
			}
		}
	}
	if len(stacks) == 0 {
		t.Fatalf("perf recorded no call chains of pid %d", pid)
	}
	return stacks
}

// readPprofFile reads a pprof profile file back.
func readPprofFile(t testing.TB, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// readLLVMText reads the LLVM text sample profile at path.
func readLLVMText(t testing.TB, path string) *sampleprof.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profileio.ReadText(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// unmappedSamples sums c's samples counted by mapping alone in the mappings match accepts.
func unmappedSamples(c *profileio.Capture, match func(mapping string) bool) uint64 {
	var n uint64
	for _, u := range c.Unmapped {
		if match(u.Mapping) {
			n += u.Count
		}
	}
	return n
}

// readCapture reads a capture file back.
func readCapture(t testing.TB, path string) *profileio.Capture {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := profileio.ReadCapture(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if c.End == nil || c.Truncated {
		t.Fatalf("%s: capture not finished (end %v, truncated %v)", path, c.End, c.Truncated)
	}
	return c
}

// jitTotals sums c's JIT samples by function name.
func jitTotals(c *profileio.Capture) map[string]uint64 {
	m := map[string]uint64{}
	for _, o := range c.Objects {
		for _, s := range o.Samples {
			m[o.Object.Name] += s.Count
		}
	}
	return m
}

// shareTolerance is how far, in points, two independent samplings' shares of one function
// may differ when family shares are held to each other at once: points, or z standard
// errors of the difference of two binomial shares around pct from n1 and n2 samples when
// that is more. profd and perf sample the same run independently; at a few hundred samples
// a 20 % share moves by 3 points either way between them by chance alone (a busy machine
// leaves a JIT fewer samples). z is 4 for one share, and grows with the family (familyZ),
// so that a table of shares fails by chance no more often than one share at 4 standard
// errors would (at 4 for each, a table of a dozen fails by chance one run in 1 300, and the
// suite holds dozens of tables).
func shareTolerance(points, pct float64, n1, n2 uint64, family int) float64 {
	if n1 == 0 || n2 == 0 {
		return points
	}
	p := pct / 100
	se := 100 * math.Sqrt(p*(1-p)*(1/float64(n1)+1/float64(n2)))
	return math.Max(points, familyZ(family)*se)
}

// familyZ is how many standard errors each of n normal differences may reach so that any
// of them exceeds it by chance as rarely as one exceeds 4 (two-sided, Bonferroni): 4 for one,
// 4.4 for five, 4.7 for twenty.
func familyZ(n int) float64 {
	if n <= 1 {
		return 4
	}
	return math.Sqrt2 * math.Erfinv(1-math.Erfc(4/math.Sqrt2)/float64(n))
}

// share is n as a percentage of of, 0 when of is.
func share(n, of uint64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// shares turns counts into percentages of their sum over names.
func shares(counts map[string]uint64, names []string) map[string]float64 {
	var total uint64
	for _, n := range names {
		total += counts[n]
	}
	out := map[string]float64{}
	for _, n := range names {
		if total > 0 {
			out[n] = 100 * float64(counts[n]) / float64(total)
		}
	}
	return out
}

// compareShares fails t when a function's share differs by more than tolerance points, or
// by more than sampling alone explains when the samples are few (shareTolerance).
func compareShares(t testing.TB, profd, perf map[string]uint64, names []string, tolerance float64) {
	t.Helper()
	ps, qs := shares(profd, names), shares(perf, names)
	var np, nq uint64
	for _, n := range names {
		np, nq = np+profd[n], nq+perf[n]
	}
	var b strings.Builder
	bad := false
	for _, n := range names {
		d := ps[n] - qs[n]
		tol := shareTolerance(tolerance, (ps[n]+qs[n])/2, np, nq, len(names))
		fmt.Fprintf(&b, "  %-14s profd %6d %5.1f%%   perf %6d %5.1f%%   diff %+5.1f (±%.1f)\n", n, profd[n], ps[n], perf[n], qs[n], d, tol)
		if d > tol || d < -tol {
			bad = true
		}
	}
	if bad {
		t.Errorf("shares differ by more than %.0f points or what sampling explains (familyZ standard errors):\n%s", tolerance, b.String())
	} else {
		t.Logf("shares:\n%s", b.String())
	}
}

// sortedNames returns m's keys, most samples first.
func sortedNames(m map[string]uint64) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if m[names[i]] != m[names[j]] {
			return m[names[i]] > m[names[j]]
		}
		return names[i] < names[j]
	})
	return names
}

// lastCounter reads the number after the last occurrence of label in the summary; -1 if none.
func lastCounter(summary, label string) int {
	i := strings.LastIndex(summary, label)
	if i < 0 {
		return -1
	}
	s := summary[i+len(label):]
	end := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(s)
	}
	n, err := strconv.Atoi(s[:end])
	if err != nil {
		return -1
	}
	return n
}

// outputPath is where run writes format f of the first process pid of image.
func outputPath(d dirs, image string, pid int, f Format) string {
	return filepath.Join(d.out, outputBase(image, uint32(pid), 1)+extension[f])
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// envInt is the integer in the environment variable name, at least least; def when unset.
func envInt(tb testing.TB, name string, def, least int) int {
	tb.Helper()
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < least {
			tb.Fatalf("%s=%q: want an integer, at least %d", name, v, least)
		}
		return n
	}
	return def
}
