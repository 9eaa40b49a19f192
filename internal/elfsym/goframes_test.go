package elfsym

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// goBuilds are the builds by Go's linker the tests of its tables read: an executable and a
// PIE.
var goBuilds = []struct {
	name  string
	flags []string
}{{"exe", nil}, {"pie", []string{"-buildmode=pie"}}}

// TestGoFrames reads the frame depths of testdata/goprog.go's functions, built as an
// executable and a PIE, and holds them against the .debug_frame Go's linker writes for the
// same build, as readelf reads it: at every row of every function readelf prints, the
// depth GoFrames gives is the CFA's offset from the stack pointer less the return
// address's 8 bytes, up to the row's end. The functions Go's stacks start in are
// outermost, and no other is; those that switch stacks are marked so.
func TestGoFrames(t *testing.T) {
	testenv.Requires(t, testenv.Tool("go"), testenv.Tool("readelf"))
	dir := t.TempDir()
	for _, c := range goBuilds {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name)
			args := append([]string{"build", "-o", path}, c.flags...)
			if b, err := exec.Command("go", append(args, "testdata/goprog.go")...).CombinedOutput(); err != nil {
				t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
			}
			spans := goFrames(t, path)
			depthAt := func(pc uint64) (GoSpan, bool) {
				i := sort.Search(len(spans), func(i int) bool { return spans[i].Hi > pc })
				if i == len(spans) || spans[i].Lo > pc {
					return GoSpan{}, false
				}
				return spans[i], true
			}
			var outermost, switches []string
			tab := readFile(t, path)
			for _, s := range spans {
				name, _ := tab.LookupVaddr(s.Lo)
				name = strings.TrimSuffix(name, ".abi0")
				if s.Outermost {
					outermost = append(outermost, name)
				}
				if s.Switches {
					switches = append(switches, name)
				}
			}
			if got := strings.Join(dedup(outermost), " "); got != "runtime.goexit runtime.mstart runtime.rt0_go" {
				t.Errorf("outermost: %s, want runtime.goexit, runtime.mstart and runtime.rt0_go", got)
			}
			got := dedup(switches)
			for _, want := range []string{"runtime.mcall", "runtime.morestack", "runtime.systemstack"} {
				if !slices.Contains(got, want) {
					t.Errorf("switching stacks: %v, want %s among them", got, want)
				}
			}
			for _, name := range got {
				if !goSwitches[name] {
					t.Errorf("%s marked as switching stacks", name)
				}
			}
			rows := debugFrameRows(t, path)
			checked := 0
			for _, r := range rows {
				for _, pc := range []uint64{r.pc, r.end - 1} {
					s, ok := depthAt(pc)
					if !ok {
						t.Errorf("%#x: no depth; .debug_frame says CFA rsp+%d", pc, r.cfa)
						continue
					}
					if int64(s.Depth)+8 != r.cfa {
						t.Errorf("%#x: depth %d; .debug_frame says CFA rsp+%d", pc, s.Depth, r.cfa)
					}
				}
				checked++
			}
			if checked < 5000 {
				t.Fatalf("%d rows of .debug_frame checked", checked)
			}
			t.Logf("%d spans; %d rows of .debug_frame agree", len(spans), checked)
		})
	}
}

// dedup is names sorted, each once.
func dedup(names []string) []string {
	sort.Strings(names)
	out := names[:0]
	for i, n := range names {
		if i == 0 || n != names[i-1] {
			out = append(out, n)
		}
	}
	return out
}

// goFrames is every span GoFrames gives of the file at path.
func goFrames(t *testing.T, path string) []GoSpan {
	t.Helper()
	f, size := openSized(t, path)
	var spans []GoSpan
	if err := GoFrames(f, size, func(s GoSpan) bool { spans = append(spans, s); return true }); err != nil {
		t.Fatal(err)
	}
	for i, s := range spans {
		if s.Hi <= s.Lo || i > 0 && s.Lo < spans[i-1].Hi {
			t.Fatalf("span %d [%#x, %#x) after [%#x, %#x)", i, s.Lo, s.Hi, spans[i-1].Lo, spans[i-1].Hi)
		}
	}
	return spans
}

// debugFrameRow is a row of readelf's reading of .debug_frame: from pc up to end, the CFA
// is the stack pointer plus cfa.
type debugFrameRow struct {
	pc, end uint64
	cfa     int64
}

var (
	debugFrameFDE = regexp.MustCompile(`FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)`)
	debugFrameRSP = regexp.MustCompile(`^([0-9a-f]+) +rsp\+([0-9]+) `)
)

// debugFrameRows runs readelf on path and returns every row of its .debug_frame whose CFA
// is the stack pointer's.
func debugFrameRows(t *testing.T, path string) []debugFrameRow {
	t.Helper()
	out, err := exec.Command("readelf", "--debug-dump=frames-interp", path).Output()
	if err != nil {
		t.Fatalf("readelf %s: %v", path, err)
	}
	var rows []debugFrameRow
	var fdeEnd uint64
	var fde []debugFrameRow
	flush := func() {
		for i := range fde {
			fde[i].end = fdeEnd
			if i+1 < len(fde) {
				fde[i].end = fde[i+1].pc
			}
			if fde[i].end > fde[i].pc {
				rows = append(rows, fde[i])
			}
		}
		fde = nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := debugFrameFDE.FindStringSubmatch(line); m != nil {
			flush()
			fdeEnd, _ = strconv.ParseUint(m[2], 16, 64)
			continue
		}
		if m := debugFrameRSP.FindStringSubmatch(line); m != nil {
			pc, _ := strconv.ParseUint(m[1], 16, 64)
			cfa, _ := strconv.ParseInt(m[2], 10, 64)
			fde = append(fde, debugFrameRow{pc: pc, cfa: cfa})
		}
	}
	flush()
	return rows
}

// TestGoFramesBounded: a made-up table whose functions all point at one long pcsp table
// (pairs that advance nothing, to be decoded once per function) is decoded no further
// than a few times its bytes: the walk stops with an error, having read a few functions.
func TestGoFramesBounded(t *testing.T) {
	var funcs []goFunc
	for i := range 2000 {
		at := 0x401000 + uint64(i)*0x100
		funcs = append(funcs, goFunc{at, at + 0x100, "f"})
	}
	data := goTableBytes(goMagic120, 8, binary.LittleEndian, 0x400f00, true, funcs)
	long := len(data)
	data = append(data, 2, 4) // depth 0 for 4 bytes, then 64 KB of pairs of no length
	for range 32 << 10 {
		data = append(data, 16, 0)
	}
	data = append(data, 0)
	tab, err := parseGoTable(data)
	if err != nil {
		t.Fatal(err)
	}
	visited := 0
	tab.eachFunc(tab.text, func(entry, end, rec uint64, name string) bool {
		binary.LittleEndian.PutUint32(data[rec+tab.nameAt()+12:], uint32(long))
		return true
	})
	err = tab.frames(tab.text, func(GoSpan) bool { visited++; return true })
	if err == nil || visited >= len(funcs) {
		t.Errorf("%d spans, error %v: want the walk stopped early with an error", visited, err)
	}
	t.Logf("%d spans before the bound: %v", visited, err)
}
