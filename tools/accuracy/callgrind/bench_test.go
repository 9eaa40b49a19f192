package callgrind

import (
	"fmt"
	"strings"
	"testing"
)

// syntheticProfile is callgrind-shaped text: nFns functions of 50 instructions, each with a
// conditional back edge and a call, as --dump-instr=yes --collect-jumps=yes writes them.
func syntheticProfile(nFns int) (string, int) {
	var b strings.Builder
	b.WriteString("# callgrind format\nversion: 1\npositions: instr line\nevents: Ir\n\nob=(1) ???\nfl=(1) ???\n")
	lines := 7
	for f := 0; f < nFns; f++ {
		base := 0x4000000 + f*0x1000
		fmt.Fprintf(&b, "fn=(%d) 0x%016x\n%#x 0 1\n", f+2, base, base)
		lines += 2
		for i := 1; i < 50; i++ {
			fmt.Fprintf(&b, "+%d 0 %d\n", 3+i%4, 1000+i)
			lines++
		}
		b.WriteString("jcnd=999/1000 -40 0\n* 0\ncfn=(1) callee\ncalls=1000 0x9000 0\n* 0 5000\n+5 0 1\n\n")
		lines += 7
	}
	return b.String(), lines
}

// BenchmarkParse reports parse speed on callgrind-shaped text (lli-14's own profile of a tiny
// program is ~1 M lines, 9 MB).
func BenchmarkParse(b *testing.B) {
	text, lines := syntheticProfile(2000)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(strings.NewReader(text), Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(lines), "ns/line")
}
