package profileio

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/internal/testenv"
)

func TestPprofGolden(t *testing.T) {
	c := expectedCapture(len(testCaptureSteps()))
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
	c := expectedCapture(len(testCaptureSteps()))
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
