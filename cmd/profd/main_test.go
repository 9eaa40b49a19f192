package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/sampler"
)

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// binaries builds cmd/profd with go build, and jit/testjit with gcc, once per test binary.
func binaries(t testing.TB) (profd, testjit string) {
	t.Helper()
	testenv.Requires(t, testenv.Tool("go"), testenv.Tool("gcc"))
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "profd-cmd-test-")
		if buildErr != nil {
			return
		}
		for _, argv := range [][]string{
			{"go", "build", "-o", filepath.Join(builtDir, "profd"), "."},
			{"gcc", "-std=c99", "-O1", "-D_GNU_SOURCE", "-o", filepath.Join(builtDir, "testjit"), "../../jit/testjit.c"},
		} {
			if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
				buildErr = errors.New(strings.Join(argv, " ") + ": " + err.Error() + "\n" + string(out))
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(builtDir, "profd"), filepath.Join(builtDir, "testjit")
}

// exitCode runs profd with args and returns its exit code and output.
func exitCode(t *testing.T, profd string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(profd, args...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("%s: %v", profd, err)
	return 0, ""
}

// TestOutMade: a missing --out is made, parents and all, as the README's example expects.
func TestOutMade(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	profd, _ := binaries(t)
	target := testenv.Sleeper(t)
	out := filepath.Join(t.TempDir(), "a", "b")
	code, output := exitCode(t, profd, "--pid", strconv.Itoa(target.Process.Pid), "--out", out, "--duration", "500ms",
		"--fifo-dir", filepath.Join(t.TempDir(), "fifo"), "--event", "cpu-clock")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, output)
	}
	if _, err := os.Stat(filepath.Join(out, "sleep-"+strconv.Itoa(target.Process.Pid)+".profd")); err != nil {
		t.Errorf("no capture in the --out profd made: %v\n%s", err, output)
	}
}

// TestErrorPaths checks each documented exit code with a clear one-line reason, and that a
// failed start leaves no FIFO directory behind.
func TestErrorPaths(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	profd, _ := binaries(t)
	out := t.TempDir()
	notDir := filepath.Join(out, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pidMax := 4194304
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		pidMax, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	noPid := strconv.Itoa(pidMax + 1) // above pid_max: never a process
	// A pid that exists and is refused by nothing but the case's own flaw: this test's.
	self := strconv.Itoa(os.Getpid())
	maxFreq := sampler.MaxFrequency()
	openParent := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(openParent, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(openParent, 0o777); err != nil { // no sticky bit: anyone may rename in it
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no target", nil, exitUsage, "no target: give --pid, --jit-image or --all"},
		{"bad flag", []string{"--bogus"}, exitUsage, "flag provided but not defined: -bogus"},
		{"bad pid", []string{"--pid", "12x"}, exitUsage, `not a pid: "12x"`},
		{"negative pid", []string{"--pid", "-4"}, exitUsage, "--pid -4: not a process id"},
		{"bad format", []string{"--pid", self, "--format", "svg"}, exitUsage, `--format "svg"`},
		{"bad backend", []string{"--pid", self, "--backend", "dtrace"}, exitUsage, `--backend "dtrace"`},
		{"bad unwind", []string{"--pid", self, "--unwind", "lbr"}, exitUsage, `--unwind "lbr": want fp or dwarf`},
		{"dwarf on bpf", []string{"--pid", self, "--unwind", "dwarf", "--backend", "bpf"}, exitUsage, "--unwind dwarf needs the ring back end"},
		{"dwarf without stacks", []string{"--pid", self, "--unwind", "dwarf", "--stacks=false"}, exitUsage, "--unwind dwarf needs --stacks"},
		{"stray argument", []string{"--pid", self, "extra"}, exitUsage, "unexpected arguments"},
		{"out under a file", []string{"--pid", self, "--out", filepath.Join(notDir, "sub")}, exitUsage, "not a directory"},
		{"bad event", []string{"--pid", self, "--event", "bogus"}, exitUsage, `--event "bogus": not an event profd knows; want cycles`},
		{"zero freq", []string{"--pid", self, "--freq", "0"}, exitUsage, "--freq 0: want samples per second"},
		{"period below the kernel's", []string{"--pid", self, "--period", "1"}, exitUsage, "--period 1: want at least " + strconv.FormatUint(sampler.MinPeriod(), 10)},
		{"negative target bound", []string{"--all", "--max-targets-per-user", "-1"}, exitUsage, "--max-targets and --max-targets-per-user must not be negative"},
		{"target bound without --all", []string{"--pid", self, "--max-targets", "10"}, exitUsage, "bound the processes --all and --jit-image find"},
		{"zero memory budget", []string{"--pid", self, "--max-memory-mb", "0"}, exitUsage, `invalid value "0" for flag -max-memory-mb: want a number of megabytes`},
		{"flush interval too short", []string{"--pid", self, "--flush-interval", "1ns"}, exitUsage, "--flush-interval 1ns: want at least 1s"},
		{"java perf map interval too short", []string{"--pid", self, "--java-perfmap", "100ms"}, exitUsage, "--java-perfmap 100ms: want at least 1s"},
		{"java perf map interval negative", []string{"--pid", self, "--java-perfmap", "-1s"}, exitUsage, "--java-perfmap -1s: want at least 1s"},
		{"freq above the kernel's", []string{"--pid", self, "--freq", strconv.FormatUint(maxFreq+1, 10)}, exitUsage, "perf_event_max_sample_rate"},
		{"fifo dir under a world-writable parent", []string{"--pid", self, "--fifo-dir", filepath.Join(openParent, "fifo")}, exitUsage, "--fifo-dir DIR picks another directory"},
		{"fifo dir in /proc", []string{"--pid", self, "--fifo-dir", "/proc/profd-fifo"}, exitUsage, "--fifo-dir DIR picks another directory"},
		{"fifo dir where no directory can be made", []string{"--pid", self, "--fifo-dir", "/sys/profd-fifo"}, exitUsage, "--fifo-dir DIR picks another directory"},
		{"out not a dir", []string{"--pid", self, "--out", notDir}, exitUsage, "not a directory"},
		{"out unwritable", []string{"--pid", self, "--out", "/proc"}, exitUsage, "--out /proc is not writable"},
		{"no such pid", []string{"--pid", noPid}, exitNoTarget, "pid " + noPid + ": no such process"},
		{"all users without image groups", []string{"--pid", self, "--all-users"}, exitUsage, "--all-users needs --group-by image"},
		{"missing cgroup", []string{"--all", "--cgroup", "/profd-test-no-such-cgroup"}, exitUsage, "--cgroup /profd-test-no-such-cgroup: "},
		{"cgroup outside v2", []string{"--all", "--cgroup", "/sys/fs/cgroup/profd-test-no-such-cgroup/x"}, exitUsage, "--cgroup /sys/fs/cgroup/profd-test-no-such-cgroup/x"},
		{"filter without --all", []string{"--pid", self, "--uid", "0"}, exitUsage, "give --all with them"},
		{"--all and --pid", []string{"--all", "--pid", self}, exitUsage, "--pid and --all exclude each other"},
		{"short container id", []string{"--all", "--container", "abc123"}, exitUsage, `--container "abc123": want a container id, 12 to 64 hex digits`},
		{"unknown user", []string{"--all", "--uid", "profd-test-no-such-user"}, exitUsage, `--uid "profd-test-no-such-user": no such user`},
		{"kernel thread", []string{"--pid", self + ",2"}, exitUsage, "pid 2 (kthreadd): a kernel thread, which runs no user code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if comm, _ := os.ReadFile("/proc/2/comm"); strings.Contains(tc.want, "kthreadd") && string(comm) != "kthreadd\n" {
				t.Skip("pid 2 is not kthreadd here: another pid namespace")
			}
			fifoDir := filepath.Join(t.TempDir(), "fifo")
			if i := slices.Index(tc.args, "--fifo-dir"); i >= 0 {
				fifoDir = tc.args[i+1]
			}
			args := append([]string{"--fifo-dir", fifoDir, "--log-level", "error"}, tc.args...)
			if !contains(args, "--out") {
				args = append(args, "--out", out)
			}
			code, output := exitCode(t, profd, args...)
			if code != tc.code || !strings.Contains(output, tc.want) {
				t.Errorf("profd %q: exit %d, want %d, with %q in:\n%s", args, code, tc.code, tc.want, output)
			}
			if lines := strings.Count(strings.TrimSpace(output), "\n") + 1; lines > 2 {
				t.Errorf("profd %q: %d lines of output, want the reason in one (and a --help hint):\n%s", args, lines, output)
			}
			if _, err := os.Stat(fifoDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("profd %q left its FIFO directory behind (%v)", args, err)
			}
		})
	}
}

// TestInitTargetWarned: --pid 1 is profiled, with one warning that init rarely runs a JIT.
func TestInitTargetWarned(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	profd, _ := binaries(t)
	code, output := exitCode(t, profd, "--pid", "1,1", "--out", t.TempDir(), "--duration", "300ms",
		"--fifo-dir", filepath.Join(t.TempDir(), "fifo"), "--event", "cpu-clock", "--format", "capture", "--log-level", "warn")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, output)
	}
	if n := strings.Count(output, "--pid 1 is the init process"); n != 1 {
		t.Errorf("%d warnings about pid 1, want 1:\n%s", n, output)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestHelpAndVersion: --help documents the exit codes and exits 0, as does --version.
func TestHelpAndVersion(t *testing.T) {
	profd, _ := binaries(t)
	code, out := exitCode(t, profd, "--help")
	if code != exitOK {
		t.Errorf("--help: exit %d", code)
	}
	for _, want := range []string{"Exit status:", "3 a --pid names no running process", "-jit-image", "-fifo-dir",
		"-config FILE", "profd --config /etc/profd.conf", "jit-image = lli-14", "container_id",
		"-exclude-image NAME", "-cgroup PATH", "profd --all --cgroup /system.slice/myapp.service", "profd --all --uid 1000 --exclude-image bash"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	if code, out := exitCode(t, profd, "--version"); code != exitOK || !strings.HasPrefix(out, "profd") || strings.Contains(out, "dev\n") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

// TestStopWritesFinalProfiles runs the profd binary on a testjit and stops it while the JIT
// runs: with SIGTERM, with SIGHUP (its terminal went away), and with SIGTERM after its
// stdout's reader went away (profd | head) and a flush's summary met the closed pipe. Each
// time profd exits 0 with its final profiles written and its FIFO directory removed.
func TestStopWritesFinalProfiles(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	if runtime.GOARCH != "amd64" {
		t.Skip("testjit emits x86-64 code")
	}
	for _, tc := range []struct {
		name        string
		sig         syscall.Signal
		closeStdout bool
	}{
		{"SIGTERM", syscall.SIGTERM, false},
		{"SIGHUP", syscall.SIGHUP, false},
		{"stdout closed", syscall.SIGTERM, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testStop(t, tc.sig, tc.closeStdout) })
	}
}

func testStop(t *testing.T, sig syscall.Signal, closeStdout bool) {
	profd, testjit := binaries(t)
	base := t.TempDir()
	fifoDir, outDir := filepath.Join(base, "fifo"), filepath.Join(base, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	jit := exec.Command(testjit, "-d", fifoDir, "-m", "400", "-w", "10000")
	var jitOut bytes.Buffer
	jit.Stdout = &jitOut
	if err := jit.Start(); err != nil {
		t.Fatal(err)
	}
	defer jit.Wait()
	defer jit.Process.Kill()

	cmd := exec.Command(profd, "--pid", strconv.Itoa(jit.Process.Pid), "--event", "cpu-clock",
		"--fifo-dir", fifoDir, "--out", outDir, "--flush-interval", "1s")
	var stdout, stderr testenv.SyncBuffer
	cmd.Stderr = &stderr
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer cmd.Process.Kill()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(&stdout, r)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), "attached to pid") {
		if time.Now().After(deadline) {
			t.Fatalf("profd did not attach:\n%s\n%s", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	pidFile, err := os.ReadFile(filepath.Join(fifoDir, "profd.pid"))
	if err != nil || strings.TrimSpace(string(pidFile)) != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("profd.pid holds %q (%v), want %d", pidFile, err, cmd.Process.Pid)
	}
	if closeStdout {
		r.Close()
		<-copied
		// The first timed flush's summary goes to the closed pipe.
		for !strings.Contains(stderr.String(), "final=false") {
			if time.Now().After(deadline) {
				t.Fatalf("no timed flush:\n%s", stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
	} else {
		time.Sleep(300 * time.Millisecond)
	}
	cmd.Process.Signal(sig)
	err = cmd.Wait()
	if err != nil {
		t.Fatalf("profd after %v: %v\n%s", sig, err, stderr.String())
	}
	<-copied
	r.Close()
	if !closeStdout && !strings.Contains(stdout.String(), "profd final flush #") {
		t.Errorf("no final flush summary:\n%s", stdout.String())
	}
	name := "testjit-" + strconv.Itoa(jit.Process.Pid)
	for _, ext := range []string{".prof.txt", ".prof.extbinary", ".pb.gz", ".profd"} {
		st, err := os.Stat(filepath.Join(outDir, name+ext))
		if err != nil || st.Size() == 0 {
			t.Errorf("final profile %s%s: %v", name, ext, err)
		}
	}
	if txt, _ := os.ReadFile(filepath.Join(outDir, name+".prof.txt")); !bytes.Contains(txt, []byte("count_small:")) {
		t.Errorf("final LLVM profile does not name count_small:\n%s", txt)
	}
	if _, err := os.Stat(fifoDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("FIFO directory left behind after %v (%v)", sig, err)
	}
}

// TestFifoDirInUse: a second profd given the first one's FIFO directory stops at once,
// saying how to give it its own.
func TestFifoDirInUse(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	profd, _ := binaries(t)
	target := testenv.Sleeper(t)
	fifoDir, out := filepath.Join(t.TempDir(), "fifo"), t.TempDir()
	first := exec.Command(profd, "--pid", strconv.Itoa(target.Process.Pid), "--fifo-dir", fifoDir, "--out", out, "--event", "cpu-clock")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { first.Process.Signal(syscall.SIGTERM); first.Wait() }()
	waitForPidFile(t, fifoDir)
	code, output := exitCode(t, profd, "--pid", strconv.Itoa(target.Process.Pid), "--fifo-dir", fifoDir, "--out", t.TempDir())
	if code != exitUsage || !strings.Contains(output, "directory in use") || !strings.Contains(output, "--fifo-dir DIR") {
		t.Errorf("second profd: exit %d, want %d saying the directory is in use and how to pick another:\n%s", code, exitUsage, output)
	}
}

// waitForPidFile waits for the profd of fifoDir to have written its profd.pid.
func waitForPidFile(t *testing.T, fifoDir string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !fileExistsT(filepath.Join(fifoDir, "profd.pid")); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first profd made no profd.pid")
		}
	}
}

func fileExistsT(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestOutInUse: a second profd given the first one's --out stops at once, naming the first,
// instead of replacing its files; once the first has gone, a new profd takes the directory
// and removes the temporary files of a flush that was killed.
func TestOutInUse(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	profd, _ := binaries(t)
	target := testenv.Sleeper(t)
	out := t.TempDir()
	stale := filepath.Join(out, ".sleep-1.prof.txt.tmp-2718281")
	if err := os.WriteFile(stale, []byte("half a profile"), 0o644); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(target.Process.Pid)
	fifoDir := filepath.Join(t.TempDir(), "fifo")
	first := exec.Command(profd, "--pid", pid, "--fifo-dir", fifoDir, "--out", out, "--event", "cpu-clock")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { first.Process.Signal(syscall.SIGTERM); first.Wait() }()
	waitForPidFile(t, fifoDir)
	if fileExistsT(stale) {
		t.Errorf("the first profd left the killed flush's temporary file %s", stale)
	}
	code, output := exitCode(t, profd, "--pid", pid, "--fifo-dir", filepath.Join(t.TempDir(), "fifo2"), "--out", out, "--duration", "2s")
	want := "--out " + out + " is in use by profd pid " + strconv.Itoa(first.Process.Pid)
	if code != exitUsage || !strings.Contains(output, want) {
		t.Errorf("second profd: exit %d, want %d with %q:\n%s", code, exitUsage, want, output)
	}
}
