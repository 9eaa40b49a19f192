package daemon

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// allSpinSource spins for as many milliseconds of its own CPU time as its first argument
// says (from its first instruction of main), then sleeps as many milliseconds as its
// second says, and exits.
const allSpinSource = `
#include <stdlib.h>
#include <time.h>

static double cpu(void) {
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
	double end = cpu() + atoi(argv[1]) / 1000.0;
	volatile unsigned long n = 0;
	/* CLOCK_PROCESS_CPUTIME_ID is a system call: read it rarely, so that the time is spent
	   in user mode, which profd samples */
	while (cpu() < end)
		for (int i = 0; i < 100000; i++)
			n++;
	struct timespec ts = {0, 0};
	long ms = argc > 2 ? atol(argv[2]) : 0;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
	return 0;
}
`

// buildAllSpin compiles allSpinSource as profd-allspin and copies it as profd-allspin2 (another
// file, another image), in a directory every user can reach; it returns their paths.
func buildAllSpin(t testing.TB) (spin, spin2 string) {
	t.Helper()
	workloads(t) // gcc, x86-64
	dir := testenv.ReachableTempDir(t)
	src := filepath.Join(dir, "allspin.c")
	if err := os.WriteFile(src, []byte(allSpinSource), 0o644); err != nil {
		t.Fatal(err)
	}
	spin, spin2 = filepath.Join(dir, "profd-allspin"), filepath.Join(dir, "profd-allspin2")
	if err := runAll([]string{"gcc", "-O1", "-o", spin, src}, []string{"cp", spin, spin2}); err != nil {
		t.Fatal(err)
	}
	return spin, spin2
}

// pidJITSamples sums the samples in named JIT code and those left unnamed in JIT memory over
// the captures of image that hold process pid.
func pidJITSamples(t *testing.T, d dirs, image string, pid int) (named, unnamed uint64) {
	t.Helper()
	for _, path := range pidCaptures(t, d, image, pid) {
		c := readCapture(t, path)
		n, _ := c.TotalSamples()
		named += n
		unnamed += c.UnnamedSamples()
	}
	return named, unnamed
}

// pidCaptures are the paths of the captures in d of process pid running image ("": any):
// <image>-<pid>.profd, and <image>-<pid>.N.profd when it was added again (a process that
// execs is; it may have been found with its new image's name before its exec was seen).
func pidCaptures(t *testing.T, d dirs, image string, pid int) []string {
	t.Helper()
	name := regexp.QuoteMeta(image)
	if image == "" {
		name = ".+"
	}
	re := regexp.MustCompile("^" + name + "-" + strconv.Itoa(pid) + `(\.[0-9]+)?\.profd$`)
	entries, err := os.ReadDir(d.out)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if re.MatchString(e.Name()) {
			out = append(out, filepath.Join(d.out, e.Name()))
		}
	}
	return out
}

// allSamples is the samples of the captures of pid running image ("": any) in d; -1 when
// it has none.
func allSamples(t *testing.T, d dirs, image string, pid int) int {
	t.Helper()
	paths := pidCaptures(t, d, image, pid)
	if len(paths) == 0 {
		return -1
	}
	n := 0
	for _, path := range paths {
		c := readCapture(t, path)
		jit, outside := c.TotalSamples()
		n += int(jit + outside)
		for _, u := range c.Unnamed {
			n += int(u.Count)
		}
	}
	return n
}

// startRunAll starts profd --all with cfg's filters, sampling cpu-clock at 999 Hz into d,
// and waits until it has scanned /proc once.
func startRunAll(t *testing.T, cfg Config, d dirs) *profdRun {
	t.Helper()
	cfg.All, cfg.Event, cfg.FreqHz, cfg.FifoDir, cfg.OutDir = true, "cpu-clock", 999, d.fifo, d.out
	cfg.Formats = []Format{FormatCapture}
	cfg.GroupBy = cmp.Or(cfg.GroupBy, GroupByProcess) // the tests look at each process's outputs
	r := startRun(t, cfg)
	waitFor(t, "profd to start", 10*time.Second, func() bool { return strings.Contains(r.summary.String(), "profiling every process") })
	return r
}

// TestAllUIDAndExcludeImage: profd --all --uid 65534 --exclude-image profd-allspin2 profiles
// nobody's profd-allspin process, started before profd, and another started after it, and
// not root's process of the same file, nor nobody's profd-allspin2; nobody owns its outputs;
// a process of nobody's that never ran while profd did (a sleep) has no output.
func TestAllUIDAndExcludeImage(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	spin, spin2 := buildAllSpin(t)
	d := sharedDirs(t)
	// It spins long enough to be running once profd is, however slow profd's start.
	before := startAsUser(t, targetUID, spin, "2000", "1000")
	root := startCmd(t, exec.Command(spin, "300", "3000"))
	excluded := startAsUser(t, targetUID, spin2, "300", "3000")
	asleep := startAsUser(t, targetUID, "/bin/sleep", "30")
	r := startRunAll(t, Config{UIDs: []uint32{targetUID}, ExcludeImages: []string{spin2}}, d)
	after := startAsUser(t, targetUID, spin, "300", "0")
	after.wait(t, 60*time.Second)
	r.stop(t) // the final flush writes what the exits have not

	for _, c := range []*child{before, after} {
		if n := allSamples(t, d, "profd-allspin", c.pid()); n <= 0 {
			t.Errorf("nobody's pid %d: %d samples, want some\nlogs:\n%s", c.pid(), n, r.logs.String())
		}
		for _, path := range pidCaptures(t, d, "", c.pid()) {
			var st syscall.Stat_t
			if err := syscall.Stat(path, &st); err != nil || st.Uid != targetUID || st.Mode&0o777 != 0o600 {
				t.Errorf("%s: uid %d mode %#o (%v), want nobody's, 0600", path, st.Uid, st.Mode&0o777, err)
			}
		}
	}
	if n := allSamples(t, d, "", root.pid()); n >= 0 {
		t.Errorf("root's pid %d was profiled (%d samples)", root.pid(), n)
	}
	if n := allSamples(t, d, "sleep", asleep.pid()); n >= 0 {
		t.Errorf("a process that never ran has an output (%d samples): want none", n)
	}
	if n := allSamples(t, d, "profd-allspin2", excluded.pid()); n >= 0 {
		t.Errorf("pid %d of the excluded image was profiled (%d samples)", excluded.pid(), n)
	}
	entries, _ := os.ReadDir(d.out)
	for _, e := range entries {
		// An output is its target's user's. (Not only this test's processes are nobody's:
		// another package's tests, run beside this one, start some too.)
		var st syscall.Stat_t
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		if err := syscall.Stat(filepath.Join(d.out, e.Name()), &st); err != nil || st.Uid != targetUID {
			t.Errorf("%s in --out: owner uid %d (%v): a process that is not nobody's was profiled", e.Name(), st.Uid, err)
		}
	}
}

// TestAllCgroup: profd --all --cgroup PATH (in the form /proc/PID/cgroup names it) profiles
// the process in a cgroup the test makes, and not the same program outside it.
func TestAllCgroup(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	spin, _ := buildAllSpin(t)
	name := "profd-test-" + randomHex(6)
	cg := testenv.Cgroup(t, name)
	d := newDirs(t)
	r := startRunAll(t, Config{Cgroups: []string{"/" + name}}, d)
	inside := startCmdInCgroup(t, int(cg.Fd()), spin, "200", "0")
	outside := startCmd(t, exec.Command(spin, "200", "0"))
	inside.wait(t, 60*time.Second)
	outside.wait(t, 60*time.Second)
	r.stop(t) // the final flush writes what the exits have not
	if n := allSamples(t, d, "profd-allspin", inside.pid()); n <= 0 {
		t.Errorf("the process in the cgroup: %d samples, want some", n)
	}
	if n := allSamples(t, d, "", outside.pid()); n >= 0 {
		t.Errorf("the process outside the cgroup was profiled (%d samples)", n)
	}
	entries, _ := os.ReadDir(d.out)
	for _, e := range entries {
		if strings.Contains(e.Name(), "-"+strconv.Itoa(outside.pid())+".") {
			t.Errorf("%s in --out: the process outside the cgroup was profiled", e.Name())
		}
	}
}

// TestAllFirstSamples: a process started after profd --all is sampled from its start: it
// spins for its first 10 ms of CPU time only, and its captures have samples of them (about
// ten at 999 Hz; a target added 10 ms of its CPU time late has none). Both back ends.
// (The workload spins in user mode: profd samples no kernel mode without --kernel-stacks.)
func TestAllFirstSamples(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	spin, _ := buildAllSpin(t)
	for _, backend := range []sampler.Backend{sampler.BackendBPF, sampler.BackendRing} {
		t.Run(string(backend), func(t *testing.T) {
			if backend == sampler.BackendBPF {
				testenv.Requires(t, testenv.BPF)
			}
			d := sharedDirs(t)
			r := startRunAll(t, Config{UIDs: []uint32{targetUID}, Backend: backend}, d)
			const runs = 5
			var kids []*child
			for i := 0; i < runs; i++ {
				c := startAsUser(t, targetUID, spin, "10", "50")
				c.wait(t, 60*time.Second)
				kids = append(kids, c)
			}
			r.stop(t) // the final flush writes what the exits have not
			var counts []string
			sampled := 0
			for _, c := range kids {
				// The child is nobody's from its setuid, before its exec: it may have been
				// a target running this test's binary until then, whose output holds the
				// samples taken after the exec until it was added anew.
				n := allSamples(t, d, "", c.pid())
				counts = append(counts, strconv.Itoa(n))
				if n > 0 {
					sampled++
				}
			}
			t.Logf("samples of each process's first 10 ms of CPU time: %s", strings.Join(counts, " "))
			// A target found by a scan instead (every 5 s) would have none; one process in
			// five may lose its few samples to its exec (it was a target before it, as
			// nobody, and is added anew after it).
			if sampled < runs-1 {
				entries, _ := os.ReadDir(d.out)
				for _, e := range entries {
					t.Logf("--out holds %s", e.Name())
				}
				t.Errorf("%d of %d processes have samples of their first 10 ms (%s)\nlogs:\n%s", sampled, runs, strings.Join(counts, " "), r.logs.String())
			}
		})
	}
}

// TestAllSymbolSources: with --all, a JIT whose environment has PROFD_DIR gets a FIFO and
// its functions are named; a process with no JIT gets no FIFO and no file readers, and its
// samples are still counted.
func TestAllSymbolSources(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	testjit := reachableTestJIT(t)
	spin, _ := buildAllSpin(t)
	d := sharedDirs(t)
	r := startRunAll(t, Config{UIDs: []uint32{targetUID}}, d)
	cmd := exec.Command(testjit, "-d", d.fifo, "-m", "100", "-w", "10000")
	cmd.Env = append(os.Environ(), "PROFD_DIR="+d.fifo)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: targetUID, Gid: targetUID}}
	jit := startCmd(t, cmd)
	plain := startAsUser(t, targetUID, spin, "200", "0")
	jit.wait(t, 60*time.Second)
	plain.wait(t, 60*time.Second)
	r.stop(t) // the final flush writes what the exits have not
	summary := r.summary.String()
	if want := "reading the JIT symbols of pid " + strconv.Itoa(jit.pid()) + " (testjit): symbols FIFO"; !strings.Contains(summary, want) {
		t.Errorf("summary lacks %q:\n%s", want, summary)
	}
	if strings.Contains(summary, "reading the JIT symbols of pid "+strconv.Itoa(plain.pid())) {
		t.Errorf("the process with no JIT got symbol sources:\n%s", summary)
	}
	named := 0
	for _, path := range pidCaptures(t, d, "testjit", jit.pid()) {
		named += len(jitTotals(readCapture(t, path)))
	}
	if named == 0 {
		t.Errorf("the JIT's captures name none of its functions\n%s\n%s", summary, r.logs.String())
	}
	if n := allSamples(t, d, "profd-allspin", plain.pid()); n <= 0 {
		t.Errorf("the process with no JIT: %d samples, want some", n)
	}
}

// TestAllShortJIT: with --all, a JIT that runs for about three seconds, less than the
// period of the scans, has its jitdump found while it runs (the checks of a process without
// symbol sources come as their waits end, not only after a scan): its samples are named.
func TestAllShortJIT(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"), testenv.Tool("lli-14"))
	_, hotLL := workloads(t)
	d := sharedDirs(t)
	base := filepath.Dir(d.out)
	ir, jitdumps := filepath.Join(base, "hot.ll"), filepath.Join(base, "jitdump-short")
	data, err := os.ReadFile(hotLL)
	if err == nil {
		err = os.WriteFile(ir, data, 0o644)
	}
	if err == nil {
		err = os.Mkdir(jitdumps, 0o777)
	}
	if err == nil {
		err = os.Chmod(jitdumps, 0o777) // lli-14 makes its jitdump there as the target's user
	}
	if err != nil {
		t.Fatal(err)
	}
	r := startRunAll(t, Config{UIDs: []uint32{targetUID}}, d)
	cmd := exec.Command("lli-14", "-jit-kind=mcjit", ir, "300", "100")
	cmd.Env = append(os.Environ(), "JITDUMPDIR="+jitdumps)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: targetUID, Gid: targetUID}}
	jit := startCmd(t, cmd)
	jit.wait(t, 60*time.Second)
	r.stop(t)
	named, unnamed := pidJITSamples(t, d, "lli", jit.pid())
	t.Logf("%d samples in named JIT code, %d unnamed", named, unnamed)
	if named == 0 || unnamed > named/10 {
		t.Errorf("%d samples in named JIT code, %d unnamed: the jitdump was not read while the JIT ran\n%s\n%s", named, unnamed, r.summary.String(), r.logs.String())
	}
}

// TestAllRegisteredJIT: with --all, a JIT that writes no symbol files but registers its
// objects with the GDB JIT interface (lli-14's default JIT) is found by its registrations
// while it runs, and its samples are named from them; the summary says where its symbols
// come from.
func TestAllRegisteredJIT(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"), testenv.Tool("lli-14"))
	_, hotLL := workloads(t)
	d := sharedDirs(t)
	ir := filepath.Join(filepath.Dir(d.out), "hot-registered.ll")
	data, err := os.ReadFile(hotLL)
	if err == nil {
		err = os.WriteFile(ir, data, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	r := startRunAll(t, Config{UIDs: []uint32{targetUID}}, d)
	// About six seconds: past the checks at 1 and 3 s of age, with room for a busy machine.
	cmd := exec.Command("lli-14", ir, "600", "100")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: targetUID, Gid: targetUID}}
	jit := startCmd(t, cmd)
	jit.wait(t, 60*time.Second)
	r.stop(t)
	summary := r.summary.String()
	if want := "reading the JIT symbols of pid " + strconv.Itoa(jit.pid()) + " (lli): " + lookedRegistered; !strings.Contains(summary, want) {
		t.Errorf("summary lacks %q:\n%s", want, summary)
	}
	named, unnamed := pidJITSamples(t, d, "lli", jit.pid())
	t.Logf("%d samples in named JIT code, %d unnamed", named, unnamed)
	if named == 0 || unnamed > named/10 {
		t.Errorf("%d samples in named JIT code, %d unnamed: the registered objects were not read while the JIT ran\n%s\n%s", named, unnamed, summary, r.logs.String())
	}
}

// TestAllShortLivedRegisteredJIT: under --all, eight lli-14 processes that each run ORC for
// about half a second, found at their exec (before their JIT library is mapped), have
// their samples in JIT memory named from their registered objects (90 % or more): samples
// that go unnamed at a drain get their process checked for symbol sources at once. With the
// checks at 1 s of age and at the exit alone, none was named (the objects are gone with
// the process). Each is drained while it lives, so that its mappings are read: one first
// drained at its exit has all its samples counted in no mapping.
func TestAllShortLivedRegisteredJIT(t *testing.T) {
	testenv.Requires(t, testenv.PerfEvent("cpu-clock"))
	d := newDirs(t)
	ir := callchainIR(t, false)
	r := startRunAll(t, Config{JITImages: []string{"lli-14"}}, d)
	var pids []int
	for range 8 {
		jit := startCmd(t, exec.Command("lli-14", ir, "80000"))
		jit.wait(t, 60*time.Second)
		pids = append(pids, jit.pid())
	}
	r.stop(t)
	var bad []string
	for _, pid := range pids {
		named, unnamed := pidJITSamples(t, d, "lli", pid)
		t.Logf("pid %d: %d samples in named JIT code, %d unnamed", pid, named, unnamed)
		if named+unnamed < 50 || unnamed > (named+unnamed)/10 {
			bad = append(bad, fmt.Sprintf("pid %d: %d named, %d unnamed, %d in no mapping", pid, named, unnamed, unknownSamples(t, d, pid)))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d runs with fewer than 50 samples in JIT memory or more than 10 %% unnamed:\n%s",
			len(bad), len(pids), strings.Join(bad, "\n"))
	}
}

// TestAllShortProcessesNamed: under --all, forty processes that each spin 20 ms and exit,
// most of them before a drain read their /proc/PID/maps, have their samples counted in
// their executable's main, named, from the kernel's mmap records: at most a tenth of them
// in no mapping (without the records, half or more).
func TestAllShortProcessesNamed(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	spin, _ := buildAllSpin(t)
	d := newDirs(t)
	r := startRunAll(t, Config{}, d)
	var pids []int
	for range 40 {
		c := startCmd(t, exec.Command(spin, "20", "0"))
		c.wait(t, 60*time.Second)
		pids = append(pids, c.pid())
	}
	r.stop(t)
	var inMain, nowhere, total uint64
	for _, pid := range pids {
		for _, path := range pidCaptures(t, d, "", pid) {
			m, n, all := spinSamples(readCapture(t, path), spin)
			inMain, nowhere, total = inMain+m, nowhere+n, total+all
		}
	}
	t.Logf("%d processes: %d samples, %d in %s's main, %d in no mapping", len(pids), total, inMain, filepath.Base(spin), nowhere)
	if total < 200 || nowhere > total/10 || inMain < total*8/10 {
		t.Errorf("%d samples of 40 processes of 20 ms: %d in main, %d in no mapping; want 200 or more, 80 %% in main, at most 10 %% in no mapping",
			total, inMain, nowhere)
	}
}

// TestAllProcessesOfMilliseconds: a shell's commands of 2 ms each, most of them gone before
// profd can make them targets, are profiled all the same under --all alone, with --uid,
// --cgroup, --container or --exclude-image: their samples are counted from the start
// (every process's are, of the users, cgroups and containers asked for; a container's once
// profd has found it) and each process is added from them, named by its mmap records. Their
// samples add up to their CPU time, in their program's main and their libraries, none in no
// mapping. With a filter, root's commands beside them, outside it, are not profiled (with
// --exclude-image, the image of root's commands is excluded: those gone before the watcher
// checked them are told by their mmap records).
func TestAllProcessesOfMilliseconds(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	spin, spin2 := buildAllSpin(t)
	for _, c := range []struct {
		name    string
		uids    []uint32
		in      string // "cgroup" or "container": the shell runs in one, named by --cgroup or --container
		exclude bool   // --exclude-image names the image of root's commands
	}{{"every process", nil, "", false}, {"a user's", []uint32{targetUID}, "", false}, {"a cgroup's", nil, "cgroup", false},
		{"a container's", nil, "container", false}, {"but some images", nil, "", true}} {
		t.Run(c.name, func(t *testing.T) {
			d := sharedDirs(t)
			cfg := Config{GroupBy: GroupByImage, UIDs: c.uids}
			if c.exclude {
				cfg.ExcludeImages = []string{spin2}
			}
			cgroupFD := -1
			switch c.in {
			case "cgroup": // the commands run below the cgroup named
				name := "profd-test-" + randomHex(6)
				cgroupFD = int(testenv.Cgroup(t, name+"/commands").Fd())
				cfg.Cgroups = []string{"/" + name}
			case "container":
				id := randomHex(32)
				cgroupFD = int(testenv.Cgroup(t, "docker-"+id+".scope").Fd())
				cfg.Containers = []string{id[:14]}
			}
			r := startRunAll(t, cfg, d)
			if c.in == "container" {
				// The container's first process, found by the watcher as profd would find a
				// container's init: from then on the container's processes are counted.
				init := startCmdInCgroup(t, cgroupFD, "sleep", "600")
				r.waitAdded(t, init.pid(), 10*time.Second)
			}
			loop := func(uid uint32, spin string, cgroupFD int) *exec.Cmd {
				sh := exec.Command("/bin/sh", "-c", `for i in $(seq 150); do "$0" 2 0; done`, spin)
				sh.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
				if cgroupFD >= 0 {
					sh.SysProcAttr.UseCgroupFD, sh.SysProcAttr.CgroupFD = true, cgroupFD
				}
				if err := sh.Start(); err != nil {
					t.Fatal(err)
				}
				return sh
			}
			sh := loop(targetUID, spin, cgroupFD)
			var other *exec.Cmd
			if c.uids != nil || c.in != "" || c.exclude {
				other = loop(0, spin2, -1) // root's, beside them, outside the filter
			}
			for _, cmd := range []*exec.Cmd{sh, other} {
				if cmd != nil {
					if err := cmd.Wait(); err != nil {
						t.Fatal(err)
					}
				}
			}
			r.stop(t)
			// The shell's user time holds that of the commands it waited for.
			want := sh.ProcessState.UserTime().Seconds() * 999
			var inMain, nowhere, total uint64
			// A command reaped before it was added has no user: it goes to root's output.
			for _, name := range []string{filepath.Base(spin), fmt.Sprintf("%s-uid%d", filepath.Base(spin), targetUID)} {
				path := filepath.Join(d.out, name+".profd")
				if !fileExists(path) {
					continue
				}
				m, n, all := spinSamples(readCapture(t, path), spin)
				inMain, nowhere, total = inMain+m, nowhere+n, total+all
			}
			// main spins 2 ms of CPU time in each; the rest of their user time is the dynamic
			// loader's and libc's, at each start, longer when the machine is busy.
			const wantMain = 150 * 2e-3 * 999
			t.Logf("150 processes of 2 ms: %d samples (%.0f expected of their user time), %d in main (%.0f of its), %d in no mapping; %d added after their exit",
				total, want, inMain, wantMain, nowhere, lastCounter(r.summary.String(), "added after their exit "))
			if float64(total) < want*0.7 || float64(inMain) < wantMain*0.7 || nowhere > total/20 {
				t.Errorf("%d samples of 150 processes of 2 ms, %d in main, %d in no mapping; want 70 %% of the %.0f their user time makes, 70 %% of the %.0f main's makes in main, at most 5 %% in no mapping",
					total, inMain, nowhere, want, wantMain)
			}
			if other == nil {
				return
			}
			paths, _ := filepath.Glob(filepath.Join(d.out, filepath.Base(spin2)+"*"))
			var ofOther uint64
			for _, path := range paths {
				_, _, all := spinSamples(readCapture(t, path), spin2)
				ofOther += all
			}
			switch {
			case !c.exclude && len(paths) > 0:
				t.Errorf("root's commands, outside the filter, were profiled: %q", paths)
			case c.exclude:
				// A command forked from the shell, which is no excluded image, is a target
				// until its exec is seen (some of its samples counted, more under load); none
				// of those gone before the watcher checked them is added from its samples.
				late := regexp.MustCompile(`msg="profd: target added from its samples[^"]*" pid=[0-9]+ image=`+
					regexp.QuoteMeta(filepath.Base(spin2))+`\b`).FindAllString(r.logs.String(), -1)
				t.Logf("root's commands, of the image excluded: %d samples, %d added from their samples", ofOther, len(late))
				if len(late) > 0 {
					t.Errorf("%d of root's commands, of the image excluded, were added from their samples: %q", len(late), late)
				}
			}
		})
	}
}

// spinSamples counts c's samples in spin's main, in no mapping, and in all.
func spinSamples(c *profileio.Capture, spin string) (inMain, nowhere, total uint64) {
	for _, m := range c.Native {
		for _, s := range m.Samples {
			total += s.Count
			if m.File == spin && s.Function == "main" {
				inMain += s.Count
			}
		}
	}
	nowhere = unmappedSamples(c, func(m string) bool { return m == "[unknown]" })
	total += unmappedSamples(c, func(string) bool { return true })
	return inMain, nowhere, total
}

// unknownSamples counts the samples of process pid's captures in d that fell in no mapping.
func unknownSamples(t *testing.T, d dirs, pid int) uint64 {
	t.Helper()
	var n uint64
	for _, path := range pidCaptures(t, d, "", pid) {
		n += unmappedSamples(readCapture(t, path), func(m string) bool { return m == "[unknown]" })
	}
	return n
}

// TestAllContainerGroup: profd --all --container PREFIX --group-by container writes one
// output for the container's processes, container-<ID12>.<ext>, and profiles nothing outside it.
func TestAllContainerGroup(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	spin, _ := buildAllSpin(t)
	id := randomHex(32)
	cg := testenv.Cgroup(t, "docker-"+id+".scope")
	d := newDirs(t)
	r := startRunAll(t, Config{Containers: []string{id[:14]}, GroupBy: GroupByContainer}, d)
	a := startCmdInCgroup(t, int(cg.Fd()), spin, "100", "0")
	b := startCmdInCgroup(t, int(cg.Fd()), spin, "100", "0")
	outside := startCmd(t, exec.Command(spin, "100", "0"))
	for _, c := range []*child{a, b, outside} {
		c.wait(t, 60*time.Second)
	}
	r.stop(t)
	path := filepath.Join(d.out, "container-"+id[:12]+".profd")
	if !fileExists(path) {
		entries, _ := os.ReadDir(d.out)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("no %s; --out holds %q", filepath.Base(path), names)
	}
	c := readCapture(t, path)
	pids := map[uint32]bool{}
	for _, p := range c.Processes {
		pids[p.Pid] = true
		if p.ContainerID != id {
			t.Errorf("pid %d in the container's output has container %q, want %s", p.Pid, p.ContainerID, id)
		}
	}
	if !pids[uint32(a.pid())] || !pids[uint32(b.pid())] || pids[uint32(outside.pid())] {
		t.Errorf("the container's output has pids %v; want %d and %d, not %d", pids, a.pid(), b.pid(), outside.pid())
	}
}

// TestAllCgroupRemoved: a --cgroup removed while profd runs draws a warning at the next
// scan of /proc (every 5 s), and profd goes on and stops as usual.
func TestAllCgroupRemoved(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	mount := testenv.Cgroup2Mount(t)
	var raw [6]byte
	rand.Read(raw[:])
	name := "profd-test-" + hex.EncodeToString(raw[:])
	dir := filepath.Join(mount, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cgroup v2 at %s is not writable: %v", mount, err)
	}
	d := newDirs(t)
	r := startRunAll(t, Config{Cgroups: []string{dir}}, d)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the warning", 20*time.Second, func() bool { return strings.Contains(r.logs.String(), "is gone (removed or renamed)") })
	if !r.running() {
		t.Fatal("profd stopped")
	}
	r.stop(t)
	if n := strings.Count(r.logs.String(), "is gone (removed or renamed)"); n != 1 {
		t.Errorf("%d warnings about the cgroup, want 1", n)
	}
}

// TestAllGroupsByImage: --all without --group-by writes one output per image and user, not
// one per process (a host's short-lived processes would each leave files of their own):
// nobody's two processes of profd-allspin are in profd-allspin-uid65534.profd.
func TestAllGroupsByImage(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	spin, _ := buildAllSpin(t)
	d := sharedDirs(t)
	r := startRun(t, Config{All: true, UIDs: []uint32{targetUID}, Event: "cpu-clock", FreqHz: 999, FifoDir: d.fifo,
		OutDir: d.out, Formats: []Format{FormatCapture}})
	waitFor(t, "profd to start", 10*time.Second, func() bool { return strings.Contains(r.summary.String(), "profiling every process") })
	a, b := startAsUser(t, targetUID, spin, "200", "0"), startAsUser(t, targetUID, spin, "200", "0")
	a.wait(t, 60*time.Second)
	b.wait(t, 60*time.Second)
	r.stop(t)

	group := filepath.Join(d.out, "profd-allspin-uid"+strconv.Itoa(targetUID)+extension[FormatCapture])
	c := readCapture(t, group)
	for _, pid := range []int{a.pid(), b.pid()} {
		if !slices.ContainsFunc(c.Processes, func(p profileio.Process) bool { return int(p.Pid) == pid }) {
			t.Errorf("%s does not hold pid %d", group, pid)
		}
		if paths := pidCaptures(t, d, "", pid); len(paths) > 0 {
			t.Errorf("pid %d has outputs of its own: %v", pid, paths)
		}
	}
}

// TestAllJavaPerfMap: with --all and --java-perfmap, a JVM started during the run is asked
// for its perf map once it is two seconds old and each time its age doubles, not at the
// next period (an hour here): a JVM that runs for seconds has its methods named, however
// late it compiles them.
func TestAllJavaPerfMap(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	classes := testenv.JavaClasses(t)
	d := sharedDirs(t)
	r := startRunAll(t, Config{JITImages: []string{"java"}, JavaPerfMapEvery: time.Hour}, d)
	java := startCmd(t, exec.Command("java", "-cp", classes, "Hot", "6"))
	t.Cleanup(java.removeRuntimeFiles)
	java.wait(t, 60*time.Second)
	r.stop(t)
	checkHotNamed(t, r, d, java.pid())
}

// checkHotNamed checks that the captures of JVM pid, which ran Hot, name its methods.
func checkHotNamed(t *testing.T, r *profdRun, d dirs, pid int) {
	t.Helper()
	var named uint64
	for _, path := range pidCaptures(t, d, "java", pid) {
		named += jitTotals(readCapture(t, path))["int Hot.mixInts(int)"]
	}
	if named == 0 {
		t.Errorf("the JVM's captures %v name no sample Hot.mixInts\n%s", pidCaptures(t, d, "java", pid), r.logs.String())
	}
}

// TestAllJavaPerfMapAfterExec: under --all, a JVM that a launcher script starts with `exec
// java` after running a while (as the scripts of many servers do) is asked for its perf map
// once it is two seconds old, although the same process was looked at before the exec, when
// it ran the shell and no JVM.
func TestAllJavaPerfMapAfterExec(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	classes := testenv.JavaClasses(t)
	name := "profd-test-" + randomHex(6)
	cg := testenv.Cgroup(t, name)
	d := newDirs(t)
	ready := readyFIFO(t)
	r := startRunAll(t, Config{Cgroups: []string{"/" + name}, JavaPerfMapEvery: time.Hour}, d)
	launcher := startCmdInCgroup(t, int(cg.Fd()), "sh", "-c", `read x <"$0"; exec java -cp "$1" Hot 6`, ready, classes)
	t.Cleanup(launcher.removeRuntimeFiles)
	r.waitAdded(t, launcher.pid(), 10*time.Second)
	time.Sleep(3 * javaMapsTick) // the shell is looked at, and is no JVM
	if err := os.WriteFile(ready, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	launcher.wait(t, 60*time.Second)
	r.stop(t)
	checkHotNamed(t, r, d, launcher.pid())
}

// TestAllExecFIFOJIT: under --all, a shell whose environment has PROFD_DIR gets a FIFO, and
// execs a JIT that opens it as it starts, before profd has seen the exec. The FIFO is the
// process's and stays through the exec (the same file), so the JIT's records reach the
// target it runs as, and its captures name its functions.
func TestAllExecFIFOJIT(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	testjit, _ := workloads(t)
	name := "profd-test-" + randomHex(6)
	cg := testenv.Cgroup(t, name)
	d := newDirs(t)
	ready := readyFIFO(t)
	r := startRunAll(t, Config{Cgroups: []string{"/" + name}}, d)
	cmd := exec.Command("sh", "-c", `read x <"$0"; exec "$1" -d "$2" -m 1500 -w 3000`, ready, testjit, d.fifo)
	cmd.Env = append(os.Environ(), "PROFD_DIR="+d.fifo)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	launcher := startCmd(t, cmd)
	pid := launcher.pid()
	execFIFOJIT(t, launcher, ready, filepath.Join(d.fifo, strconv.Itoa(pid)+".map"))
	launcher.wait(t, 30*time.Second)
	r.stop(t)
	var tl tally
	for _, path := range pidCaptures(t, d, "testjit", pid) {
		c := profdTally(readCapture(t, path))
		tl.jitMem += c.jitMem
		tl.named += c.named
	}
	if tl.jitMem < 200 || tl.named < tl.jitMem*9/10 {
		t.Errorf("the JIT's captures: %d of %d samples in JIT memory named; want nearly all\n%s\nlogs:\n%s",
			tl.named, tl.jitMem, launcher.out.String(), r.logs.String())
	}
}

// TestAllTargetsPerUser: with --all and --max-targets-per-user 2, a user's third and fourth
// processes are not profiled while its first two run, with one warning and the counters
// saying two wait; when one of the first two exits, the oldest waiting one is profiled.
func TestAllTargetsPerUser(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.PerfEvent("cpu-clock"))
	const uid = 54324 // a user no other test runs as
	d := sharedDirs(t)
	counters := &Counters{}
	r := startRunAll(t, Config{UIDs: []uint32{uid}, MaxTargetsPerUser: 2, Counters: counters}, d)
	var sleeps []*child
	for i := range 4 {
		sleeps = append(sleeps, startAsUser(t, uid, "/bin/sleep", "60"))
		if i < 2 {
			r.waitAdded(t, sleeps[i].pid(), 10*time.Second)
		}
	}
	waitFor(t, "two processes waiting", 10*time.Second, func() bool { return counters.Read().TargetsWaiting == 2 })
	for _, c := range sleeps[2:] {
		if strings.Contains(r.logs.String(), `msg="profd: target added" pid=`+strconv.Itoa(c.pid())+" ") {
			t.Fatalf("pid %d, the user's third or fourth process, was profiled", c.pid())
		}
	}
	sleeps[0].cmd.Process.Kill()
	r.waitAdded(t, sleeps[2].pid(), 10*time.Second)
	if n := counters.Read().TargetsWaiting; n != 1 {
		t.Errorf("%d processes waiting after one took the room, want 1", n)
	}
	r.stop(t)
	if n := strings.Count(r.logs.String(), "reach --max-targets-per-user"); n != 1 {
		t.Errorf("%d warnings of the user's bound, want 1\n%s", n, r.logs.String())
	}
}
