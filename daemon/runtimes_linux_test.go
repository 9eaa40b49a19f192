package daemon

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/internal/unwind"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// These tests run the JITs people run, unmodified, under profd and perf record at once, and
// hold profd to perf's own naming of their code: of the samples in JIT memory, profd must
// name at least 95 % of the share perf names, and every JIT function with 5 % of the
// samples or more must have the same share within 3 points.

// tally is what a profiler made of one run's samples of one process.
type tally struct {
	total       uint64            // every user-space sample of the process
	jitMem      uint64            // samples in JIT memory (anonymous or JIT-file-backed code)
	named       uint64            // of those, samples a JIT symbol named
	funcs       map[string]uint64 // named JIT samples by function
	perfObjects map[string]uint64 // perf's only: samples by the object perf script gave
}

// profdTally reads a capture: named samples are its code objects', samples in JIT memory
// add those it kept unnamed and those counted in anonymous memory.
func profdTally(c *profileio.Capture) tally {
	jit, outside := c.TotalSamples()
	unnamed := c.UnnamedSamples()
	tl := tally{total: jit + outside + unnamed, jitMem: jit + unnamed, named: jit, funcs: jitTotals(c)}
	tl.jitMem += unmappedSamples(c, attribute.JITMemory)
	return tl
}

// perfJITObject is what perf script shows as the object of a sample in JIT memory: the
// process's anonymous memory, its perf map, or a jitted-PID-N.so perf inject --jit made.
var perfJITObject = regexp.MustCompile(`^(//anon|\[anon[^]]*\]|.*/perf-\d+\.map|.*/jitted-\d+-\d+\.so|/memfd:.*)$`)

// nativeObject reports whether perf script's object is a file's code: a path that is not
// JIT memory (profd names code in a file by the file's symbols, as perf does where no
// jitdump record was laid over it).
func nativeObject(dso string) bool {
	return strings.HasPrefix(dso, "/") && !perfJITObject.MatchString(dso)
}

// perfTally sorts perf's samples the same way.
func perfTally(ss []perfSample) tally {
	tl := tally{total: uint64(len(ss)), funcs: map[string]uint64{}, perfObjects: map[string]uint64{}}
	for _, s := range ss {
		tl.perfObjects[s.dso]++
		if !perfJITObject.MatchString(s.dso) || nativeObject(s.mapped) {
			continue
		}
		tl.jitMem++
		if s.sym != "[unknown]" && s.sym != "" {
			tl.named++
			tl.funcs[s.sym]++
		}
	}
	return tl
}

// compareWithPerf holds profd's tally to perf's and returns the JIT functions with 5 % of
// the samples in JIT memory or more (by either). Shares are of the samples in JIT memory:
// perf record -p follows the threads there when it starts, profd every thread of the
// process, so a runtime's compiler and GC threads started later add to profd's total only.
func compareWithPerf(t *testing.T, profd, perf tally) []string {
	t.Helper()
	profdNamed, perfNamed := share(profd.named, profd.jitMem), share(perf.named, perf.jitMem)
	t.Logf("profd: %d samples, %d in JIT memory, %.1f%% of them named; perf: %d samples, %d in JIT memory, %.1f%% named",
		profd.total, profd.jitMem, profdNamed, perf.total, perf.jitMem, perfNamed)
	if perf.jitMem < 200 || perfNamed < 50 {
		t.Fatalf("perf saw too little named JIT code to compare with: %d samples in JIT memory, %.1f%% named; perf's samples by object: %v", perf.jitMem, perfNamed, perf.perfObjects)
	}
	if profdNamed < 0.95*perfNamed {
		t.Errorf("profd named %.1f%% of the samples in JIT memory, perf %.1f%%: want at least 95 %% of perf's share", profdNamed, perfNamed)
	}
	var hot []string
	for _, name := range sortedNames(perf.funcs) {
		if share(perf.funcs[name], perf.jitMem) >= 5 || share(profd.funcs[name], profd.jitMem) >= 5 {
			hot = append(hot, name)
		}
	}
	var b strings.Builder
	bad := false
	for _, name := range hot {
		ps, qs := share(perf.funcs[name], perf.jitMem), share(profd.funcs[name], profd.jitMem)
		tol := shareTolerance(3, (ps+qs)/2, perf.jitMem, profd.jitMem, len(hot))
		fmt.Fprintf(&b, "  %-60.60s perf %5.1f%%  profd %5.1f%%  diff %+5.1f (±%.1f)\n", name, ps, qs, qs-ps, tol)
		if qs-ps > tol || ps-qs > tol {
			bad = true
		}
	}
	for name, n := range profd.funcs {
		if share(n, profd.jitMem) >= 5 && perf.funcs[name] == 0 {
			fmt.Fprintf(&b, "  %-60.60s perf   0.0%%  profd %5.1f%%  (perf has no such function)\n", name, share(n, profd.jitMem))
			bad = true
		}
	}
	if bad {
		t.Errorf("JIT functions' shares differ by more than 3 points or what sampling explains:\n%s", b.String())
	} else {
		t.Logf("JIT functions with 5%% or more:\n%s", b.String())
	}
	if len(hot) == 0 {
		t.Errorf("no JIT function has 5%% of the samples")
	}
	return hot
}

// runtimeWorkload is the path of one of workloads/runtimes' programs.
func runtimeWorkload(name string) string {
	p, _ := filepath.Abs(filepath.Join("..", "workloads", "runtimes", name))
	return p
}

// attachedFinal waits for the run to end (every target exited) and returns the capture of
// pid's final profile.
func finalCapture(t *testing.T, r *profdRun, d dirs, image string, pid int) *profileio.Capture {
	t.Helper()
	r.wait(t, 60*time.Second)
	return readCapture(t, outputPath(d, image, pid, FormatCapture))
}

// startNodeWaiting starts node with flag on 4 s of hot.js (in a directory of its own, where
// V8 writes its logs), and returns once hot.js waits: a byte on start begins its work, so that
// profilers attached one after the other see the same span (V8 names each tier of a
// function apart, and the first tiers run only in the first tens of milliseconds).
func startNodeWaiting(t *testing.T, flag string) (node *child, start io.WriteCloser) {
	t.Helper()
	cmd := exec.Command("node", flag, runtimeWorkload("hot.js"), "4", "wait")
	cmd.Dir = t.TempDir()
	return startWaiting(t, cmd)
}

// startWaiting starts cmd, a workload given the argument "wait", and returns once it prints
// "waiting": a byte on start begins its work. The files a runtime leaves (a perf map, an
// attach socket) are removed at the test's end.
func startWaiting(t *testing.T, cmd *exec.Cmd) (c *child, start io.WriteCloser) {
	t.Helper()
	c, start = startGated(t, cmd)
	t.Cleanup(c.removeRuntimeFiles)
	waitFor(t, "the workload to wait", 60*time.Second, func() bool {
		select {
		case <-c.done:
			t.Fatalf("%s ended before it waited: %v\n%s", cmd.Path, c.err, c.out.String())
		default:
		}
		return strings.Contains(c.out.String(), "waiting")
	})
	return c, start
}

// TestNodePerfBasicProf: node --perf-basic-prof writes /tmp/perf-PID.map as V8 compiles;
// profiled by --pid with --stacks, against perf record -g.
func TestNodePerfBasicProf(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("node"), testenv.Tool("perf"))
	d := newDirs(t)
	node, start := startNodeWaiting(t, "--perf-basic-prof")
	waitCodeMapped(t, node.pid(), false)
	perf := startPerf(t, node.pid(), 999, "-g")
	r := startRun(t, Config{Pids: []uint32{uint32(node.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out, Stacks: true})
	r.waitAdded(t, node.pid(), 60*time.Second)
	start.Write([]byte{1})
	start.Close()
	node.wait(t, 60*time.Second)
	c := finalCapture(t, r, d, "node", node.pid())
	compareWithPerf(t, profdTally(c), perfTally(perf.samples(t, node.pid(), false)))
	// Both LLVM profiles are written, whatever V8's names hold (blanks, which the text
	// format cannot hold in a call target, are left out of it: TestWriteOutputs).
	for _, f := range []Format{FormatLLVMText, FormatLLVMExtBinary} {
		if !fileExists(outputPath(d, "node", node.pid(), f)) {
			t.Errorf("no %s profile of node:\n%s", f, r.logs.String())
		}
	}
	// The main thread's: perf record -p follows the threads there when it starts. Where a JS
	// function was sampled before it set the frame pointer or after it tore it down, profd
	// keeps the caller perf skips, decided by the function's code as profd read it (node has
	// exited: the few such samples in its native code are compared as they are).
	compareStacksWithPerf(t, c, perf.stacks(t, node.pid(), false), node.pid(), returnSlotIn(t, node.pid(), c))
	// hot.js's byValue is called from one function of V8's sort, and most of its samples are
	// taken where it has not set the frame pointer: a walk that skips it there gives its
	// callers instead (a third from the right one).
	callers := map[string]uint64{}
	var byValue uint64
	for _, st := range c.Stacks {
		if len(st.Frames) > 1 && strings.HasPrefix(frameName(c, st.Frames[0]), "JS:*byValue") {
			callers[reportName(frameName(c, st.Frames[1]))] += st.Count
			byValue += st.Count
		}
	}
	top := sortedNames(callers)
	if byValue < 40 || callers[top[0]] < byValue*9/10 {
		t.Errorf("byValue's %d samples called from %v, want 90 %% from one function", byValue, callers)
	} else {
		t.Logf("byValue's %d samples: %d called from %s", byValue, callers[top[0]], top[0])
	}
	checkTraces(t, outputPath(d, "node", node.pid(), FormatPprof), "JS:")
	checkNativeMappings(t, outputPath(d, "node", node.pid(), FormatPprof))
}

// TestNodePerfProf: node --perf-prof writes jit-PID.dump into its working directory, where
// nothing tells profd to look but the process's mapping of it; profiled by --jit-image node,
// started before node.
func TestNodePerfProf(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("node"), testenv.Tool("perf"))
	d := newDirs(t)
	r := startRun(t, Config{JITImages: []string{"node"}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	waitFor(t, "profd to start", 10*time.Second, func() bool { return fileExists(filepath.Join(d.fifo, "profd.pid")) })
	node, start := startNodeWaiting(t, "--perf-prof")
	waitCodeMapped(t, node.pid(), true)
	perf := startPerf(t, node.pid(), 999)
	r.waitAdded(t, node.pid(), 60*time.Second)
	start.Write([]byte{1})
	start.Close()
	node.wait(t, 60*time.Second)
	waitFor(t, "node's final profile", 20*time.Second, func() bool {
		return fileExists(outputPath(d, "node", node.pid(), FormatCapture)) && strings.Contains(r.logs.String(), fmt.Sprintf("pid=%d final=true", node.pid()))
	})
	r.stop(t)
	c := readCapture(t, outputPath(d, "node", node.pid(), FormatCapture))
	compareWithPerf(t, profdTally(c), perfTally(perf.samples(t, node.pid(), true)))
}

// TestNodePerfProfInPidNamespace: node --perf-prof in a pid namespace of its own writes its
// namespace pid (1) in jit-1.dump's name and records; profd, watching --jit-image node, takes
// them as the process's. With the dump in a directory the host sees too, and in one only
// node's mount namespace sees.
func TestNodePerfProfInPidNamespace(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("node"), testenv.Tool("unshare"))
	for _, private := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared directory", true: "private directory"}[private], func(t *testing.T) {
			d := newDirs(t)
			r := startRun(t, Config{JITImages: []string{"node"}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
			waitFor(t, "profd to start", 10*time.Second, func() bool { return fileExists(filepath.Join(d.fifo, "profd.pid")) })
			dir := t.TempDir()
			script := `cd "$1" && exec node --perf-prof "$2" 4`
			if private {
				script = `mount -t tmpfs none "$1" && ` + script
			}
			cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c", script, "sh", dir, runtimeWorkload("hot.js"))
			container := startCmd(t, cmd)
			pid := inNamespace(t, container, "node")
			container.wait(t, 60*time.Second)
			waitFor(t, "node's final profile", 20*time.Second, func() bool {
				return fileExists(outputPath(d, "node", pid, FormatCapture)) && strings.Contains(r.logs.String(), fmt.Sprintf("pid=%d final=true", pid))
			})
			r.stop(t)
			tl := profdTally(readCapture(t, outputPath(d, "node", pid, FormatCapture)))
			if tl.jitMem < 200 || tl.named < tl.jitMem*9/10 || len(tl.funcs) < 3 {
				t.Errorf("%d of %d samples in JIT memory named (%d functions), want nearly all\nlogs:\n%s", tl.named, tl.jitMem, len(tl.funcs), r.logs.String())
			}
		})
	}
}

// startJavaWaiting starts java with args (ending in Hot's arguments) and "wait", and returns
// once Hot waits: it starts its work once a byte comes on start. perf record -p follows the
// threads there when it reads the process's task list, and the threads they start once its
// events are open; a JVM's threads all descend from the thread the launcher starts in its
// first milliseconds, so a perf that read the list just before that thread began, on a busy
// machine, recorded nothing of the JVM. The test's cleanup removes what the JVM leaves in
// /tmp (its map, and its attach socket when killed).
func startJavaWaiting(t *testing.T, args ...string) (java *child, start io.WriteCloser) {
	t.Helper()
	return startWaiting(t, exec.Command("java", append(args, "wait")...))
}

// startJavaProfiled starts java with args (ending in Hot's arguments), perf record and a
// profd run on it, and lets Hot start its work ("wait") once both are attached: each
// method's share moves as HotSpot replaces C1's code with C2's, so profilers attached one
// after the other while it ran would compare different spans.
func startJavaProfiled(t *testing.T, d dirs, args ...string) (*child, *perfRun, *profdRun) {
	t.Helper()
	java, start := startJavaWaiting(t, args...)
	perf := startPerf(t, java.pid(), 999)
	r := startRun(t, Config{Pids: []uint32{uint32(java.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	r.waitAdded(t, java.pid(), 60*time.Second)
	start.Write([]byte{1})
	start.Close()
	return java, perf, r
}

// TestJavaPerfMapAtExit: HotSpot writes /tmp/perf-PID.map only as it exits
// (-XX:+DumpPerfMapAtExit); every sample profd took while it ran waits unnamed until then
// and is named at the final flush.
func TestJavaPerfMapAtExit(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("perf"))
	classes := testenv.JavaClasses(t)
	d := newDirs(t)
	java, perf, r := startJavaProfiled(t, d, "-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit", "-cp", classes, "Hot", "4")
	java.wait(t, 60*time.Second)
	c := finalCapture(t, r, d, "java", java.pid())
	hot := compareWithPerf(t, profdTally(c), perfTally(perf.samples(t, java.pid(), false)))
	if !strings.Contains(strings.Join(hot, " "), "Hot.mixInts") {
		t.Errorf("Hot.mixInts is not among the hot functions %v", hot)
	}
}

// TestJavaPerfMapTwice: jcmd PID Compiler.perfmap writes the perf map anew each time it is
// asked; the second, longer one is read from its start, and the methods of both are named.
func TestJavaPerfMapTwice(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("perf"), testenv.Tool("jcmd"))
	classes := testenv.JavaClasses(t)
	d := newDirs(t)
	// The first dump names what HotSpot had compiled by then; the second, what it compiled
	// since as well. The JVM's CPU time marks their moments, however busy the machine: Hot's
	// thread runs for 5 s of it, and the JVM's other threads add theirs.
	java, perf, r := startJavaProfiled(t, d, "-cp", classes, "Hot", "5")
	mark := testenv.UserCPU(t, java.pid())
	for _, at := range []time.Duration{1500 * time.Millisecond, 3500 * time.Millisecond} {
		waitFor(t, fmt.Sprintf("the JVM to run for %v of CPU time", at), 60*time.Second, func() bool {
			return testenv.UserCPU(t, java.pid())-mark >= at
		})
		jcmdPerfMap(t, java.pid())
	}
	java.wait(t, 60*time.Second)
	c := finalCapture(t, r, d, "java", java.pid())
	compareWithPerf(t, profdTally(c), perfTally(perf.samples(t, java.pid(), false)))
	if n := strings.Count(r.logs.String(), "files: tailing"); n == 0 {
		t.Errorf("the perf map was never read:\n%s", r.logs.String())
	}
}

// TestJavaPerfMapAsked: with JavaPerfMapEvery, profd asks a JVM started without any flag
// for its perf map itself, so the intervals written while it runs name its compiled methods
// (without the asks every one of their samples in JIT memory is unnamed until a map comes),
// and the final profile names them as perf does with the map the JVM last wrote.
func TestJavaPerfMapAsked(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("perf"))
	classes := testenv.JavaClasses(t)
	d := newDirs(t)
	java, start := startJavaWaiting(t, "-cp", classes, "Hot", "5")
	perf := startPerf(t, java.pid(), 999)
	r := startRun(t, Config{Pids: []uint32{uint32(java.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		FlushInterval: 2 * time.Second, JavaPerfMapEvery: time.Second, Formats: []Format{FormatCapture}})
	r.waitAdded(t, java.pid(), 60*time.Second)
	start.Write([]byte{1})
	start.Close()
	java.wait(t, 60*time.Second)
	c := finalCapture(t, r, d, "java", java.pid())
	compareWithPerf(t, profdTally(c), perfTally(perf.samples(t, java.pid(), false)))

	// An interval the JVM ran through, from the second on (the first began before Hot's
	// work, and before the JVM compiled it), not the last (its exit's).
	ivs := intervalFiles(t, d.out, fmt.Sprintf("java-%d", java.pid()), FormatCapture)
	if len(ivs) < 3 {
		t.Fatalf("%d intervals: %v", len(ivs), ivs)
	}
	judged := 0
	for _, path := range ivs[1 : len(ivs)-1] {
		tl := profdTally(readCapture(t, path))
		if tl.jitMem < 50 { // too few to judge: a busy machine gave the JVM little of it
			continue
		}
		judged++
		if tl.named < tl.jitMem*9/10 || tl.funcs["int Hot.mixInts(int)"] == 0 {
			t.Errorf("%s: %d of %d samples in JIT memory named, %d of them Hot.mixInts; want nearly all named\nlogs:\n%s",
				filepath.Base(path), tl.named, tl.jitMem, tl.funcs["int Hot.mixInts(int)"], r.logs.String())
		}
	}
	if judged == 0 {
		t.Errorf("none of the intervals %v had 50 samples in JIT memory", ivs[1:len(ivs)-1])
	}
}

// TestJavaPerfMapAskedAtStop: profd asks the JVMs once more as it stops, so the final
// profiles name the methods compiled since the last time. The JVM is asked once early (the
// interval is an hour) and starts its work only after that map was read: only the ask at
// the stop can name Hot's methods.
func TestJavaPerfMapAskedAtStop(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	classes := testenv.JavaClasses(t)
	d := newDirs(t)
	java, start := startJavaWaiting(t, "-cp", classes, "Hot", "30")
	r := startRun(t, Config{Pids: []uint32{uint32(java.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		JavaPerfMapEvery: time.Hour, Formats: []Format{FormatCapture}})
	waitFor(t, "the JVM's first map read", 30*time.Second, func() bool {
		return strings.Contains(r.logs.String(), "files: tailing")
	})
	start.Write([]byte{1})
	start.Close()
	// HotSpot compiles Hot's methods: 2 s of the JVM's CPU time, however busy the machine.
	mark := testenv.UserCPU(t, java.pid())
	waitFor(t, "the JVM to run for 2 s of CPU time", 25*time.Second, func() bool {
		return testenv.UserCPU(t, java.pid())-mark >= 2*time.Second
	})
	r.stop(t)
	tl := profdTally(readCapture(t, outputPath(d, "java", java.pid(), FormatCapture)))
	if tl.jitMem < 200 || tl.named < tl.jitMem*9/10 || tl.funcs["int Hot.mixInts(int)"] == 0 {
		t.Errorf("final capture: %d of %d samples in JIT memory named, %d of them Hot.mixInts; want nearly all named\nlogs:\n%s",
			tl.named, tl.jitMem, tl.funcs["int Hot.mixInts(int)"], r.logs.String())
	}
}

// TestPidExecNode: profd --pid of a launcher script that execs node after a while (as the
// scripts of many servers do) profiles node as a target of its own from the exec on: profd
// goes on through the exec, node's outputs are named for node and name its functions from
// the perf map it writes, and profd stops by itself when node exits.
func TestPidExecNode(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("node"))
	d := newDirs(t)
	ready := readyFIFO(t)
	cmd := exec.Command("sh", "-c", `read x <"$0"; exec node --perf-basic-prof "$1" 3`, ready, runtimeWorkload("hot.js"))
	cmd.Dir = t.TempDir() // V8 writes its logs there
	launcher := startCmd(t, cmd)
	t.Cleanup(launcher.removeRuntimeFiles)
	pid := launcher.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatCapture}})
	r.waitAdded(t, pid, 10*time.Second)
	if err := os.WriteFile(ready, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	launcher.wait(t, 60*time.Second)
	tl := profdTally(finalCapture(t, r, d, "node", pid))
	var mix uint64
	for name, n := range tl.funcs {
		if strings.Contains(name, "mixInts") {
			mix += n
		}
	}
	if tl.jitMem < 200 || tl.named < tl.jitMem*9/10 || mix == 0 {
		t.Errorf("node's final capture: %d of %d samples in JIT memory named, %d of them mixInts; want nearly all named\nlogs:\n%s",
			tl.named, tl.jitMem, mix, r.logs.String())
	}
	if n := strings.Count(r.logs.String(), `msg="profd: target added" pid=`+strconv.Itoa(pid)+" "); n != 2 {
		t.Errorf("pid %d added %d times, want twice (the shell, then node)", pid, n)
	}
}

// TestPidExecFIFOJIT: profd --pid of a shell that execs a JIT speaking profd's FIFO: the
// JIT opens the FIFO as it starts, within a millisecond of the exec, which is before profd
// has seen the exec. The FIFO is the process's and stays through the exec (the same file),
// so the JIT's records reach the target it runs as, and its outputs name its functions.
func TestPidExecFIFOJIT(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	testjit, _ := workloads(t)
	d := newDirs(t)
	ready := readyFIFO(t)
	launcher := startCmd(t, exec.Command("sh", "-c", `read x <"$0"; exec "$1" -d "$2" -m 1500 -w 3000`, ready, testjit, d.fifo))
	pid := launcher.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatCapture}})
	r.waitAdded(t, pid, 10*time.Second)
	execFIFOJIT(t, launcher, ready, filepath.Join(d.fifo, strconv.Itoa(pid)+".map"))
	launcher.wait(t, 30*time.Second)
	tl := profdTally(finalCapture(t, r, d, "testjit", pid))
	if tl.jitMem < 200 || tl.named < tl.jitMem*9/10 || tl.funcs["count_medium"] == 0 {
		t.Errorf("the JIT's final capture: %d of %d samples in JIT memory named, %d of them count_medium; want nearly all named\n%s\nlogs:\n%s",
			tl.named, tl.jitMem, tl.funcs["count_medium"], launcher.out.String(), r.logs.String())
	}
}

// readyFIFO makes a FIFO a launcher script reads a line from before it execs its program.
func readyFIFO(t *testing.T) string {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	return ready
}

// execFIFOJIT has launcher, a shell waiting for a line on ready, exec a JIT that speaks
// profd's FIFO, and checks that the JIT connects to the FIFO at fifoPath, the same file the
// shell had before the exec.
func execFIFOJIT(t *testing.T, launcher *child, ready, fifoPath string) {
	t.Helper()
	var before syscall.Stat_t
	waitFor(t, "the shell's FIFO", 10*time.Second, func() bool { return syscall.Stat(fifoPath, &before) == nil })
	if err := os.WriteFile(ready, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the JIT to connect", 10*time.Second, func() bool { return strings.Contains(launcher.out.String(), "profd connected") })
	var after syscall.Stat_t
	if err := syscall.Stat(fifoPath, &after); err != nil || after.Ino != before.Ino {
		t.Errorf("the FIFO was made anew through the exec (inode %d, then %d, %v)", before.Ino, after.Ino, err)
	}
}

// TestNodeInContainer: node --perf-basic-prof in its own mount and pid namespaces with a
// private /tmp writes /tmp/perf-1.map there; profd reads it through the process's root,
// under the pid it has inside. perf report does not find that map: for the comparison the
// test copies it to the host's /tmp/perf-HOSTPID.map while node runs, as a perf user
// would.
func TestNodeInContainer(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("node"), testenv.Tool("perf"), testenv.Tool("unshare"))
	d := newDirs(t)
	// The script is read before the private /tmp hides it (the tree may live under /tmp).
	cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
		`s=$(cat "$1") && mount -t tmpfs none /tmp && printf '%s\n' "$s" >/tmp/hot.js && exec node --perf-basic-prof /tmp/hot.js 4`,
		"sh", runtimeWorkload("hot.js"))
	cmd.Dir = t.TempDir() // V8 writes its logs there
	container := startCmd(t, cmd)
	pid := inNamespace(t, container, "node")
	waitCodeMapped(t, pid, false)
	perf := startPerf(t, pid, 999)
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	hostMap := fmt.Sprintf("/tmp/perf-%d.map", pid)
	defer func() { testenv.RemoveRuntimeFiles(pid, container.endedAt()) }()
	for running := true; running; {
		select {
		case <-container.done:
			running = false
		case <-time.After(200 * time.Millisecond):
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/tmp/perf-1.map", pid)); err == nil {
				os.WriteFile(hostMap, b, 0o644)
			}
		}
	}
	container.wait(t, 60*time.Second)
	c := finalCapture(t, r, d, "node", pid)
	compareWithPerf(t, profdTally(c), perfTally(perf.samples(t, pid, false)))
}

// inNamespace waits for the executable named exe to run as the child of unshare --fork,
// container, and returns its pid.
func inNamespace(t *testing.T, container *child, exe string) int {
	t.Helper()
	pid := testenv.ChildOf(container.pid(), 10*time.Second, func(pid int) bool {
		return readlinkBase(fmt.Sprintf("/proc/%d/exe", pid)) == exe
	})
	if pid == 0 {
		t.Fatalf("%s did not run in its namespace in 10 s", exe)
	}
	return pid
}

func readlinkBase(path string) string {
	s, _ := os.Readlink(path)
	return filepath.Base(s)
}

// postgres is a PostgreSQL server of the test's own, on a Unix socket in a temporary
// directory, run by the postgres user with the LLVM JIT on for every query and writing
// jitdump files (jit_profiling_support) under a JITDUMPDIR of its own, which profd is not
// told of; settings (postgres -c NAME=VALUE) are added to those.
type postgres struct {
	bin, sock string
	server    *child
}

func startPostgres(t *testing.T, settings ...string) *postgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		t.Fatal("no PostgreSQL server under /usr/lib/postgresql (package postgresql; make deps installs it)")
	}
	bin := filepath.Dir(bins[len(bins)-1])
	testenv.Requires(t, testenv.Root, testenv.Tool("psql"))
	base, err := os.MkdirTemp("", "profd-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	for _, dir := range []string{base, base + "/sock", base + "/jitdump"} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := exec.Command("chown", "postgres:", dir).Run(); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("su", "postgres", "-s", "/bin/sh", "-c", bin+"/initdb -A trust -D "+base+"/data").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	pg := &postgres{bin: bin, sock: base + "/sock"}
	pg.server = startChild(t, nil, "su", "postgres", "-s", "/bin/sh", "-c", "JITDUMPDIR="+base+"/jitdump exec "+bin+"/postgres -D "+base+
		"/data -k "+pg.sock+" -c listen_addresses= -c jit=on -c jit_above_cost=0 -c jit_inline_above_cost=0"+
		" -c jit_optimize_above_cost=0 -c jit_profiling_support=on"+strings.Join(append([]string{""}, settings...), " -c "))
	// Stopped before the child's own cleanup, which would wait for su's output: the server
	// holds it open.
	t.Cleanup(func() {
		exec.Command("su", "postgres", "-s", "/bin/sh", "-c", bin+"/pg_ctl -D "+base+"/data -m immediate stop").Run()
	})
	waitFor(t, "postgres to accept connections", 30*time.Second, func() bool {
		return exec.Command("su", "postgres", "-s", "/bin/sh", "-c", "psql -h "+pg.sock+" -d postgres -c 'select 1'").Run() == nil
	})
	return pg
}

// session is a psql session: one backend.
type session struct {
	in  io.WriteCloser
	out *bufio.Reader
	cmd *exec.Cmd
}

func (pg *postgres) session(t *testing.T) *session {
	t.Helper()
	cmd := exec.Command("su", "postgres", "-s", "/bin/sh", "-c", "psql -X -q -A -t -h "+pg.sock+" -d postgres")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return &session{in: in, out: bufio.NewReader(out), cmd: cmd}
}

// end quits the session and waits for profd to write its backend's final profile.
func (s *session) end(t *testing.T, r *profdRun, backend int) {
	t.Helper()
	io.WriteString(s.in, "\\q\n")
	s.cmd.Wait()
	waitFor(t, "the backend's final profile", 20*time.Second, func() bool {
		return strings.Contains(r.logs.String(), fmt.Sprintf("pid=%d final=true", backend))
	})
}

// query runs one statement and returns its first line of output.
func (s *session) query(t *testing.T, sql string) string {
	t.Helper()
	if _, err := io.WriteString(s.in, sql+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := s.out.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return strings.TrimSpace(line)
}

// TestPostgresJIT: a PostgreSQL backend compiles a CPU-heavy query's expressions with LLVM;
// profd, watching --jit-image postgres from before the query, finds the backend as it is
// forked and its jitdump through its environment and mappings, names the evalexpr_*
// functions as perf inject --jit does, names the server's own functions from its symbols
// as perf report does, gives the call chains perf record -g does, and writes an LLVM profile
// of the JIT's that llvm-profdata-14 reads.
func TestPostgresJIT(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("perf"), testenv.Tool("llvm-profdata-14"))
	pg := startPostgres(t)
	d := newDirs(t)
	r := startRun(t, Config{JITImages: []string{"postgres"}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out, Stacks: true,
		ResetOnFlush: true})
	waitFor(t, "profd to start", 10*time.Second, func() bool { return fileExists(filepath.Join(d.fifo, "profd.pid")) })
	s := pg.session(t)
	backend, err := strconv.Atoi(s.query(t, "select pg_backend_pid();"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := procfs.ReadStat(uint32(backend))
	if err != nil {
		t.Fatal(err)
	}
	postmaster := int(st.Parent)
	perf := startPerf(t, backend, 999, "-g")
	// profd has sampled the backend since its fork (its start-up: catalogs, allocations),
	// perf from here: a flush (SIGUSR1) starts profd's counts anew, so that both hold the
	// same span.
	flushed := strings.Count(r.logs.String(), `msg="profd: counters"`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the flush that starts profd's span", 10*time.Second, func() bool {
		return strings.Count(r.logs.String(), `msg="profd: counters"`) > flushed
	})
	// About 4 s of queries, 12 % of it in JIT code (perf's 200 samples there at the least,
	// on a loaded machine: at 2.5 s, one run in a full make test had 172).
	s.query(t, "select sum(x % 7 + x % 11 * 3 + (x * 31) % 101) from generate_series(1::bigint, 25000000) x where x % 5 <> 2;")
	s.query(t, "select sum(x % 13 * 5 + x % 3) from generate_series(1::bigint, 16000000) x where x % 7 <> 3;")
	s.end(t, r, backend)
	r.stop(t)
	c := readCapture(t, outputPath(d, "postgres", backend, FormatCapture))
	perfSamples := perf.samples(t, backend, true)
	hot := compareWithPerf(t, profdTally(c), perfTally(perfSamples))
	if !strings.Contains(strings.Join(hot, " "), "evalexpr_") {
		t.Errorf("no evalexpr_* function among the hot ones: %v", hot)
	}
	compareNativeWithPerf(t, c, perfSamples, "/postgres")
	// The functions LLVM compiled keep no frame pointer: where one was sampled with its
	// return address near the stack pointer, the caller perf skips is kept too.
	compareStacksWithPerf(t, c, perf.stacks(t, backend, true), backend, returnSlotIn(t, postmaster, c))
	checkTraces(t, outputPath(d, "postgres", backend, FormatPprof), "evalexpr_")
	checkNativeMappings(t, outputPath(d, "postgres", backend, FormatPprof))
	text := outputPath(d, "postgres", backend, FormatLLVMText)
	out, err := exec.Command("llvm-profdata-14", "show", "--sample", "--all-functions", text).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "evalexpr_") {
		t.Errorf("llvm-profdata-14 show --sample %s: %v\n%s", text, err, out)
	}
}

// returnSlotIn reports whether the function at a frame has not set the frame pointer there
// and has its return address near the stack pointer, as the sampler decides it
// (unwind.Unwinder.ReturnSlot): outside JIT code, by the .eh_frame of the file process pid
// maps there (for PostgreSQL, the postmaster, whose backends are forked with its code where
// it is); in JIT code, by the code bytes of c's object, handed to the Unwinder as the daemon
// hands it a load's, each under a pid of its own that no process has (the objects of a run
// may lie where others were).
func returnSlotIn(t *testing.T, pid int, c *profileio.Capture) func(f profileio.Frame) bool {
	u := unwind.New(unwind.Config{ReturnSlotsOnly: true})
	t.Cleanup(u.Close)
	const objectPids = 1 << 30 // above any pid (PID_MAX_LIMIT is 1<<22)
	for id, o := range c.Objects {
		u.Follow(objectPids + uint32(id))
		u.AddJITCode(objectPids+uint32(id), o.Object.Addr, o.Object.Code)
	}
	return func(f profileio.Frame) bool {
		at := uint32(pid)
		if f.JIT() {
			at = objectPids + uint32(f.Object)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			_, ok, later := u.ReturnSlot(at, f.Address)
			if !later || time.Now().After(deadline) {
				return ok
			}
		}
	}
}

// TestPostgresRegisteredJIT: a PostgreSQL server with jit_debugging_support and without
// jit_profiling_support writes no jitdump, but its LLVM JIT registers every object with the
// GDB JIT interface: profd names the evalexpr_* functions from those objects (90 % of the
// samples in JIT memory or more), though the backend loads LLVM only at its first compiled
// query, and with --unwind dwarf their samples' chains go on through the JIT code, which
// keeps no frame pointer, into the executor.
func TestPostgresRegisteredJIT(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	pg := startPostgres(t, "jit_profiling_support=off", "jit_debugging_support=on")
	d := newDirs(t)
	r := startRun(t, Config{JITImages: []string{"postgres"}, Event: "cpu-clock", Backend: sampler.BackendRing, FifoDir: d.fifo,
		OutDir: d.out, Formats: []Format{FormatCapture}, Stacks: true, Unwind: UnwindDWARF})
	waitFor(t, "profd to start", 10*time.Second, func() bool { return fileExists(filepath.Join(d.fifo, "profd.pid")) })
	s := pg.session(t)
	backend, err := strconv.Atoi(s.query(t, "select pg_backend_pid();"))
	if err != nil {
		t.Fatal(err)
	}
	s.query(t, "select sum(x % 7 + x % 11 * 3 + (x * 31) % 101) from generate_series(1::bigint, 15000000) x where x % 5 <> 2;")
	s.end(t, r, backend)
	r.stop(t)
	c := readCapture(t, outputPath(d, "postgres", backend, FormatCapture))
	var named, executor uint64
	for _, o := range c.Objects {
		if strings.HasPrefix(o.Object.Name, "evalexpr_") && o.Object.Source == codeobj.SourceGDBJIT {
			named += o.TotalSamples()
		}
	}
	for _, st := range c.Stacks {
		if len(st.Frames) < 2 || !st.Frames[0].JIT() || !strings.HasPrefix(c.Objects[st.Frames[0].Object].Object.Name, "evalexpr_") {
			continue
		}
		for _, f := range st.Frames[1:] {
			if f.Function == "PostgresMain" {
				executor += st.Count
				break
			}
		}
	}
	unnamed := c.UnnamedSamples()
	t.Logf("%d samples in evalexpr_* functions named from registered objects (%d unnamed in JIT memory), %d of them chained into PostgresMain", named, unnamed, executor)
	if named < 50 || float64(unnamed) > 0.1*float64(named+unnamed) {
		t.Fatalf("%d samples named from registered objects, %d unnamed: want 90 %% named\nlogs:\n%s", named, unnamed, r.logs.String())
	}
	if float64(executor) < 0.8*float64(named) {
		t.Errorf("%d of %d samples in evalexpr_* functions chained into PostgresMain", executor, named)
	}
}

// jcmdPerfMap asks a JVM for its perf map. jcmd attaches through a socket the JVM makes when
// signalled; a JVM that a busy machine has not scheduled in time makes jcmd give up, so it
// asks up to three times.
func jcmdPerfMap(t *testing.T, pid int) {
	t.Helper()
	var out []byte
	var err error
	for try := 0; try < 3; try++ {
		if out, err = exec.Command("jcmd", strconv.Itoa(pid), "Compiler.perfmap").CombinedOutput(); err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("jcmd: %v\n%s", err, out)
}

// compareNativeWithPerf holds profd's native functions to perf's. Where both sampled the
// same address of the file whose path ends in binary, profd names it as perf does (the same
// function, or neither) for at least 99 % of perf's samples there: this does not depend on
// when each sampler started. Of all the samples in that file, profd names at least 95 % of
// the share perf names, and each of the five native functions with the most samples (by
// either) has the same share of all the process's samples, within 2 points or four
// standard errors of sampling (shareTolerance), whichever is more.
func compareNativeWithPerf(t *testing.T, c *profileio.Capture, ss []perfSample, binary string) {
	t.Helper()
	jit, outside := c.TotalSamples()
	profdTotal := jit + outside + c.UnnamedSamples()
	profdFuncs := map[string]uint64{}
	byAddress := map[uint64]string{}
	var profdIn, profdNamed uint64
	for _, m := range c.Native {
		for _, s := range m.Samples {
			if strings.HasSuffix(m.File, binary) {
				profdIn += s.Count
				byAddress[s.Address] = s.Function
				if s.Function != "" {
					profdNamed += s.Count
				}
			}
			if s.Function != "" {
				profdFuncs[s.Function] += s.Count
			}
		}
	}
	profdIn += unmappedSamples(c, func(m string) bool { return strings.HasSuffix(m, binary) })
	perfFuncs := map[string]uint64{}
	var perfIn, perfNamed, both, agree uint64
	var disagree []string
	for _, s := range ss {
		if perfJITObject.MatchString(s.dso) {
			continue
		}
		sym := s.sym
		if sym == "[unknown]" || strings.HasPrefix(sym, "0x") {
			sym = ""
		}
		if strings.HasSuffix(s.dso, binary) {
			perfIn++
			if sym != "" {
				perfNamed++
			}
			if name, ok := byAddress[s.ip]; ok {
				both++
				if name == sym {
					agree++
				} else if len(disagree) < 5 {
					disagree = append(disagree, fmt.Sprintf("%#x: perf %q, profd %q", s.ip, sym, name))
				}
			}
		}
		if sym != "" {
			perfFuncs[sym]++
		}
	}
	t.Logf("in %s: profd %d samples, %.1f%% named; perf %d samples, %.1f%% named; at the %d perf samples at addresses both sampled, the same name for %.1f%%",
		binary, profdIn, share(profdNamed, profdIn), perfIn, share(perfNamed, perfIn), both, share(agree, both))
	if perfIn < 100 || both < 100 {
		t.Fatalf("perf saw %d samples in %s, %d at addresses profd sampled: too few to compare with", perfIn, binary, both)
	}
	if share(agree, both) < 99 {
		t.Errorf("profd names %.1f%% of the addresses both sampled as perf does, want 99 %%: %v", share(agree, both), disagree)
	}
	profdShare, perfShare := share(profdNamed, profdIn), share(perfNamed, perfIn)
	if tol := shareTolerance(0.05*perfShare, (profdShare+perfShare)/2, profdIn, perfIn, 1); profdShare < perfShare-tol {
		t.Errorf("profd named %.1f%% of the samples in %s, perf %.1f%% (±%.1f)", profdShare, binary, perfShare, tol)
	}
	var b strings.Builder
	bad := false
	top := map[string]bool{}
	var names []string
	for _, byOne := range []map[string]uint64{perfFuncs, profdFuncs} {
		for i, name := range sortedNames(byOne) {
			if i < 5 && !top[name] {
				top[name] = true
				names = append(names, name)
			}
		}
	}
	for _, name := range names {
		ps, qs := share(perfFuncs[name], uint64(len(ss))), share(profdFuncs[name], profdTotal)
		tol := shareTolerance(2, (ps+qs)/2, profdTotal, uint64(len(ss)), len(names))
		fmt.Fprintf(&b, "  %-40.40s perf %5.1f%%  profd %5.1f%%  diff %+5.1f (±%.1f)\n", name, ps, qs, qs-ps, tol)
		if qs-ps > tol || ps-qs > tol {
			bad = true
		}
	}
	if bad {
		t.Errorf("native functions' shares differ by more than 2 points or what sampling explains:\n%s", b.String())
	} else {
		t.Logf("the top native functions:\n%s", b.String())
	}
	if len(names) == 0 {
		t.Errorf("no native function named")
	}
}
