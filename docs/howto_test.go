// Package docs_test runs the how-to pages in docs/howto, so that their commands cannot rot.
// In a page:
//
//   - a fenced block whose info string is "sh howto" is run: all of a page's, in order, as
//     one bash script (set -euo pipefail) in a temporary directory;
//   - a fenced block whose info string is "LANG howto-file NAME" is written to NAME in that
//     directory first (a program the page shows);
//   - every other block is shown only (an operator's step the test does its own way, or output).
//
// The script runs with the freshly built profd and reestimate first on PATH. profd there is
// a wrapper that adds --fifo-dir $PROFD_DIR, a directory of the test's own, and the text
// "/run/profd" in the page (profd's default FIFO directory) is replaced by that directory,
// so a page runs beside any other profd on the machine. Each page then has its outcome
// checked: patterns its output must match, and profd's and perf's shares of its hot function
// on the same run.
package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// howtoPage is one page and how to run it.
type howtoPage struct {
	file      string
	needs     []testenv.Need
	workloads []string // files copied into the page's directory, relative to the repository
	// setup prepares what the page assumes an operator has (a database server) and returns
	// extra environment for the script (a PATH it returns comes after profd's directory).
	setup func(t *testing.T, dir string) []string
	want  []string // regular expressions the script's output must match
	// notWant are regular expressions the script's output must not match.
	notWant []string
	// same names the hot function whose share the page's first go tool pprof -top and perf
	// report (in that order) must give within sharePoints.
	same string
	// inclusive: same's shares are inclusive ones, go tool pprof -top -cum's cum% and perf
	// report --children's first column: for a function that is only ever a caller (and
	// same is a prefix of the name, up to a colon: Python's names end in a file's path).
	inclusive bool
}

var howtoPages = []howtoPage{
	{
		file:      "node.md",
		needs:     []testenv.Need{testenv.Tool("node")},
		workloads: []string{"workloads/runtimes/hot.js"},
		same:      "JS:*mixInts",
		// profd's summary and pprof's top both name the hot function.
		want: []string{`(?m)^\s+\d+\s+\d+\.\d%\s+JS:\*mixInts `, `(?m)^\s+\S+ +\S+%.*\S+%\s+JS:\*mixInts `,
			`(?m)^\s+\d+\.\d+%\s+\[\.\] JS:\*mixInts`,
			// Without the flag: profd's warning, nothing named.
			`samples in JIT memory have no symbol`, `0\.0% of the samples in JIT memory named`},
	},
	{
		file:      "java.md",
		needs:     []testenv.Need{testenv.Tool("java"), testenv.Tool("javac"), testenv.Tool("jcmd")},
		workloads: []string{"workloads/runtimes/Hot.java"},
		same:      "int Hot.mixInts(int)",
		want: []string{`(?m)^\s+\S+ +\S+%.*\S+%\s+int Hot\.mixInts\(int\)$`, `(?m)^\s+\d+\.\d+%\s+\[\.\] int Hot\.mixInts`,
			`Command executed successfully`,
			// Without the unlock option the JVM does not start.
			`must be enabled via -XX:\+UnlockDiagnosticVMOptions`, `java exited with status 1`},
	},
	{
		file:  "erlang.md",
		needs: []testenv.Need{testenv.Tool("erl"), testenv.Tool("erlc"), erlangJIT},
		same:  "$hot:mix/2",
		want: []string{`(?m)^\d+ jit$`, `(?m)^\s+\S+ +\S+%.*\S+%\s+\$hot:mix/2$`,
			`(?m)^\s+\d+\.\d+%\s+\[\.\] \$hot:mix/2`,
			// +JPperf true: the dump's name, right after the run's "done" line...
			`(?m)^done \d+\n\s+\d+\s+\d+\.\d%\s+hot:mix/2$`},
		// ... and no line of the map's name after it: one name with all of the function's
		// samples. (Not a share: mix's moves from machine to machine, 54-58 % where the page
		// was written, 39-42 % here on another day, with perf's beside it.)
		notWant: []string{`(?m)^done \d+\n\s+\d+\s+\d+\.\d%\s+hot:mix/2\n\s+\d+\s+\d+\.\d%\s+\$hot:mix/2$`},
	},
	{
		file:      "mono.md",
		needs:     []testenv.Need{testenv.Tool("mono"), testenv.Tool("mcs")},
		workloads: []string{"workloads/runtimes/hot.cs"},
		same:      "Hot:MixInts (int)",
		want: []string{`(?m)^\s+\d+\s+\d+\.\d%\s+Hot:MixInts \(int\)$`, `(?m)^\s+\S+ +\S+%.*\S+%\s+Hot:SumSquares \(int\)$`,
			`(?m)^\s+\d+\.\d+%\s+\[\.\] Hot:MixInts \(int\)$`},
	},
	{
		file:  "postgresql.md",
		needs: []testenv.Need{testenv.Tool("psql"), testenv.Tool("runuser"), testenv.Tool("llvm-profdata-14"), postgresServer},
		setup: startPostgres,
		same:  "evalexpr_1_5",
		want: []string{`(?m)^\s+\S+ +\S+%.*\S+%\s+evalexpr_`, `(?m)^Function: evalexpr_`,
			`(?m)^\s+\d+\.\d+%\s+\[\.\] evalexpr_`},
	},
	{
		file:      "lli.md",
		needs:     []testenv.Need{testenv.Tool("lli-14"), testenv.Tool("clang-14"), testenv.Tool("opt-14"), testenv.Tool("llvm-profdata-14")},
		workloads: []string{"examples/workload/hot.c"},
		same:      "sieve",
		// opt-14 annotates nothing without the attribute (0) and some functions with it.
		want: []string{`(?m)^Function: sieve: `, `(?m)^\s+\S+ +\S+%.*\S+%\s+sieve$`,
			`(?m)^0\n[1-9]\d*$`, `(?m)^\s+\d+\.\d+%\s+\[\.\] sieve`,
			`reestimate: \d+ sampled code objects: [1-9]\d* reestimated`,
			// lli-14's default JIT: named from the objects it registered, with line tables.
			// The page's last block: its final flush, no sample in JIT memory unnamed (the
			// line would say how many), and its LLVM profile's functions. The share of a run
			// this short depends on how much of LLVM's compiling profd saw.
			`profd final flush #\d+: \d+ samples, (?:[5-9]\d|100)\.\d% in JIT code\n[^\n]*\n\s+\d+\s+\S+%\s+sieve\n(?:[^\n]*\n){3,4}` +
				`Function: sieve: \d+, \d+, [1-9]\d* sampled lines\n(?:Function: [^\n]*\n){3,}\z`},
	},
	{
		file:      "php.md",
		needs:     []testenv.Need{testenv.Tool("php"), testenv.Tool("cgi-fcgi"), phpFPM},
		workloads: []string{"workloads/runtimes/hot.php"},
		same:      "JIT$mixInts",
		// The command line's summary and top; PHP-FPM's: the workers' samples named.
		want: []string{`(?m)^\s+\d+\s+\d+\.\d%\s+JIT\$mixInts$`, `(?m)^\s+\S+ +\S+%.*\S+%\s+JIT\$sumSquares$`,
			`(?s)processes of \S*php-fpm.*\nprofd final flush #1: \d+ samples, (?:9\d|100)\.\d% in JIT code\n`},
	},
	{
		file:      "python.md",
		needs:     []testenv.Need{testenv.Python(12)},
		setup:     pythonOnPath,
		workloads: []string{"workloads/runtimes/hot.py"},
		same:      "py::mix_ints",
		inclusive: true,
		// Inclusive shares named in pprof and perf, and run on most chains through the
		// trampolines (on profd's only); without --unwind dwarf, under 1 % of the samples with
		// a Python function on the chain (one sampled in a trampoline itself has), and the
		// warning that says why.
		want: []string{`(?m)^\s+\S+\s+\S+%\s+\S+%\s+\S+\s+(?:1\d|[2-9]\d)\.\d+%\s+py::sum_squares:\S*hot\.py$`,
			`(?m)^\s+\S+\s+\S+%\s+\S+%\s+\S+\s+(?:[89]\d|100)\.\d+%\s+py::run:\S*hot\.py$`, // the chains go on through the trampolines
			`(?m)^\s+(?:1\d|[2-9]\d)\.\d+%\s+\S+%\s+\[\.\] py::sum_squares:\S*hot\.py`,
			`(?m)^samples with a Python function on the chain, by frame pointers: 0(?:\.\d+)?%$`, `--unwind dwarf walks it by its \.eh_frame`},
	},
	{
		file:      "go.md",
		needs:     []testenv.Need{testenv.Tool("go")},
		workloads: []string{"workloads/runtimes/hot.go"},
		same:      "main.mixInts",
		// Both leaves called from run on profd's chains, by frame pointers and (the stripped
		// build, named) by frame depths; from main on perf's.
		want: []string{`(?m)^profd, by frame pointers: the leaves called from main\.run, \d+ ms$`, `(?m)^perf: the leaves called from main\.main, \d+ samples$`,
			`(?m)^\s+\S+ +\S+%.*\S+%\s+main\.mixInts$`, `(?m)^profd, by frame depths: the leaves called from main\.run, \d+ ms$`,
			`(?m)^\s+\S+ +\S+%.*\S+%\s+main\.mixInts \S*hot\.go:\d+$`}, // the stripped build's lines
		notWant: []string{`(?m)^perf: the leaves called from main\.run`, `(?m)^profd, by frame pointers: the leaves called from main\.main`,
			`(?m)^profd, by frame depths: the leaves called from main\.main`},
	},
	{
		file:      "native.md",
		needs:     []testenv.Need{testenv.Tool("cc"), testenv.Tool("objcopy"), testenv.Tool("strip")},
		workloads: []string{"workloads/runtimes/c/native.c"},
		same:      "mix_ints",
		// The inlined step a function of its own, and lines, in the program and (after the
		// marker) in the stripped one, named from its debug file.
		want: []string{`(?m)^\s+\S+ +\S+%.*\S+%\s+step \(inline\)$`, `(?m)^\s+\S+ +\S+%.*\S+%\s+mix_ints \S*native\.c:19$`,
			`(?m)^\s+\S+ +\S+%.*\S+%\s+step \S*native\.c:1[12] \(inline\)$`,
			`(?s)stripped, named from hot\.debug:\n.*mix_ints \S*native\.c:19\n.*step \S*native\.c:1[12] \(inline\)`},
	},
	{
		file:      "c-header.md",
		needs:     []testenv.Need{testenv.Tool("cc"), amd64},
		workloads: []string{"jit/profd_jit.h"},
		same:      "jit_hot",
		want:      []string{`(?m)^\s+\S+ +7\d\.\d+%.*\S+%\s+jit_hot$`, `(?m)^\s+7\d\.\d+%\s+\[\.\] jit_hot`},
	},
}

// sharePoints is how far profd's and perf's shares of a page's hot function may differ: the
// two sample the same run, each on its own timer, and perf record -p only the threads there
// when it starts (measured here: within 2.6 points).
const sharePoints = 10

// howtoTimeout bounds one page's run; a page is meant to take 20 s or less.
const howtoTimeout = 90 * time.Second

func TestHowTo(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("go"), testenv.Tool("perf"), testenv.PerfEvent("cpu-clock"))
	bin := buildProfd(t)
	for _, p := range howtoPages {
		t.Run(strings.TrimSuffix(p.file, ".md"), func(t *testing.T) {
			testenv.Requires(t, p.needs...)
			runPage(t, bin, p)
		})
	}
}

// TestHowToPagesMarked: every page of docs/howto but the index has runnable blocks and is
// run by TestHowTo.
func TestHowToPagesMarked(t *testing.T) {
	files, err := filepath.Glob("howto/*.md")
	if err != nil {
		t.Fatal(err)
	}
	run := map[string]bool{}
	for _, p := range howtoPages {
		run[p.file] = true
	}
	for _, f := range files {
		name := filepath.Base(f)
		if name == "README.md" {
			continue
		}
		if !run[name] {
			t.Errorf("%s is not run by TestHowTo", f)
		}
		script, _, err := extractPage(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(script) == "" {
			t.Errorf("%s has no runnable (sh howto) block", f)
		}
	}
	for _, p := range howtoPages {
		if _, err := os.Stat(filepath.Join("howto", p.file)); err != nil {
			t.Errorf("TestHowTo runs %s: %v", p.file, err)
		}
	}
}

// buildProfd builds profd and reestimate into a directory of their own and puts a profd
// wrapper that adds --fifo-dir $PROFD_DIR into another; it returns the wrapper's directory,
// which holds reestimate too.
func buildProfd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	bin := filepath.Join(dir, "bin")
	for _, argv := range [][]string{
		{"go", "build", "-o", real + "/", "../cmd/profd"},
		{"go", "build", "-o", bin + "/", "../cmd/reestimate"},
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	wrapper := "#!/bin/sh\nexec " + filepath.Join(real, "profd") + " --fifo-dir \"$PROFD_DIR\" \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "profd"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// fence is the opening line of a fenced block: ``` then the info string.
var fence = regexp.MustCompile("^```+\\s*(.*)$")

// extractPage returns the page's runnable script and the files its howto-file blocks hold.
func extractPage(path string) (script string, files map[string]string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	files = map[string]string{}
	var sb, block strings.Builder
	in := false
	var info []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !in {
			if m := fence.FindStringSubmatch(line); m != nil {
				in, info = true, strings.Fields(m[1])
				block.Reset()
			}
			continue
		}
		if strings.HasPrefix(line, "```") {
			in = false
			switch {
			case len(info) == 2 && info[0] == "sh" && info[1] == "howto":
				sb.WriteString(block.String())
			case len(info) == 3 && info[1] == "howto-file":
				files[info[2]] = block.String()
			case len(info) > 1 && strings.HasPrefix(info[1], "howto"):
				return "", nil, fmt.Errorf("%s:%d: unknown block marking %q", path, n, strings.Join(info, " "))
			}
			continue
		}
		block.WriteString(line)
		block.WriteByte('\n')
	}
	if in {
		return "", nil, fmt.Errorf("%s: a fenced block is not closed", path)
	}
	return sb.String(), files, sc.Err()
}

// scriptPrologue comes before a page's blocks. The trap removes the files the runtimes
// leave in /tmp for the last process the page named $pid, had the page stopped before it
// did so itself.
const scriptPrologue = `set -euo pipefail
trap 'if [ -n "${pid:-}" ]; then rm -f /tmp/perf-$pid.map /tmp/jit-$pid.dump /tmp/jitted-$pid-*.so; fi' EXIT
`

func runPage(t *testing.T, bin string, p howtoPage) {
	script, files, err := extractPage(filepath.Join("howto", p.file))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fifoDir := filepath.Join(t.TempDir(), "run")
	script = strings.ReplaceAll(script, "/run/profd", fifoDir)
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range p.workloads {
		b, err := os.ReadFile(filepath.Join("..", w))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(w)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// profd's directory stays first on PATH, before any a page's setup puts there.
	env, path := append(os.Environ(), "PROFD_DIR="+fifoDir), os.Getenv("PATH")
	if p.setup != nil {
		for _, kv := range p.setup(t, dir) {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				path = v
				continue
			}
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+bin+":"+path)
	ctx, cancel := context.WithTimeout(context.Background(), howtoTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", scriptPrologue+script)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// The script and everything it starts form one process group, ended as a whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err = cmd.Start()
	if err == nil {
		err = cmd.Wait()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what the page left running
	}
	took := time.Since(start)
	t.Logf("%s ran in %.1f s", p.file, took.Seconds())
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("not done after %v", howtoTimeout)
		}
		t.Fatalf("%s: %v\n%s", p.file, err, out.String())
	}
	var missing []string
	for _, w := range p.want {
		if !regexp.MustCompile(w).Match(out.Bytes()) {
			missing = append(missing, w)
		}
	}
	var unwanted []string
	for _, w := range p.notWant {
		if m := regexp.MustCompile(w).Find(out.Bytes()); m != nil {
			unwanted = append(unwanted, string(m))
		}
	}
	if len(unwanted) > 0 {
		t.Errorf("%s: the output has %q, which it must not:\n%s", p.file, unwanted, out.String())
	}
	if len(missing) > 0 {
		t.Errorf("%s: the output has nothing matching %q:\n%s", p.file, missing, out.String())
	} else if testing.Verbose() {
		t.Logf("output:\n%s", out.String())
	}
	if p.same != "" {
		compareShares(t, out.String(), p.same, p.inclusive)
	}
}

// compareShares finds fn's share in the first perf report line naming it and its flat share
// (with inclusive, its cumulative one) in the last go tool pprof -top line naming it before
// that (the same run's), and holds them to sharePoints.
func compareShares(t *testing.T, out, fn string, inclusive bool) {
	t.Helper()
	name := regexp.QuoteMeta(fn)
	perf := regexp.MustCompile(`(?m)^\s+(\d+\.\d+)%\s+\[\.\]\s+` + name + `(?:\s|$)`)
	pprof := regexp.MustCompile(`(?m)^\s*\S+\s+(\d+(?:\.\d+)?)%\s+\S+%\s+\S+\s+\S+%\s+` + name + `(?:\s|$)`)
	if inclusive {
		perf = regexp.MustCompile(`(?m)^\s+(\d+\.\d+)%\s+\d+\.\d+%\s+\[\.\]\s+` + name + `(?::\S*)?(?:\s|$)`)
		pprof = regexp.MustCompile(`(?m)^\s*\S+\s+\S+%\s+\S+%\s+\S+\s+(\d+(?:\.\d+)?)%\s+` + name + `(?::\S*)?(?:\s|$)`)
	}
	n := perf.FindStringSubmatchIndex(out)
	if n == nil {
		t.Errorf("no perf report line names %s", fn)
		return
	}
	ms := pprof.FindAllStringSubmatch(out[:n[0]], -1)
	if ms == nil {
		t.Errorf("no go tool pprof -top line names %s before perf report's", fn)
		return
	}
	profdShare, _ := strconv.ParseFloat(ms[len(ms)-1][1], 64)
	perfShare, _ := strconv.ParseFloat(out[n[2]:n[3]], 64)
	t.Logf("%s: profd %.1f%%, perf %.1f%%", fn, profdShare, perfShare)
	if math.Abs(profdShare-perfShare) > sharePoints {
		t.Errorf("%s: profd gives %.1f%% of the samples, perf %.1f%%: more than %d points apart", fn, profdShare, perfShare, sharePoints)
	}
}

// phpFPM: the page's second half runs PHP-FPM.
func phpFPM() string {
	if m, _ := filepath.Glob("/usr/sbin/php-fpm*"); len(m) == 0 {
		return "PHP-FPM (/usr/sbin/php-fpm*)"
	}
	return ""
}

// pythonOnPath puts the Python testenv.PythonPath(12) finds first on the page's PATH, as python3.12.
func pythonOnPath(t *testing.T, dir string) []string {
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testenv.PythonPath(12), filepath.Join(bin, "python3.12")); err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=" + bin + ":" + os.Getenv("PATH")}
}

// amd64: the example JIT's machine code is x86-64.
func amd64() string {
	if runtime.GOARCH != "amd64" {
		return "an x86-64 machine (the example JIT emits x86-64 code)"
	}
	return ""
}

// erlangJIT: +JPperf needs the BEAM JIT, which not every emulator is built with.
func erlangJIT() string {
	out, err := exec.Command("erl", "-noshell", "-eval", "io:format(\"~s\", [erlang:system_info(emu_flavor)]), halt().").Output()
	if err != nil || strings.TrimSpace(string(out)) != "jit" {
		return fmt.Sprintf("an Erlang emulator with the BEAM JIT (erl reports flavour %q, %v)", out, err)
	}
	return ""
}

// postgresBin is the newest PostgreSQL server's bin directory.
func postgresBin() string {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		return ""
	}
	return filepath.Dir(bins[len(bins)-1])
}

func postgresServer() string {
	if postgresBin() == "" {
		return "a PostgreSQL server under /usr/lib/postgresql (package postgresql)"
	}
	return ""
}

// startPostgres starts a PostgreSQL server of the test's own, as the postgres user, on a
// socket in a directory of its own, with JITDUMPDIR set in its environment (the page's
// environment-file step), and returns PGHOST for the page's psql commands. The page's
// ALTER SYSTEM turns its JIT settings on.
func startPostgres(t *testing.T, _ string) []string {
	t.Helper()
	bin := postgresBin()
	base, err := os.MkdirTemp("", "profd-howto-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	for _, dir := range []string{base, base + "/sock", base + "/jitdump"} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("chown", "postgres:", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown postgres %s: %v\n%s", dir, err, out)
		}
	}
	asPostgres := func(script string) *exec.Cmd {
		cmd := exec.Command("runuser", "-u", "postgres", "--", "sh", "-c", script)
		cmd.Dir = base
		return cmd
	}
	if out, err := asPostgres(bin + "/initdb -A trust -D " + base + "/data").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	log := base + "/server.log"
	start := "JITDUMPDIR=" + base + "/jitdump " + bin + "/pg_ctl -w -t 60 -D " + base + "/data -l " + log +
		" -o '-k " + base + "/sock -c listen_addresses=' start"
	if out, err := asPostgres(start).CombinedOutput(); err != nil {
		b, _ := os.ReadFile(log)
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, b)
	}
	t.Cleanup(func() {
		asPostgres(bin + "/pg_ctl -D " + base + "/data -m immediate stop").Run()
		if b, err := os.ReadFile(log); err == nil && bytes.Contains(b, []byte("could not create jit cache directory")) {
			t.Errorf("the server could not write its jitdump:\n%s", b)
		}
	})
	return []string{"PGHOST=" + base + "/sock"}
}
