package elfsym

import (
	"debug/elf"
	"debug/gosym"
	"path/filepath"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// TestGoLines builds testdata/goprog.go as an executable and a PIE, with its symbols and
// without, and holds the source positions read from Go's function table against Go's own
// reader of the table (debug/gosym, over the full build) at four addresses of every
// function, and the lines of inlined calls against the DWARF the compiler wrote: at the
// first address of each range of each inlined subroutine, the position of its caller is
// its call's line.
func TestGoLines(t *testing.T) {
	testenv.Requires(t, testenv.Tool("go"))
	dir := t.TempDir()
	for _, c := range goBuilds {
		t.Run(c.name, func(t *testing.T) {
			full, stripped := buildGoProg(t, filepath.Join(dir, c.name), c.flags)
			want := gosymTable(t, full)
			calls := dwarfInlinedCalls(t, full)
			for _, path := range []string{full, stripped} {
				tab := readFile(t, path)
				name := filepath.Base(path)
				checked, bad := 0, 0
				for _, fn := range want.Funcs {
					for _, pc := range []uint64{fn.Entry, fn.Entry + (fn.End-fn.Entry)/3, fn.Entry + (fn.End-fn.Entry)*2/3, fn.End - 1} {
						file, line, _ := want.PCToLine(pc)
						if line <= 0 {
							continue
						}
						checked++
						got := tab.SourceVaddr(pc, nil)
						if len(got) == 0 || got[0] != (SourceLine{File: file, Line: uint32(line)}) {
							if bad++; bad <= 5 {
								t.Errorf("%s: %s at %#x: %+v, want %s:%d", name, fn.Name, pc, got, file, line)
							}
						}
					}
				}
				if checked < 1000 || bad > 0 {
					t.Errorf("%s: %d of %d positions differ from debug/gosym's", name, bad, checked)
				}
				checkedCalls, badCalls := 0, 0
				for _, call := range calls {
					chain := tab.InlinedVaddr(call.addr)
					got := tab.SourceVaddr(call.addr, nil)
					if len(got) != len(chain)+1 {
						t.Fatalf("%s at %#x: %d positions for %d inlined calls", name, call.addr, len(got), len(chain))
					}
					if call.line == 0 || len(chain)-call.depth < 1 || len(chain)-call.depth >= len(got) {
						continue
					}
					checkedCalls++
					if g := got[len(chain)-call.depth]; int64(g.Line) != call.line {
						if badCalls++; badCalls <= 5 {
							t.Errorf("%s: %s inlined at %#x: its caller at %+v, want line %d", name, call.name, call.addr, g, call.line)
						}
					}
				}
				if checkedCalls < 1000 || badCalls > 0 {
					t.Errorf("%s: %d of %d inlined calls' lines differ from the DWARF's", name, badCalls, checkedCalls)
				}
				t.Logf("%s: %d positions as debug/gosym has them, %d call lines as the DWARF has them", name, checked, checkedCalls)
			}
		})
	}
}

// gosymTable is Go's own reading of the file's function table.
func gosymTable(t *testing.T, path string) *gosym.Table {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := f.Section(".gopclntab").Data()
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, f.Section(".text").Addr))
	if err != nil {
		t.Fatal(err)
	}
	return tab
}
