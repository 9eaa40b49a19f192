package profileio

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/internal/testenv"
)

// leafCapture is the test capture without its stacks: the profile of a run that sampled no
// call chains.
func leafCapture() *Capture {
	c := expectedCapture(len(testCaptureSteps()))
	c.Stacks = nil
	return c
}

func TestPprofGolden(t *testing.T) {
	c := leafCapture()
	var gz bytes.Buffer
	if err := WritePprof(&gz, c); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(bytes.NewReader(gz.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	golden(t, "pprof.txt.golden", []byte(p.String()))
}

// TestGoToolPprofTotals runs go tool pprof -top and -raw on our profile and checks that
// they count what our text report counts: the same total and the same samples per function.
func TestGoToolPprofTotals(t *testing.T) {
	testenv.Requires(t, testenv.Tool("go"))
	c := leafCapture()
	path := filepath.Join(t.TempDir(), "profile.pb.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WritePprof(f, c); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var report bytes.Buffer
	if err := WriteTextReport(&report, c); err != nil {
		t.Fatal(err)
	}
	reportTotal := regexp.MustCompile(`(?m)^samples: (\d+) total`).FindSubmatch(report.Bytes())
	reportRows := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ +(\d+)  (.+)$`).FindAllSubmatch(report.Bytes(), -1) {
		reportRows[string(m[2])] = string(m[1])
	}
	// Five JIT functions and mappings, the unnamed samples, two native functions and the
	// native samples no symbol named.
	if reportTotal == nil || len(reportRows) != 9 {
		t.Fatalf("report has no total or not 9 rows:\n%s", report.Bytes())
	}

	run := func(args ...string) []byte {
		out, err := exec.Command("go", append([]string{"tool", "pprof"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go tool pprof %v: %v\n%s", args, err, out)
		}
		return out
	}
	top := run("-top", "-sample_index=samples", "-nodefraction=0", "-nodecount=1000", path)
	total := regexp.MustCompile(`of (\d+) total`).FindSubmatch(top)
	if total == nil || string(total[1]) != string(reportTotal[1]) {
		t.Errorf("pprof -top total %q, report total %s:\n%s", total, reportTotal[1], top)
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ +(\d+) +\S+% +\S+% +\d+ +\S+%  (.+)$`).FindAllSubmatch(top, -1) {
		rows[string(m[2])] = string(m[1])
	}
	if !reflect.DeepEqual(rows, reportRows) {
		t.Errorf("pprof -top per function %v, report %v", rows, reportRows)
	}

	raw := run("-raw", path)
	var sum uint64
	for _, m := range regexp.MustCompile(`(?m)^ +(\d+) +(\d+): \d+ $`).FindAllSubmatch(raw, -1) {
		n, _ := strconv.ParseUint(string(m[1]), 10, 64)
		ns, _ := strconv.ParseUint(string(m[2]), 10, 64)
		if ns != n*uint64(c.Meta.PeriodEvents) {
			t.Errorf("raw sample %s: %d ns, want samples × period", m[0], ns)
		}
		sum += n
	}
	if strconv.FormatUint(sum, 10) != string(reportTotal[1]) {
		t.Errorf("pprof -raw samples sum to %d, report total %s", sum, reportTotal[1])
	}
}

// TestPprofStacks: with stacks, every sample is one of them, its locations leaf first and
// named as the frames are, labelled with its process, thread, thread name and event.
func TestPprofStacks(t *testing.T) {
	c := expectedCapture(len(testCaptureSteps()))
	p := parsedPprof(t, c)
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		frames    []string
		n         int64
		tid       int64
		comm      string
		addresses []uint64
	}{
		{[]string{"loop", "fib", "heap_form_minimal_tuple", "[outside JIT] " + testNativeFile}, 9, 101, "worker",
			[]uint64{0x7f0000001004, 0x7f0000000011, 0x555500001100, 0x555500000ff0}},
		{[]string{"do_syscall_64", "fib"}, 2, 100, "lli-14", []uint64{0xffffffff81000010, 0x7f0000000020}},
	}
	if len(p.Sample) != len(want) {
		t.Fatalf("%d samples, want %d:\n%s", len(p.Sample), len(want), p)
	}
	for i, s := range p.Sample {
		w := want[i]
		var names []string
		var addrs []uint64
		for _, l := range s.Location {
			addrs = append(addrs, l.Address)
			for _, line := range l.Line {
				names = append(names, line.Function.Name)
			}
		}
		if !reflect.DeepEqual(names, w.frames) || !reflect.DeepEqual(addrs, w.addresses) {
			t.Errorf("sample %d: frames %q at %#x, want %q at %#x", i, names, addrs, w.frames, w.addresses)
		}
		if s.Value[0] != w.n || s.NumLabel["pid"][0] != 100 || s.NumLabel["tid"][0] != w.tid ||
			s.Label["comm"][0] != w.comm || s.Label["event"][0] != "cpu-clock" {
			t.Errorf("sample %d: value %d, labels %v %v", i, s.Value, s.NumLabel, s.Label)
		}
	}
	// The native frame at an address of the process's mapping is in that mapping, with its
	// build-id; the JIT frames in their objects'.
	if m := p.Sample[0].Location[2].Mapping; m.File != testNativeFile || m.BuildID != "0badc0de" {
		t.Errorf("native frame's mapping %+v", m)
	}
	if m := p.Sample[0].Location[1].Mapping; m.Start != c.Objects[0].Object.Addr {
		t.Errorf("JIT frame's mapping %+v, want the object's", m)
	}
}

// TestPprofContainerLabel: the samples of a process in a container, leaves or stacks, carry
// its id as the label "container_id" and its cgroup as "cgroup"; the other processes' carry
// neither.
func TestPprofContainerLabel(t *testing.T) {
	cgroup := "/system.slice/docker-" + testContainerID + ".scope"
	for name, c := range map[string]*Capture{"stacks": expectedCapture(len(testCaptureSteps())), "leaves": leafCapture()} {
		for i := range c.Processes {
			c.Processes[i].ContainerID, c.Processes[i].CgroupPath = "", ""
			if c.Processes[i].Pid == 100 {
				c.Processes[i].ContainerID, c.Processes[i].CgroupPath = testContainerID, cgroup
			}
		}
		p := parsedPprof(t, c)
		in, out := 0, 0
		for _, s := range p.Sample {
			got, gotCgroup := s.Label["container_id"], s.Label["cgroup"]
			switch {
			case s.NumLabel["pid"][0] == 100 && slices.Equal(got, []string{testContainerID}) && slices.Equal(gotCgroup, []string{cgroup}):
				in++
			case s.NumLabel["pid"][0] != 100 && got == nil && gotCgroup == nil:
				out++
			default:
				t.Errorf("%s: pid %d's sample labelled container_id %q, cgroup %q", name, s.NumLabel["pid"][0], got, gotCgroup)
			}
		}
		if in == 0 || name == "leaves" && out == 0 {
			t.Errorf("%s: %d samples in the container, %d outside", name, in, out)
		}
	}
}

// TestPprofMainMapping: pprof's main mapping ("File:" in go tool pprof) is the executable of
// the capture's processes, not the first JIT function or library sampled; with the process's
// native mapping of it, with that mapping's range and build-id.
func TestPprofMainMapping(t *testing.T) {
	for name, c := range map[string]*Capture{"leaves": leafCapture(), "stacks": expectedCapture(len(testCaptureSteps()))} {
		if m := parsedPprof(t, c).Mapping[0]; m.File != "/usr/lib/llvm-14/bin/lli" {
			t.Errorf("%s: main mapping %+v, want the executable /usr/lib/llvm-14/bin/lli", name, m)
		}
	}
	c := leafCapture()
	c.Processes = []Process{{Pid: c.Native[0].Pid, Command: "postgres", Executable: c.Native[0].File}}
	p := parsedPprof(t, c)
	if m, n := p.Mapping[0], c.Native[0]; m.File != n.File || m.Start != n.Start || m.Limit != n.Limit || m.BuildID != n.BuildID || !m.HasFunctions {
		t.Errorf("main mapping %+v, want the process's native mapping of its executable %+v, with its functions", m, n)
	}
	// Profiles merged (go tool pprof of several files) take the first of two mappings alike:
	// that of the executable's functions, or pprof names them again from the file it finds.
	merged, err := profile.Merge([]*profile.Profile{p, parsedPprof(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range merged.Mapping {
		if m.File == c.Native[0].File && !m.HasFunctions {
			t.Errorf("merged, the mapping of %s has no functions: %+v", m.File, m)
		}
	}
}

// parsedPprof is c's pprof profile as the pprof package reads it.
func parsedPprof(t *testing.T, c *Capture) *profile.Profile {
	t.Helper()
	var gz bytes.Buffer
	if err := WritePprof(&gz, c); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&gz)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPprofParsed: Pprof is the profile WritePprof writes, sample for sample.
func TestPprofParsed(t *testing.T) {
	c := expectedCapture(len(testCaptureSteps()))
	got, err := Pprof(c)
	if err != nil {
		t.Fatal(err)
	}
	want := parsedPprof(t, c)
	if got.String() != want.String() || len(got.Sample) == 0 {
		t.Errorf("Pprof:\n%s\nWritePprof:\n%s", got, want)
	}
}

// TestPprofStringsUTF8: names, paths and command lines of bytes that are not UTF-8 (a JIT's
// Latin-1 names, a file's path) are written as UTF-8, each invalid byte as U+FFFD, as
// profile.proto's strings must be for protobuf's decoders; the rest of each string stays.
func TestPprofStringsUTF8(t *testing.T) {
	c := expectedCapture(len(testCaptureSteps()))
	c.Objects[0].Object.Name = "caf\xe9_loop"
	for i := range c.Stacks {
		c.Stacks[i].Comm = "work\xe9r"
		for j := range c.Stacks[i].Frames {
			if f := &c.Stacks[i].Frames[j]; f.Mapping == testNativeFile {
				f.Mapping = "/opt/r\xe9sum\xe9/bin/app"
				if f.Function != "" {
					f.Function = "nat\xffive"
				}
			}
		}
	}
	for i := range c.Processes {
		c.Processes[i].Command = "cmd\xfe"
		c.Processes[i].CommandLine = []string{"prog", "--name=\xc3"}
	}
	p := parsedPprof(t, c)
	var all []string
	for _, f := range p.Function {
		all = append(all, f.Name, f.SystemName, f.Filename)
	}
	for _, m := range p.Mapping {
		all = append(all, m.File)
	}
	for _, s := range p.Sample {
		for _, v := range s.Label {
			all = append(all, v...)
		}
	}
	for _, s := range all {
		if !utf8.ValidString(s) {
			t.Errorf("string %q is not UTF-8", s)
		}
	}
	for _, want := range []string{"caf\uFFFD_loop", "/opt/r\uFFFDsum\uFFFD/bin/app", "nat\uFFFDive", "work\uFFFDr"} {
		if !slices.Contains(all, want) {
			t.Errorf("no string %q", want)
		}
	}
}
