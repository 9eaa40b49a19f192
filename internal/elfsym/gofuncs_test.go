package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// TestGoFuncs builds testdata/goprog.go with and without its symbols (-ldflags=-s -w), as
// an executable and a PIE, linked by Go's linker and by the system's: the stripped build's
// table, read from the Go function table, names every function the other build's .symtab
// names at the same address among Go's code (the builds lay out their code alike), but
// .symtab's ABI suffixes (runtime.goexit.abi0).
func TestGoFuncs(t *testing.T) {
	testenv.Requires(t, testenv.Tool("go"))
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		flags []string
	}{
		{"exe", nil},
		{"pie", []string{"-buildmode=pie"}},
		{"external", []string{"-ldflags=-linkmode=external"}},
		{"external-pie", []string{"-buildmode=pie", "-ldflags=-linkmode=external"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(strings.Join(c.flags, " "), "external") {
				testenv.Requires(t, testenv.Tool("cc"))
			}
			full, stripped := buildGoProg(t, filepath.Join(dir, c.name), c.flags)
			tab := readFile(t, stripped)
			checkTable(t, tab)
			if !strings.Contains(strings.Join(tab.From, " "), ".gopclntab") {
				t.Fatalf("the stripped build's table is from %v", tab.From)
			}
			syms := testenv.ELFSymbols(t, full)
			var text, etext uint64
			for _, s := range syms {
				switch s.Name {
				case "runtime.text":
					text = s.Value
				case "runtime.etext":
					etext = s.Value
				}
			}
			var checked int
			for _, s := range syms {
				// The C code an external linker adds (_start, the runtime's cgo parts) lies
				// outside Go's.
				if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value < text || s.Value >= etext || s.Name == "runtime.text" {
					continue
				}
				want := strings.TrimSuffix(s.Name, ".abi0")
				for _, at := range []uint64{s.Value, s.Value + s.Size/2} {
					if got, _ := tab.LookupVaddr(at); got != want {
						t.Errorf("%#x: %q, want %q", at, got, want)
					}
				}
				checked++
			}
			if checked < 1000 {
				t.Fatalf("%d Go functions in the symbols of %s", checked, full)
			}
			t.Logf("%d functions named alike", checked)
		})
	}
}

// buildGoProg builds testdata/goprog.go at path with flags, and at path-stripped without
// its symbols.
func buildGoProg(t *testing.T, path string, flags []string) (full, stripped string) {
	t.Helper()
	full, stripped = path, path+"-stripped"
	for _, out := range []string{full, stripped} {
		args := append([]string{"build", "-o", out}, flags...)
		if out == stripped {
			args = stripFlags(args)
		}
		if b, err := exec.Command("go", append(args, "testdata/goprog.go")...).CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	return full, stripped
}

// stripFlags adds -s -w to a go build's -ldflags.
func stripFlags(args []string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if v, ok := strings.CutPrefix(a, "-ldflags="); ok {
			out[i] = "-ldflags=-s -w " + v
			return out
		}
	}
	return append(out, "-ldflags=-s -w")
}

// readFile reads the table of the file at path (Read).
func readFile(t testing.TB, path string) *Table {
	t.Helper()
	f, size := openSized(t, path)
	tab, err := Read(f, size, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// openSized opens the file at path, closed when the test ends, and returns its size.
func openSized(t testing.TB, path string) (*os.File, int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return f, st.Size()
}

// goFunc is a function of a synthetic Go function table.
type goFunc struct {
	entry, end uint64
	name       string
}

// goTableBytes lays out a Go function table of the format magic names, pointers of ptr
// bytes in byte order bo, entries counted from text (Go 1.18 and later; the header holds
// text when inHeader). The functions follow each other: each one's end is the next one's
// entry.
func goTableBytes(magic uint32, ptr int, bo binary.ByteOrder, text uint64, inHeader bool, funcs []goFunc) []byte {
	offsets := magic == goMagic118 || magic == goMagic120
	words := map[uint32]int{goMagic12: 1, goMagic116: 7, goMagic118: 8, goMagic120: 8}[magic]
	var b bytes.Buffer
	putPtr := func(v uint64) {
		if ptr == 4 {
			binary.Write(&b, bo, uint32(v))
		} else {
			binary.Write(&b, bo, v)
		}
	}
	header := 8 + words*ptr
	var names bytes.Buffer
	nameOff := make([]uint32, len(funcs))
	for i, f := range funcs {
		nameOff[i] = uint32(names.Len())
		names.WriteString(f.name + "\x00")
	}
	field := ptr
	if offsets {
		field = 4
	}
	namesAt := uint64(header)
	functabAt := namesAt + uint64(names.Len())
	if magic == goMagic12 {
		functabAt = uint64(header) // names after the records
	}
	// A record: the entry, the name's offset, args, deferreturn and the pcsp table's offset.
	recordSize := uint64(ptr + 16)
	if offsets {
		recordSize = 20
	}
	recordsAt := functabAt + uint64((2*len(funcs)+1)*field)
	if magic == goMagic12 {
		namesAt = recordsAt + uint64(len(funcs))*recordSize
	}
	pcspAt := recordsAt + uint64(len(funcs))*recordSize
	if magic == goMagic12 {
		pcspAt += uint64(names.Len())
	}
	var pcsp bytes.Buffer
	// header
	binary.Write(&b, bo, magic)
	b.Write([]byte{0, 0, 1, byte(ptr)})
	putPtr(uint64(len(funcs)))
	switch magic {
	case goMagic116:
		putPtr(0)         // files
		putPtr(namesAt)   // names
		putPtr(functabAt) // cutab: the names end there
		putPtr(0)
		putPtr(0)
		putPtr(functabAt)
	case goMagic118, goMagic120:
		putPtr(0)
		if inHeader {
			putPtr(text)
		} else {
			putPtr(0)
		}
		putPtr(namesAt)
		putPtr(functabAt)
		putPtr(0)
		putPtr(0)
		putPtr(functabAt)
	}
	if magic != goMagic12 {
		b.Write(names.Bytes())
	}
	// function table, then the records
	base := functabAt
	if magic == goMagic12 {
		base = 0
	}
	putField := func(v uint64) {
		if offsets {
			binary.Write(&b, bo, uint32(v))
		} else {
			putPtr(v)
		}
	}
	pc := func(v uint64) uint64 {
		if offsets {
			return v - text
		}
		return v
	}
	for i, f := range funcs {
		putField(pc(f.entry))
		putField(recordsAt + uint64(i)*recordSize - base)
	}
	putField(pc(funcs[len(funcs)-1].end))
	for i, f := range funcs {
		if offsets {
			binary.Write(&b, bo, uint32(pc(f.entry)))
		} else {
			putPtr(f.entry)
		}
		off := nameOff[i]
		if magic == goMagic12 {
			off += uint32(namesAt)
		}
		binary.Write(&b, bo, off)
		binary.Write(&b, bo, [2]uint32{})
		binary.Write(&b, bo, uint32(pcspAt)+uint32(pcsp.Len()))
		pcsp.Write(goPCSP(f.end - f.entry))
	}
	if magic == goMagic12 {
		b.Write(names.Bytes())
	}
	b.Write(pcsp.Bytes())
	return b.Bytes()
}

// goPCSP is the pcsp table of a synthetic function of n bytes (n at least 8), counted
// from the table's start (its pctab word is 0): a depth of 0 for its first 4 bytes and its
// last 4, 8 between, as a frame that pushes one word.
func goPCSP(n uint64) []byte {
	b := []byte{2, 4, 16} // changes zig-zag encoded: +1, then +8 for n-8 bytes, -8 for 4
	b = binary.AppendUvarint(b, n-8)
	return append(b, 15, 4, 0)
}

// goSpansWant are the spans goPCSP's table gives of f.
func goSpansWant(f goFunc) []GoSpan {
	return []GoSpan{{Lo: f.entry, Hi: f.entry + 4}, {Lo: f.entry + 4, Hi: f.end - 4, Depth: 8}, {Lo: f.end - 4, Hi: f.end}}
}

// goTableCases are synthetic tables of every format, pointer size and byte order.
func goTableCases() []struct {
	name string
	data []byte
	text uint64
} {
	funcs := []goFunc{{0x401000, 0x401040, "main.main"}, {0x401040, 0x4010a0, "runtime.goexit"}, {0x4010a0, 0x401200, "main.(*T).m"}}
	type c = struct {
		name string
		data []byte
		text uint64
	}
	var out []c
	for _, m := range []struct {
		name  string
		magic uint32
	}{{"1.2", goMagic12}, {"1.16", goMagic116}, {"1.18", goMagic118}, {"1.20", goMagic120}} {
		for _, ptr := range []int{8, 4} {
			for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
				name := m.name + "-" + bo.String() + map[int]string{4: "-32", 8: "-64"}[ptr]
				out = append(out, c{name, goTableBytes(m.magic, ptr, bo, 0x400f00, true, funcs), 0})
				if m.magic == goMagic120 {
					out = append(out, c{name + "-text-elsewhere", goTableBytes(m.magic, ptr, bo, 0x400f00, false, funcs), 0x400f00})
				}
			}
		}
	}
	return out
}

// TestGoTableFormats reads synthetic tables of the four formats, both pointer sizes and
// byte orders: every function's entry, end and name.
func TestGoTableFormats(t *testing.T) {
	want := []goFunc{{0x401000, 0x401040, "main.main"}, {0x401040, 0x4010a0, "runtime.goexit"}, {0x4010a0, 0x401200, "main.(*T).m"}}
	for _, c := range goTableCases() {
		t.Run(c.name, func(t *testing.T) {
			tab, err := parseGoTable(c.data)
			if err != nil {
				t.Fatal(err)
			}
			text := tab.text
			if text == 0 {
				text = c.text
			}
			var got []goFunc
			tab.funcs(text, func(entry, end uint64, name string) bool {
				got = append(got, goFunc{entry, end, name})
				return true
			})
			if len(got) != len(want) {
				t.Fatalf("%+v, want %+v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("function %d: %+v, want %+v", i, got[i], want[i])
				}
			}
			tab.eachFunc(text, func(entry, end, rec uint64, name string) bool {
				budget := 1 << 30
				spans := tab.frameSpans(entry, end, rec, nil, &budget)
				if want := goSpansWant(goFunc{entry, end, name}); !slices.Equal(spans, want) {
					t.Errorf("%s: frames %+v, want %+v", name, spans, want)
				}
				return true
			})
		})
	}
	// A count of functions the table cannot hold is refused before anything is read.
	bad := goTableBytes(goMagic120, 8, binary.LittleEndian, 0x400f00, true, want)
	binary.LittleEndian.PutUint64(bad[8:], 1<<40)
	if _, err := parseGoTable(bad); err == nil {
		t.Error("a table claiming 2^40 functions was read")
	}
}

// FuzzGoTable reads arbitrary bytes as a Go function table: no crash, no more functions
// than its bytes can hold, and each function's frame depths in order within it. Seeds: the synthetic tables of every format.
func FuzzGoTable(f *testing.F) {
	for _, c := range goTableCases() {
		f.Add(c.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := parseGoTable(data)
		if err != nil {
			return
		}
		n := 0
		tab.eachFunc(0x400000, func(entry, end, rec uint64, name string) bool {
			if end <= entry || name == "" {
				t.Fatalf("function %q at [%#x, %#x)", name, entry, end)
			}
			lo := entry
			budget := 1 << 30
			for _, s := range tab.frameSpans(entry, end, rec, nil, &budget) {
				if s.Lo < lo || s.Hi <= s.Lo || s.Hi > end {
					t.Fatalf("function %q at [%#x, %#x): span [%#x, %#x) after %#x", name, entry, end, s.Lo, s.Hi, lo)
				}
				lo = s.Hi
			}
			n++
			return true
		})
		if n*8 > len(data) {
			t.Fatalf("%d functions from %d bytes", n, len(data))
		}
	})
}

// TestGoTextFromModuleData finds runtime.text in the runtime's module data, as profd must
// for Go 1.26 on, of Go executables built by Go 1.18 to 1.25 on this machine's PATH (their
// tables' headers still hold it): both agree. Skipped where PATH has none.
func TestGoTextFromModuleData(t *testing.T) {
	checked := 0
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			info, err := e.Info()
			if err != nil || !info.Mode().IsRegular() || info.Size() < 1<<20 || checked == 5 {
				continue
			}
			path := filepath.Join(dir, e.Name())
			f, err := os.Open(path)
			if err != nil {
				continue
			}
			ef, err := openELF(f, info.Size())
			s := (*elf.Section)(nil)
			if err == nil {
				s = ef.f.Section(".gopclntab")
			}
			var tab *goTable
			if s != nil {
				if data, err := ef.section(s, DefaultMaxStringBytes); err == nil {
					tab, _ = parseGoTable(data)
				}
			}
			if tab != nil && tab.text != 0 {
				text, err := ef.goText(tab, s.Addr, DefaultMaxStringBytes)
				if err != nil || text != tab.text {
					t.Errorf("%s: runtime.text %#x in its module data (%v), %#x in its table's header", path, text, err, tab.text)
				}
				checked++
			}
			f.Close()
		}
	}
	if checked == 0 {
		t.Skip("no Go executable of Go 1.18 to 1.25 on PATH")
	}
	t.Logf("%d executables", checked)
}
