package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/profd/profd/daemon"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/internal/testenv/collector"
	"github.com/profd/profd/otlpexport"
	"github.com/profd/profd/profileio"
)

// The OTLP export end to end: the profd binary profiling real JIT workloads with
// --flush-interval, sending every interval to a real OpenTelemetry Collector (or to servers
// that are down, hang or refuse), against the interval files and profiles it writes.

// lliHotFunctions are examples/workload/hot.c's hot functions, JIT code under lli-14.
var lliHotFunctions = []string{"sieve", "hash_words", "sort_ints", "matmul"}

// nodeHotFunctions are workloads/runtimes/hot.js's functions, as V8's perf map names them
// (inside a longer name: "JS:*mixInts /path/hot.js:11:17").
var nodeHotFunctions = []string{"mixInts", "sumSquares", "sortChunk"}

var (
	hotLLOnce sync.Once
	hotLLErr  error
)

// hotLL compiles examples/workload/hot.c to IR for lli-14, once per test binary.
func hotLL(t testing.TB) string {
	t.Helper()
	testenv.Requires(t, testenv.Tool("clang-14"), testenv.Tool("lli-14"))
	binaries(t) // makes builtDir
	ll := filepath.Join(builtDir, "hot.ll")
	hotLLOnce.Do(func() {
		argv := []string{"clang-14", "-O2", "-g", "-fdebug-info-for-profiling", "-S", "-emit-llvm", "-o", ll, "../../examples/workload/hot.c"}
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			hotLLErr = fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
		}
	})
	if hotLLErr != nil {
		t.Fatal(hotLLErr)
	}
	return ll
}

// startWorkload starts cmd; the test's cleanup kills it.
func startWorkload(t testing.TB, cmd *exec.Cmd) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// startLLI runs hot.ll under lli-14 for far longer than a test, its jitdump in a directory
// of the test's.
func startLLI(t testing.TB) int {
	ll := hotLL(t)
	cmd := exec.Command("lli-14", "-jit-kind=mcjit", ll, "1000000", "0")
	cmd.Env = append(os.Environ(), "JITDUMPDIR="+t.TempDir())
	return startWorkload(t, cmd)
}

// startNode runs hot.js under node --perf-basic-prof for far longer than a test.
func startNode(t testing.TB) int {
	testenv.Requires(t, testenv.Tool("node"))
	js, err := filepath.Abs(filepath.Join("..", "..", "workloads", "runtimes", "hot.js"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "--perf-basic-prof", js, "600")
	cmd.Dir = t.TempDir() // V8 writes its logs there
	pid := startWorkload(t, cmd)
	t.Cleanup(func() { os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid)) })
	return pid
}

// startBusyLoop runs a shell loop: a target that always has samples and needs no JIT.
func startBusyLoop(t testing.TB) int {
	return startWorkload(t, exec.Command("sh", "-c", "while :; do :; done"))
}

// exportRun is one profd process of these tests.
type exportRun struct {
	cmd            *exec.Cmd
	out            string // --out
	stdout, stderr testenv.SyncBuffer
	done           chan struct{}
	err            error
	metricsURL     string // with --metrics-addr
	termAt         time.Time
}

// startExportRun starts profd on pids, flushing every second into a directory of the
// test's, with the extra flags, and waits until it has attached to every pid.
func startExportRun(t *testing.T, pids []int, extra ...string) *exportRun {
	t.Helper()
	profd, _ := binaries(t)
	base := t.TempDir()
	r := &exportRun{out: filepath.Join(base, "out"), done: make(chan struct{})}
	var ps []string
	for _, p := range pids {
		ps = append(ps, strconv.Itoa(p))
	}
	args := append([]string{"--pid", strings.Join(ps, ","), "--event", "cpu-clock", "--fifo-dir", filepath.Join(base, "fifo"),
		"--out", r.out, "--flush-interval", "1s"}, extra...)
	r.cmd = exec.Command(profd, args...)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.done
		if t.Failed() {
			t.Logf("profd %q\nstdout:\n%s\nstderr:\n%s", args, r.stdout.String(), r.stderr.String())
		}
	})
	at := regexp.MustCompile(`profd: metrics at (http://\S+/metrics)`)
	waitUntil(t, "profd to attach to every target", 30*time.Second, func() bool {
		if m := at.FindStringSubmatch(r.stdout.String()); m != nil {
			r.metricsURL = m[1]
		}
		for _, p := range pids {
			if !strings.Contains(r.stdout.String(), "profd: attached to pid "+strconv.Itoa(p)+" ") {
				return false
			}
		}
		return true
	}, &r.stdout, &r.stderr)
	return r
}

// stop sends SIGTERM and waits up to limit for profd to exit, returning how long it took.
func (r *exportRun) stop(t *testing.T, limit time.Duration) time.Duration {
	t.Helper()
	r.termAt = time.Now()
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(limit):
		t.Fatalf("profd did not exit within %v of SIGTERM", limit)
	}
	took := time.Since(r.termAt)
	if r.err != nil {
		t.Fatalf("profd after SIGTERM: %v", r.err)
	}
	return took
}

// intervalFile is one interval's pprof file in --out/intervals.
type intervalFile struct {
	pid            int64
	time, duration int64
	samples        int64
}

var intervalName = regexp.MustCompile(`-([0-9]+)\.[0-9]{8}T[0-9]{6}\.[0-9]{3}Z\.pb\.gz$`)

// readIntervals reads every interval pprof file profd wrote in out.
func readIntervals(t *testing.T, out string) []intervalFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(out, "intervals", "*.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var ivs []intervalFile
	for _, path := range paths {
		m := intervalName.FindStringSubmatch(filepath.Base(path))
		if m == nil { // the latest links
			continue
		}
		p := readPprof(t, path)
		pid, _ := strconv.ParseInt(m[1], 10, 64)
		iv := intervalFile{pid: pid, time: p.TimeNanos, duration: p.DurationNanos}
		for _, s := range p.Sample {
			iv.samples += s.Value[0]
		}
		ivs = append(ivs, iv)
	}
	return ivs
}

func readPprof(t *testing.T, path string) *profile.Profile {
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
	if len(p.SampleType) == 0 || p.SampleType[0].Type != "samples" {
		t.Fatalf("%s: sample types %v, want samples first", path, p.SampleType)
	}
	return p
}

// cumulativeLeaves is the samples of pid's cumulative pprof profile in out, by leaf function.
func cumulativeLeaves(t *testing.T, out string, pid int) map[string]int64 {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(out, "*-"+strconv.Itoa(pid)+".pb.gz"))
	if len(paths) != 1 {
		t.Fatalf("pprof profiles of pid %d in %s: %v, want one", pid, out, paths)
	}
	leaves := map[string]int64{}
	for _, s := range readPprof(t, paths[0]).Sample {
		name := unnamed
		if l := s.Location; len(l) > 0 && len(l[0].Line) > 0 && l[0].Line[0].Function != nil {
			name = l[0].Line[0].Function.Name
		}
		leaves[name] += s.Value[0]
	}
	return leaves
}

const unnamed = "(unnamed)"

// otlpInterval is one OTLP profile of sample type samples/count the Collector received.
type otlpInterval struct {
	pid            int64
	service        string
	time, duration int64
	samples        int64
	leaves         map[string]int64
	stacks         [][]string // each sample's frames, leaf first
}

// otlpIntervals decodes what the Collector received into one otlpInterval per profile of
// sample type samples/count; a profile repeated (a retried request the Collector had taken)
// is kept once.
func otlpIntervals(t *testing.T, reqs []pprofile.Profiles) []otlpInterval {
	t.Helper()
	var out []otlpInterval
	seen := map[string]bool{}
	for _, pd := range reqs {
		d := pd.Dictionary()
		str := func(i int32) string { return d.StringTable().At(int(i)) }
		for _, rp := range pd.ResourceProfiles().All() {
			var pid int64 = -1
			service := ""
			rp.Resource().Attributes().Range(func(k string, v pcommon.Value) bool {
				switch k {
				case "process.pid":
					pid = v.Int()
				case "service.name":
					service = v.Str()
				}
				return true
			})
			for _, sp := range rp.ScopeProfiles().All() {
				for _, prof := range sp.Profiles().All() {
					if str(prof.SampleType().TypeStrindex()) != "samples" {
						continue
					}
					key := fmt.Sprintf("%x", prof.ProfileID())
					if seen[key] {
						continue
					}
					seen[key] = true
					iv := otlpInterval{pid: pid, service: service, time: int64(prof.Time()), duration: int64(prof.DurationNano()),
						leaves: map[string]int64{}}
					for _, smp := range prof.Samples().All() {
						var v int64
						for _, x := range smp.Values().All() {
							v += x
						}
						var names []string
						stack := d.StackTable().At(int(smp.StackIndex()))
						for _, li := range stack.LocationIndices().All() {
							loc := d.LocationTable().At(int(li))
							if loc.Lines().Len() == 0 {
								names = append(names, unnamed)
								continue
							}
							for _, ln := range loc.Lines().All() {
								names = append(names, str(d.FunctionTable().At(int(ln.FunctionIndex())).NameStrindex()))
							}
						}
						leaf := unnamed
						if len(names) > 0 {
							leaf = names[0]
						}
						iv.samples += v
						iv.leaves[leaf] += v
						iv.stacks = append(iv.stacks, names)
					}
					out = append(out, iv)
				}
			}
		}
	}
	return out
}

// ivKey names an interval by its process and start.
type ivKey struct{ pid, time int64 }

// checkEveryInterval checks that every interval file with samples of the pids has an OTLP
// profile of the same process, start and duration; exact says the sample totals must be
// equal too (each interval sent once, whole). It returns the number of intervals per pid.
func checkEveryInterval(t *testing.T, files []intervalFile, got []otlpInterval, pids []int, exact bool) map[int64]int {
	t.Helper()
	byKey := map[ivKey][]otlpInterval{}
	for _, g := range got {
		byKey[ivKey{g.pid, g.time}] = append(byKey[ivKey{g.pid, g.time}], g)
	}
	n := map[int64]int{}
	missing := 0
	for _, f := range files {
		if f.samples == 0 || !slices.Contains(pids, int(f.pid)) {
			continue
		}
		n[f.pid]++
		gs := byKey[ivKey{f.pid, f.time}]
		if len(gs) == 0 {
			missing++
			t.Errorf("pid %d: the interval starting %v (%d samples) did not arrive", f.pid, time.Unix(0, f.time).UTC(), f.samples)
			continue
		}
		var samples int64
		for _, g := range gs {
			samples += g.samples
			if g.duration != f.duration {
				t.Errorf("pid %d: the interval starting %v lasts %v in OTLP, %v in its file", f.pid, time.Unix(0, f.time).UTC(),
					time.Duration(g.duration), time.Duration(f.duration))
			}
		}
		if exact && samples != f.samples {
			t.Errorf("pid %d: the interval starting %v has %d samples in OTLP, %d in its file", f.pid, time.Unix(0, f.time).UTC(), samples, f.samples)
		}
	}
	if exact {
		counted := 0
		for _, k := range n {
			counted += k
		}
		if extra := len(byKey) - (counted - missing); extra > 0 {
			// Intervals without samples are not sent: every OTLP profile has a file.
			t.Errorf("%d OTLP profiles have no interval file", extra)
		}
	}
	return n
}

// compareShares checks that each function with at least 5% of pid's samples has the same
// share, within one point, in the OTLP profiles as in the cumulative pprof profile, and
// returns the functions by share, most first.
func compareShares(t *testing.T, got []otlpInterval, local map[string]int64, pid int) []string {
	t.Helper()
	otlp := map[string]int64{}
	for _, g := range got {
		if g.pid == int64(pid) {
			for k, v := range g.leaves {
				otlp[k] += v
			}
		}
	}
	total := func(m map[string]int64) (n int64) {
		for _, v := range m {
			n += v
		}
		return n
	}
	tOTLP, tLocal := total(otlp), total(local)
	if tOTLP == 0 || tLocal == 0 {
		t.Fatalf("pid %d: %d samples in OTLP, %d in the pprof profile", pid, tOTLP, tLocal)
	}
	share := func(v, n int64) float64 { return 100 * float64(v) / float64(n) }
	var names []string
	for k := range local {
		names = append(names, k)
	}
	for k := range otlp {
		if _, ok := local[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		return local[names[i]] > local[names[j]] || local[names[i]] == local[names[j]] && names[i] < names[j]
	})
	var b strings.Builder
	var top []string
	for _, k := range names {
		l, o := share(local[k], tLocal), share(otlp[k], tOTLP)
		if l < 5 && o < 5 {
			continue
		}
		top = append(top, k)
		fmt.Fprintf(&b, "  %-70.70s pprof %5.1f%%  OTLP %5.1f%%\n", k, l, o)
		if math.Abs(l-o) > 1 {
			t.Errorf("pid %d: %s has %.1f%% of the samples in OTLP, %.1f%% in the cumulative pprof profile", pid, k, o, l)
		}
	}
	t.Logf("pid %d: %d samples in OTLP, %d in the cumulative pprof profile; functions with 5%% or more:\n%s", pid, tOTLP, tLocal, b.String())
	return top
}

// anyContains reports whether one of names contains one of subs.
func anyContains(names []string, subs []string) bool {
	for _, n := range names {
		for _, s := range subs {
			if strings.Contains(n, s) {
				return true
			}
		}
	}
	return false
}

// latencyMedian estimates the median of a Prometheus histogram, interpolating in its buckets.
func latencyMedian(t *testing.T, url string) (median float64, count uint64) {
	t.Helper()
	fam := scrapeMetrics(t, url)["profd_export_latency_seconds"]
	if fam == nil || len(fam.GetMetric()) != 1 {
		t.Fatalf("no profd_export_latency_seconds")
	}
	h := fam.GetMetric()[0].GetHistogram()
	count = h.GetSampleCount()
	half := float64(count) / 2
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		if c := float64(b.GetCumulativeCount()); c >= half && c > below {
			return lower + (b.GetUpperBound()-lower)*(half-below)/(c-below), count
		} else {
			lower, below = b.GetUpperBound(), c
		}
	}
	return math.Inf(1), count
}

// TestExportJITWorkloads: profd profiling lli-14 and node --perf-basic-prof for about 10 s
// with --flush-interval 1s sends every interval of both to the Collector: each interval file
// has its OTLP profile with the same start, duration and samples, the JIT functions' shares
// over the run are those of the cumulative pprof profile, stacks have the JIT functions'
// names, resources process.pid and service.name; the export's metrics count it.
func TestExportJITWorkloads(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	if runtime.GOARCH != "amd64" {
		t.Skip("lli's and V8's frames are walked by frame pointer on x86-64")
	}
	c := collector.Start(t)
	lli, node := startLLI(t), startNode(t)
	r := startExportRun(t, []int{lli, node}, "--otlp-endpoint", c.GRPCAddr, "--otlp-insecure",
		"--metrics-addr", "127.0.0.1:0", "--stop-timeout", "30s")
	time.Sleep(10 * time.Second)

	fam := scrapeMetrics(t, r.metricsURL)
	if n := metricValue(fam, "profd_export_intervals_sent_total", ""); n <= 0 {
		t.Errorf("profd_export_intervals_sent_total %v after 10 s, want the intervals sent", n)
	}
	median, count := latencyMedian(t, r.metricsURL)
	if count == 0 {
		t.Errorf("profd_export_latency_seconds has no observations after 10 s")
	}
	t.Logf("median end-to-delivery latency %.3f s over %d intervals (profd_export_latency_seconds: from an interval's end to the Collector's acknowledgement of its last request, interpolated in the histogram's buckets)", median, count)

	took := r.stop(t, 60*time.Second)
	t.Logf("profd exited %v after SIGTERM", took.Round(time.Millisecond))
	logs := r.stderr.String()
	if strings.Contains(logs, "sending profiles fails") || strings.Contains(logs, "not everything was sent") || strings.Contains(logs, "export: dropping") {
		t.Errorf("export failures logged with the Collector up:\n%s", logs)
	}

	got := otlpIntervals(t, c.Received(t))
	n := checkEveryInterval(t, readIntervals(t, r.out), got, []int{lli, node}, true)
	for _, pid := range []int{lli, node} {
		// About ten intervals in 10 s; the first may have no samples yet.
		if n[int64(pid)] < 7 {
			t.Errorf("pid %d: %d intervals with samples in about 10 s at --flush-interval 1s, want about 10", pid, n[int64(pid)])
		}
	}
	t.Logf("intervals with samples, each received: lli %d, node %d", n[int64(lli)], n[int64(node)])

	lliTop := compareShares(t, got, cumulativeLeaves(t, r.out, lli), lli)
	if !anyContains(lliTop, lliHotFunctions) {
		t.Errorf("lli's top functions %q name none of hot.c's %q", lliTop, lliHotFunctions)
	}
	nodeTop := compareShares(t, got, cumulativeLeaves(t, r.out, node), node)
	if !anyContains(nodeTop, nodeHotFunctions) {
		t.Errorf("node's top functions %q name none of hot.js's %q", nodeTop, nodeHotFunctions)
	}

	// Stacks: one of hot.c's functions as the leaf under lli (its -O2 code keeps no frame
	// pointers: the caller is not named); a JS function's frame under node.
	var lliStack, nodeStack []string
	for _, g := range got {
		for _, s := range g.stacks {
			switch {
			case g.pid == int64(lli) && lliStack == nil && len(s) > 0 && slices.Contains(lliHotFunctions, s[0]):
				lliStack = s
			case g.pid == int64(node) && nodeStack == nil && len(s) > 1 && anyContains(s, nodeHotFunctions):
				nodeStack = s
			}
		}
	}
	if lliStack == nil {
		t.Errorf("no OTLP stack of lli's has one of %q as its leaf", lliHotFunctions)
	}
	if nodeStack == nil {
		t.Errorf("no OTLP stack of node's has a frame of %q", nodeHotFunctions)
	}
	t.Logf("an lli stack: %q\na node stack's first frames: %q", lliStack, nodeStack[:min(len(nodeStack), 3)])

	// Resources.
	services := map[int64]string{}
	for _, g := range got {
		if g.pid < 0 {
			continue
		}
		if g.service == "" {
			t.Errorf("a profile of pid %d has no service.name", g.pid)
		}
		services[g.pid] = g.service
	}
	if services[int64(lli)] == "" || services[int64(node)] == "" {
		t.Errorf("services by process.pid %v, want lli's (%d) and node's (%d)", services, lli, node)
	}
	t.Logf("service.name by process.pid: %v", services)
}

// TestExportCollectorRestart: the Collector killed for about 6 s mid-run and started again
// on its ports: every interval arrives before profd exits at SIGTERM, and the failure is
// logged once, with the gap when sending works again.
func TestExportCollectorRestart(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	c := collector.Start(t)
	lli := startLLI(t)
	r := startExportRun(t, []int{lli}, "--otlp-endpoint", c.GRPCAddr, "--otlp-insecure", "--stop-timeout", "60s")
	time.Sleep(2 * time.Second)
	c.Kill()
	killed := time.Now()
	time.Sleep(6 * time.Second)
	c.Restart()
	t.Logf("the Collector was down for %v", time.Since(killed).Round(time.Millisecond))
	time.Sleep(time.Second) // the exporter is likely waiting out a backoff still: the stop tries at once
	took := r.stop(t, 90*time.Second)
	t.Logf("profd exited %v after SIGTERM", took.Round(time.Millisecond))

	n := checkEveryInterval(t, readIntervals(t, r.out), otlpIntervals(t, c.Received(t)), []int{lli}, false)
	if n[int64(lli)] < 7 {
		t.Errorf("%d intervals with samples in about 10 s, want about 10", n[int64(lli)])
	}
	logs := r.stderr.String()
	if k := strings.Count(logs, "sending profiles fails"); k != 1 {
		t.Errorf("%d warnings of the failure, want 1 for the episode:\n%s", k, logs)
	}
	gap := regexp.MustCompile(`level=INFO msg="otlpexport: sending again".* gap=(\S+)`).FindStringSubmatch(logs)
	if gap == nil {
		t.Errorf("no info line with the gap once sending worked again:\n%s", logs)
	} else {
		t.Logf("the gap logged: %s", gap[1])
	}
	if strings.Contains(logs, "not everything was sent") || strings.Contains(logs, "export: dropping") {
		t.Errorf("intervals lost:\n%s", logs)
	}
}

// TestExportMutualTLS: a Collector whose receiver requires client certificates a CA of its
// own signed. profd without one is refused, with a warning that names the flags; with
// --otlp-cert-file and --otlp-key-file every interval arrives, over gRPC.
func TestExportMutualTLS(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	ca := testenv.NewCA(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	serverCert, serverKey := ca.IssueFiles(t, dir, "server", 2, true)
	clientCert, clientKey := ca.IssueFiles(t, dir, "client", 3, false)
	c := collector.StartTLS(t, collector.TLS{CertFile: serverCert, KeyFile: serverKey, ClientCAFile: caFile})
	loop := startBusyLoop(t)

	refused := startExportRun(t, []int{loop}, "--otlp-endpoint", c.GRPCAddr, "--otlp-ca-file", caFile)
	waitUntil(t, "the refusal", 20*time.Second, func() bool { return strings.Contains(refused.stderr.String(), "client certificate") },
		&refused.stdout, &refused.stderr)
	refused.stop(t, 30*time.Second)
	logs := refused.stderr.String()
	if !strings.Contains(logs, "--otlp-cert-file") {
		t.Errorf("the refusal does not say how to give a certificate:\n%s", logs)
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "client certificate") {
			t.Logf("the refusal: %s", line)
		}
	}
	if n := len(c.Received(t)); n != 0 {
		t.Fatalf("the Collector took %d requests from profd without a client certificate", n)
	}

	r := startExportRun(t, []int{loop}, "--otlp-endpoint", c.GRPCAddr, "--otlp-ca-file", caFile,
		"--otlp-cert-file", clientCert, "--otlp-key-file", clientKey)
	time.Sleep(3 * time.Second)
	r.stop(t, 30*time.Second)
	n := checkEveryInterval(t, readIntervals(t, r.out), otlpIntervals(t, c.Received(t)), []int{loop}, false)
	if n[int64(loop)] < 2 {
		t.Errorf("%d intervals with samples arrived in about 3 s, want about 3", n[int64(loop)])
	}
}

// exportSoakDuration is how long TestExportNoCollector runs: 20 s, or with
// PROFD_SOAK_EXPORT_DOWN set (make soak-export-down), PROFD_SOAK_DURATION.
func exportSoakDuration(t *testing.T) time.Duration {
	if os.Getenv("PROFD_SOAK_EXPORT_DOWN") == "" {
		return 20 * time.Second
	}
	return soakDuration(t, "PROFD_SOAK_EXPORT_DOWN", "make soak-export-down", 10*time.Minute)
}

// freeLoopbackAddr is a loopback address nothing listened on a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// notSent is the count of the stop's "N profile requests not sent", -1 when profd did not
// log one.
func notSent(logs string) int {
	m := regexp.MustCompile(`([0-9]+) profile requests not sent`).FindStringSubmatch(logs)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestExportNoCollector: with nothing listening at the endpoint, profd keeps sampling and
// writing its files, its memory stays within the export queue's bound and some, it warns of
// the failure once, and SIGTERM stops it without waiting out --stop-timeout (the endpoint,
// tried once more, is still down), saying what was not sent.
func TestExportNoCollector(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	const queueMB, slackMB = 8, 64
	run := exportSoakDuration(t)
	lli := startLLI(t)
	r := startExportRun(t, []int{lli}, "--otlp-endpoint", freeLoopbackAddr(t), "--otlp-insecure",
		"--otlp-queue-mb", strconv.Itoa(queueMB), "--stop-timeout", "4s", "--metrics-addr", "127.0.0.1:0", "--keep", "100000")
	first := rssKB(t, r.cmd.Process.Pid)
	peak := first
	cpu := testenv.UserCPU(t, lli)
	for end := time.Now().Add(run); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		peak = max(peak, rssKB(t, r.cmd.Process.Pid))
	}
	cpu = testenv.UserCPU(t, lli) - cpu
	fam := scrapeMetrics(t, r.metricsURL)
	queued := metricValue(fam, "profd_export_queued_bytes", "")
	if n := metricValue(fam, "profd_export_queued_intervals", ""); n < 1 || queued <= 0 {
		t.Errorf("profd_export_queued_intervals %v, profd_export_queued_bytes %v: want the intervals waiting", n, queued)
	}
	if n := metricValue(fam, "profd_export_intervals_sent_total", ""); n != 0 {
		t.Errorf("profd_export_intervals_sent_total %v with nothing listening", n)
	}
	took := r.stop(t, 30*time.Second)
	t.Logf("RSS %d kB at the start, %d kB at most over %v; %.0f bytes queued at the end; exited %v after SIGTERM (--stop-timeout 4s)",
		first, peak, run, queued, took.Round(time.Millisecond))
	if peak > (queueMB+slackMB)<<10 {
		t.Errorf("RSS reached %d kB, over --otlp-queue-mb %d + %d MB", peak, queueMB, slackMB)
	}
	if took > 3*time.Second {
		t.Errorf("profd exited %v after SIGTERM, want before --stop-timeout 4s ends: the endpoint, tried once more, refused at once", took)
	}
	logs := r.stderr.String()
	if k := strings.Count(logs, "sending profiles fails"); k != 1 {
		t.Errorf("%d warnings that sending fails, want 1:\n%s", k, logs)
	}
	var warnings []string
	for line := range strings.Lines(logs) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "export") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) > 3 { // the failure, the queue's drops, the stop's loss
		t.Errorf("%d warnings of the export, want the failure's, the drops' and the stop's at most:\n%s", len(warnings), strings.Join(warnings, ""))
	}
	if k := notSent(logs); k < 1 {
		t.Errorf("profd did not say how many profiles were not sent:\n%s", logs)
	}

	// Sampling goes on: the interval files and the cumulative profile have the samples.
	var withSamples int
	for _, f := range readIntervals(t, r.out) {
		if f.samples > 0 {
			withSamples++
		}
	}
	if want := int(run/time.Second) * 7 / 10; withSamples < want {
		t.Errorf("%d interval files with samples in %v at --flush-interval 1s, want at least %d", withSamples, run, want)
	}
	var total int64
	for _, v := range cumulativeLeaves(t, r.out, lli) {
		total += v
	}
	// At 999 Hz of lli's CPU time; a busy machine gives it less than a core.
	if total < int64(cpu.Seconds()*999/2) {
		t.Errorf("%d samples in the cumulative profile of %v of lli (%v of CPU time), want most of them", total, run, cpu)
	}
}

// TestExportBadServer: a server that accepts connections and never answers (gRPC) and one
// that answers 503 forever (OTLP/HTTP) keep nobody waiting past --stop-timeout, and profd
// says how many profiles it did not send.
func TestExportBadServer(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	var hits atomic.Int64
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	t.Cleanup(busy.Close)
	for _, tc := range []struct {
		name string
		args []string
		// what the log says of the failure: the hanging server's first attempt is still
		// waiting (its timeout is 10 s) when profd stops; the 503s are warned of as they come
		want string
	}{
		{"hanging grpc", []string{"--otlp-endpoint", testenv.SilentListener(t), "--otlp-insecure"}, "the endpoint had not answered"},
		{"503 http", []string{"--otlp-endpoint", busy.URL, "--otlp-protocol", "http/protobuf"}, "sending profiles fails"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loop := startBusyLoop(t)
			r := startExportRun(t, []int{loop}, append(tc.args, "--stop-timeout", "3s")...)
			time.Sleep(3 * time.Second)
			took := r.stop(t, 30*time.Second)
			t.Logf("exited %v after SIGTERM (--stop-timeout 3s)", took.Round(time.Millisecond))
			if took > 5*time.Second {
				t.Errorf("profd exited %v after SIGTERM, want within --stop-timeout 3s and 2 s", took)
			}
			logs := r.stderr.String()
			if k := notSent(logs); k < 1 {
				t.Errorf("profd did not say how many profiles were not sent:\n%s", logs)
			}
			if k := strings.Count(logs, tc.want); k != 1 {
				t.Errorf("%d lines saying %q, want 1:\n%s", k, tc.want, logs)
			}
			if k := strings.Count(logs, "level=WARN msg=\"otlpexport:"); k > 1 {
				t.Errorf("%d warnings of the exporter, want at most one:\n%s", k, logs)
			}
		})
	}
	if hits.Load() == 0 {
		t.Error("no request reached the 503 server")
	}
}

// TestExportDroppedIntervalsSentAgain: the Collector away long enough for the intervals of
// three node processes that keep compiling to overflow a 1 MB queue. The intervals dropped
// are sent again from their files once it is back, so every interval file arrives, with
// its samples, once: none lost, none twice.
func TestExportDroppedIntervalsSentAgain(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("node"))
	js, err := filepath.Abs(filepath.Join("..", "..", "workloads", "runtimes", "churn.js"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for range 3 {
		cmd := exec.Command("node", "--perf-basic-prof", js)
		cmd.Dir = t.TempDir()
		pid := startWorkload(t, cmd)
		t.Cleanup(func() { os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid)) })
		pids = append(pids, pid)
	}
	c := collector.Start(t)
	r := startExportRun(t, pids, "--otlp-endpoint", c.GRPCAddr, "--otlp-insecure", "--otlp-queue-mb", "1",
		"--stop-timeout", "60s", "--metrics-addr", "127.0.0.1:0", "--keep", "100000")
	time.Sleep(2 * time.Second)
	c.Kill()
	waitUntil(t, "the queue to drop intervals", 60*time.Second, func() bool {
		return metricValue(scrapeMetrics(t, r.metricsURL), "profd_export_intervals_dropped_total", "") >= 3
	}, &r.stdout, &r.stderr)
	if n := metricValue(scrapeMetrics(t, r.metricsURL), "profd_export_intervals_to_resend", ""); n < 1 {
		t.Errorf("profd_export_intervals_to_resend %v with intervals dropped, want them counted", n)
	}
	c.Restart()
	waitUntil(t, "the dropped intervals to be sent again", 60*time.Second, func() bool {
		return strings.Contains(r.stderr.String(), "the intervals dropped unsent were queued again") &&
			metricValue(scrapeMetrics(t, r.metricsURL), "profd_export_queued_intervals", "") == 0
	}, &r.stdout, &r.stderr)
	fam := scrapeMetrics(t, r.metricsURL)
	dropped := metricValue(fam, "profd_export_intervals_dropped_total", "")
	resent := metricValue(fam, "profd_export_intervals_resent_total", "")
	if n := metricValue(fam, "profd_export_intervals_to_resend", ""); n != 0 {
		t.Errorf("profd_export_intervals_to_resend %v once every dropped interval was sent again, want 0", n)
	}
	r.stop(t, 90*time.Second)
	t.Logf("%v intervals dropped from the queue while the Collector was away, %v sent again from their files", dropped, resent)
	checkEveryInterval(t, readIntervals(t, r.out), otlpIntervals(t, c.Received(t)), pids, true)
	if dropped < 3 || resent != dropped {
		t.Errorf("%v intervals dropped, %v sent again: want some dropped, and each sent again", dropped, resent)
	}
	if logs := r.stderr.String(); strings.Contains(logs, "not everything was sent") {
		t.Errorf("intervals left unsent:\n%s", logs)
	}
}

// TestResentIntervalMustBeUnchanged: an interval file is its target's user's to read, and
// so to change. Of three intervals dropped unsent, the one whose file was rewritten, to the
// byte as long, to say another process, and the one whose file grew, are not sent again
// (with a warning each); the untouched one is.
func TestResentIntervalMustBeUnchanged(t *testing.T) {
	c := collector.Start(t)
	logs := &testenv.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	var cfg daemon.Config
	x, err := startExport(otlpOptions{cfg: otlpexport.Config{Endpoint: c.GRPCAddr, Insecure: true}}, &cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	start := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	capture := func(pid uint32) *profileio.Capture {
		return &profileio.Capture{
			Meta:      profileio.CaptureMeta{Event: "cpu-clock", Host: "h", StartTime: start},
			Processes: []profileio.Process{{Pid: pid, Command: "loop", Executable: "/usr/bin/loop"}},
			Unmapped:  []profileio.UnmappedCount{{Pid: pid, Mapping: "/usr/bin/loop", Count: 100}},
			End:       &profileio.CaptureEnd{EndTime: start.Add(time.Second)},
		}
	}
	interval := func(pid uint32) daemon.Interval {
		path := filepath.Join(dir, fmt.Sprintf("loop-%d.profd", pid))
		size := writeCaptureFile(t, path, capture(pid))
		return daemon.Interval{Base: "loop", Start: start, End: start.Add(time.Second), Capture: capture(pid),
			CaptureFile: path, CaptureBytes: size}
	}
	kept, renamed, grown := interval(100), interval(200), interval(400)
	for _, iv := range []daemon.Interval{kept, renamed, grown} {
		x.keepForLater(laterSource(iv))
	}
	if size := writeCaptureFile(t, renamed.CaptureFile, capture(300)); size != renamed.CaptureBytes {
		t.Fatalf("pid 300's capture is %d bytes, pid 200's %d: want the same size", size, renamed.CaptureBytes)
	}
	f, err := os.OpenFile(grown.CaptureFile, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 1<<20))
	f.Close()

	waitUntil(t, "the intervals to be sent again", 30*time.Second, func() bool {
		return strings.Contains(logs.String(), "were queued again") && x.exp.Stats().SentRequests >= 1
	}, &testenv.SyncBuffer{}, logs)
	if err := x.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	pids := map[int64]int{}
	for _, iv := range otlpIntervals(t, c.Received(t)) {
		pids[iv.pid]++
	}
	if pids[100] != 1 || len(pids) != 1 {
		t.Errorf("profiles by process.pid %v, want pid 100's once and no other", pids)
	}
	if n := strings.Count(logs.String(), "an interval file changed since profd wrote it"); n != 2 {
		t.Errorf("%d warnings of a changed file, want 2; logs:\n%s", n, logs.String())
	}
}

// writeCaptureFile writes c to path and returns its size.
func writeCaptureFile(t *testing.T, path string, c *profileio.Capture) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := profileio.WriteCapture(f, c); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestExportUnsentSentByNextRun: the intervals a run could not send before its stop (no
// Collector) are listed in the interval directory and sent by the next profd with the same
// --out once its Collector takes profiles: each interval of both runs arrives once, whole,
// and the list is gone after.
func TestExportUnsentSentByNextRun(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	first := startBusyLoop(t)
	r1 := startExportRun(t, []int{first}, "--otlp-endpoint", freeLoopbackAddr(t), "--otlp-insecure",
		"--stop-timeout", "2s", "--keep", "100000")
	waitUntil(t, "three intervals of the first run", 30*time.Second, func() bool {
		var n int
		for _, f := range readIntervals(t, r1.out) {
			if f.samples > 0 {
				n++
			}
		}
		return n >= 3
	}, &r1.stdout, &r1.stderr)
	r1.stop(t, 30*time.Second)
	list := filepath.Join(r1.out, daemon.IntervalDir, unsentName)
	if _, err := os.Stat(list); err != nil {
		t.Fatalf("the first run left no list of its unsent intervals: %v\nstderr:\n%s", err, r1.stderr.String())
	}
	if logs := r1.stderr.String(); !strings.Contains(logs, "the next profd with this --out sends them") {
		t.Errorf("the first run's stop does not say the next run sends what it left:\n%s", logs)
	}

	c, second, r2 := nextRun(t, r1.out)
	if logs := r2.stderr.String(); !strings.Contains(logs, "the last run left intervals unsent") || strings.Contains(logs, "not everything was sent") {
		t.Errorf("the second run's log:\n%s", logs)
	}
	n := checkEveryInterval(t, readIntervals(t, r1.out), otlpIntervals(t, c.Received(t)), []int{first, second}, true)
	t.Logf("intervals with samples arrived: %d of the first run's process, %d of the second's", n[int64(first)], n[int64(second)])
	if n[int64(first)] < 3 || n[int64(second)] < 1 {
		t.Errorf("intervals checked per pid %v, want at least 3 of the first run's", n)
	}
	if _, err := os.Stat(list); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the list of unsent intervals is still there after they were sent: %v", err)
	}
}

// TestExportKilledSentByNextRun: a profd killed (SIGKILL) while its endpoint is down
// leaves the intervals its queue held listed, a second or so old: the next run with the
// same --out sends every one written before its last two seconds, once each, whole. (Its
// queue is not listed at a stop; until it was listed while profd runs too, a killed profd
// lost every one.)
func TestExportKilledSentByNextRun(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	first := startBusyLoop(t)
	r1 := startExportRun(t, []int{first}, "--otlp-endpoint", freeLoopbackAddr(t), "--otlp-insecure", "--keep", "100000")
	list := filepath.Join(r1.out, daemon.IntervalDir, unsentName)
	waitUntil(t, "six intervals of the first run listed", 30*time.Second, func() bool {
		b, err := os.ReadFile(list)
		return err == nil && strings.Count(string(b), "\n") > 6
	}, &r1.stdout, &r1.stderr)
	killedAt := time.Now()
	r1.cmd.Process.Kill()
	<-r1.done
	cutoff := killedAt.Add(-2 * time.Second).UnixNano()
	var before []intervalFile // the intervals that ended two seconds before the kill
	for _, f := range readIntervals(t, r1.out) {
		if f.time+f.duration < cutoff {
			before = append(before, f)
		}
	}

	c, _, _ := nextRun(t, r1.out)
	var got, later []otlpInterval
	for _, iv := range otlpIntervals(t, c.Received(t)) {
		switch {
		case iv.pid == int64(first) && iv.time+iv.duration < cutoff:
			got = append(got, iv)
		case iv.pid == int64(first):
			later = append(later, iv) // listed or not, by when the kill came
		}
	}
	n := checkEveryInterval(t, before, got, []int{first}, true)
	t.Logf("of the first run's intervals, %d ended two seconds before the kill and %d arrived; %d of the later ones arrived",
		len(before), len(got), len(later))
	if n[int64(first)] < 3 {
		t.Errorf("%d of the first run's intervals checked, want 3 at least", n[int64(first)])
	}
}

// nextRun runs profd again over out, on a busy loop of its own, with a Collector, until it
// has queued again what the last run left unsent, and stops it.
func nextRun(t *testing.T, out string) (c *collector.Collector, pid int, r *exportRun) {
	t.Helper()
	c = collector.Start(t)
	pid = startBusyLoop(t)
	r = startExportRun(t, []int{pid}, "--out", out, "--otlp-endpoint", c.GRPCAddr, "--otlp-insecure",
		"--stop-timeout", "30s", "--keep", "100000")
	waitUntil(t, "the last run's intervals to be sent", 60*time.Second, func() bool {
		return strings.Contains(r.stderr.String(), "the intervals dropped unsent were queued again")
	}, &r.stdout, &r.stderr)
	r.stop(t, 60*time.Second)
	return c, pid, r
}

// TestUnsentLeftWithoutExport: a run without --otlp-endpoint over an --out whose last run
// left intervals unsent says so, once, and keeps the list for a run that exports.
func TestUnsentLeftWithoutExport(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	profd, _ := binaries(t)
	out := filepath.Join(t.TempDir(), "out")
	list := filepath.Join(out, daemon.IntervalDir, unsentName)
	if err := os.MkdirAll(filepath.Dir(list), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := writeUnsent(filepath.Dir(list), []string{joinSource(filepath.Join(filepath.Dir(list), "a.profd"), 1, strings.Repeat("ab", 32))}); err != nil {
		t.Fatal(err)
	}
	target := testenv.Sleeper(t)
	code, output := exitCode(t, profd, "--pid", strconv.Itoa(target.Process.Pid), "--out", out, "--flush-interval", "1s",
		"--duration", "500ms", "--fifo-dir", filepath.Join(t.TempDir(), "fifo"), "--event", "cpu-clock")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, output)
	}
	if n := strings.Count(output, "an earlier run left intervals unsent; without --otlp-endpoint"); n != 1 {
		t.Errorf("%d warnings of the intervals left unsent, want 1:\n%s", n, output)
	}
	if _, err := os.Stat(list); err != nil {
		t.Errorf("the list: %v, want it kept", err)
	}
}
