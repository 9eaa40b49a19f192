package callgrind

import (
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(snippet))
	f.Add([]byte("positions: instr line\nevents: Ir\nfn=(1) f\n0x10 0 1\njcnd=1/2 +4 0\n* 0\n+4 0 1\n"))
	f.Add([]byte("events: Ir\ncfn=(2) g\ncalls=3 0x20\n5 9\n"))
	f.Add([]byte("positions: instr\nevents: Ir\njump=1 -1\n*\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := Options{MaxLineBytes: 4096, MaxNames: 64, MaxRecords: 256}
		p, err := Parse(strings.NewReader(string(data)), opts)
		if err != nil {
			return
		}
		if len(p.Instrs)+len(p.Jumps)+len(p.Calls) > opts.MaxRecords {
			t.Fatalf("%d records over the bound", len(p.Instrs)+len(p.Jumps)+len(p.Calls))
		}
		for _, in := range p.Instrs {
			if len(in.Self) != len(p.Events) {
				t.Fatalf("instr %+v: %d costs for %d events", in, len(in.Self), len(p.Events))
			}
		}
		for _, j := range p.Jumps {
			if j.Taken > j.Executed {
				t.Fatalf("jump %+v taken more than executed", j)
			}
		}
	})
}
