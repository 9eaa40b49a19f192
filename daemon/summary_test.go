package daemon

import (
	"strconv"
	"strings"
	"testing"

	"github.com/profd/profd/profileio"
)

// TestExitedSummaryBounded: the summary adds up the final totals of the processes that
// exited instead of keeping each: a run of weeks that profiles a hundred thousand processes
// keeps a few thousand function totals for them, the hottest ones, and its screen still
// names the hottest function of all and every sample.
func TestExitedSummaryBounded(t *testing.T) {
	var e exitedSummary
	const procs = 100000
	for i := range procs {
		p := procSummary{jit: 10, outside: 1, totals: []profileio.FunctionTotal{
			{Name: "query_" + strconv.Itoa(i), Samples: 9, JIT: true}, // a function of its own
			{Name: "shared", Samples: 1, JIT: true},                   // one every process runs
			{Name: "[outside JIT] libc.so.6", Samples: 1},
		}}
		e.add(p)
	}
	if len(e.functions) > 2*exitedKeep || !e.trimmed {
		t.Errorf("%d function totals kept for %d processes (trimmed %v), want at most %d", len(e.functions), procs,
			e.trimmed, 2*exitedKeep)
	}
	if e.functions["shared"] != procs || e.jit != 10*procs || e.outside != procs {
		t.Errorf("shared %d, jit %d, outside %d; want %d, %d, %d", e.functions["shared"], e.jit, e.outside, procs, 10*procs, procs)
	}
	var out strings.Builder
	writeSummary(&out, 1, false, []procSummary{e.summary()}, e.trimmed, "counters")
	lines := strings.Split(out.String(), "\n")
	if !strings.HasPrefix(lines[0], "profd flush #1: 1100000 samples") || !strings.HasSuffix(lines[2], " shared") ||
		!strings.Contains(out.String(), "or more other functions") {
		t.Errorf("summary:\n%s", out.String())
	}
}

// TestSummaryShowsNamesSafely: a JIT function's name is the target's to choose; in the
// summary it cannot start a line of its own, move a terminal's cursor or fill the screen.
func TestSummaryShowsNamesSafely(t *testing.T) {
	long := strings.Repeat("é", 1000)
	p := procSummary{jit: 3, totals: []profileio.FunctionTotal{
		{Name: "f\nprofd flush #9: 0 samples", Samples: 1, JIT: true},
		{Name: "g\x1b[2J\x00\xff", Samples: 1, JIT: true},
		{Name: long, Samples: 1, JIT: true},
	}}
	var out strings.Builder
	writeSummary(&out, 1, false, []procSummary{p}, false, "counters")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6 (the head, the column names, three functions, the counters):\n%q", len(lines), out.String())
	}
	for _, l := range lines {
		for _, r := range l {
			if r < 0x20 || r == 0x7f {
				t.Errorf("line %q holds control character %#x", l, r)
			}
		}
		if len(l) > 400 {
			t.Errorf("a line of %d bytes, want at most 400", len(l))
		}
	}
	if !strings.Contains(out.String(), strings.Repeat("é", 50)) || strings.Count(out.String(), "\uFFFD") < 4 {
		t.Errorf("summary:\n%q", out.String())
	}
}

// TestOutputBaseFitsName: an executable's name may be 255 bytes; the outputs' names (and
// the temporary names they are written under) must still fit the file system's 255.
func TestOutputBaseFitsName(t *testing.T) {
	image := strings.Repeat("x", 255)
	for _, base := range []string{outputBase(image, 4194304, 99), groupBase(image, 65534, false)} {
		if n := len(base) + len(".prof.extbinary") + len(".tmp-18446744073709551615") + 1; n > 255 {
			t.Errorf("output base %q: a temporary file name of %d bytes", base, n)
		}
	}
}
