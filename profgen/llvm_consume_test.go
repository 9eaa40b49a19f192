package profgen

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

const consumeWorkload = `int work(int n) {
  int s = 0;
  for (int i = 0; i < n; i++) {
    if (i % 3 == 0)
      s += i;
    else
      s -= 1;
  }
  return s;
}
`

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// sourceLine returns the 1-based line of the workload holding text.
func sourceLine(t *testing.T, text string) uint32 {
	for i, l := range strings.Split(consumeWorkload, "\n") {
		if strings.Contains(l, text) {
			return uint32(i + 1)
		}
	}
	t.Fatalf("workload has no %q", text)
	return 0
}

// TestLLVMConsumesProfile compiles a C workload with clang-14, builds a profile for it from
// block counts through Project (addresses are synthetic, lines are the IR's debug lines),
// and checks that opt-14's sample-profile pass, reading our text and our ext-binary, and
// clang-14 -fprofile-sample-use attach the entry count and branch weights our counts say.
// LLVM 14 adds one to each: entry count = head samples + 1, branch weight = count + 1.
func TestLLVMConsumesProfile(t *testing.T) {
	testenv.Requires(t, testenv.Tool("clang-14"), testenv.Tool("opt-14"))
	dir := t.TempDir()
	src := filepath.Join(dir, "work.c")
	if err := os.WriteFile(src, []byte(consumeWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	// clang marks functions "use-sample-profile" only when given a profile; any valid one
	// will do for the unoptimised IR that opt then reads.
	placeholder := filepath.Join(dir, "placeholder.txt")
	if err := os.WriteFile(placeholder, []byte("work:1:0\n 0: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ir := filepath.Join(dir, "work.ll")
	run(t, "clang-14", "-O2", "-g", "-fdebug-info-for-profiling", "-fprofile-sample-use="+placeholder,
		"-Xclang", "-disable-llvm-passes", "-S", "-emit-llvm", src, "-o", ir)
	irText, err := os.ReadFile(ir)
	if err != nil {
		t.Fatal(err)
	}

	// The function's first line and the lines of its code, from the IR's debug info.
	sp := regexp.MustCompile(`!DISubprogram\(name: "work",[^\n]*? line: (\d+)`).FindSubmatch(irText)
	if sp == nil {
		t.Fatalf("no DISubprogram for work in the IR")
	}
	firstLine, _ := strconv.ParseUint(string(sp[1]), 10, 32)
	irLines := map[uint32]bool{}
	for _, m := range regexp.MustCompile(`!DILocation\(line: (\d+)`).FindAllSubmatch(irText, -1) {
		n, _ := strconv.ParseUint(string(m[1]), 10, 32)
		irLines[uint32(n)] = true
	}
	ifLine, thenLine, elseLine := sourceLine(t, "if (i % 3"), sourceLine(t, "s += i"), sourceLine(t, "s -= 1")
	forLine := sourceLine(t, "for (")
	for _, l := range []uint32{ifLine, thenLine, elseLine, forLine} {
		if !irLines[l] {
			t.Fatalf("IR has no DILocation on line %d", l)
		}
	}

	// A synthetic code object: each IR line is a 16-byte block of its own, in line order.
	const entryCount, thenCount, elseCount = 7, 100, 200
	counts := map[uint32]uint64{forLine: thenCount + elseCount + entryCount, ifLine: thenCount + elseCount,
		thenLine: thenCount, elseLine: elseCount}
	lines := make([]uint32, 0, len(irLines))
	for l := range irLines {
		lines = append(lines, l)
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i] < lines[j] })
	obj := &codeobj.Object{Name: "work", Addr: 0x7f0000400000, Size: uint64(16 * len(lines))}
	var blocks []BlockCount
	for i, l := range lines {
		obj.Lines = append(obj.Lines, codeobj.LineEntry{Addr: obj.Addr + uint64(16*i), File: "work.c", Line: l})
		n, ok := counts[l]
		if !ok {
			n = entryCount
		}
		blocks = append(blocks, BlockCount{Start: uint64(16 * i), End: uint64(16*i + 16), Count: n})
	}
	pr := Project(FunctionCounts{Object: obj, Blocks: blocks, Entry: 0, FirstLine: uint32(firstLine)})
	if pr.DroppedLines != 0 || pr.Profile.HeadSamples != entryCount {
		t.Fatalf("projection: %+v dropped %d", pr.Profile, pr.DroppedLines)
	}
	prof := sampleprof.NewProfile()
	prof.Add(pr.Profile)

	textPath, binPath := filepath.Join(dir, "work.prof.txt"), filepath.Join(dir, "work.prof.extbin")
	if err := os.WriteFile(textPath, encoded(t, profileio.WriteText, prof), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(binPath, encoded(t, profileio.WriteExtBinary, prof), 0o644); err != nil {
		t.Fatal(err)
	}

	wantEntry := fmt.Sprintf(`!{!"function_entry_count", i64 %d}`, entryCount+1)
	wantIf := fmt.Sprintf(`!{!"branch_weights", i32 %d, i32 %d}`, thenCount+1, elseCount+1)
	for _, profPath := range []string{textPath, binPath} {
		out := run(t, "opt-14", "-passes=sample-profile", "-sample-profile-file="+profPath, "-S", ir)
		if !bytes.Contains(out, []byte(wantEntry)) {
			t.Errorf("%s: opt-14 output has no %s", filepath.Base(profPath), wantEntry)
		}
		// The branch whose !dbg location is on the if's line, and its !prof weights.
		md := map[string]string{}
		ifLocs := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^(!\d+) = (.*)$`).FindAllSubmatch(out, -1) {
			md[string(m[1])] = string(m[2])
			if strings.HasPrefix(string(m[2]), fmt.Sprintf("!DILocation(line: %d,", ifLine)) {
				ifLocs[string(m[1])] = true
			}
		}
		found := false
		for _, m := range regexp.MustCompile(`br i1 [^\n]*!dbg (!\d+), !prof (!\d+)`).FindAllSubmatch(out, -1) {
			if ifLocs[string(m[1])] {
				found = true
				if got := md[string(m[2])]; got != wantIf {
					t.Errorf("%s: the if's branch weights %s, want %s", filepath.Base(profPath), got, wantIf)
				}
			}
		}
		if !found {
			t.Errorf("%s: opt-14 put no branch weights on the if's branch:\n%s", filepath.Base(profPath), out)
		}
	}

	// clang-14 -fprofile-sample-use, the full -O2 pipeline, takes the same entry count.
	for _, profPath := range []string{textPath, binPath} {
		out := run(t, "clang-14", "-O2", "-g", "-fdebug-info-for-profiling", "-fprofile-sample-use="+profPath,
			"-S", "-emit-llvm", src, "-o", "-")
		if !bytes.Contains(out, []byte(wantEntry)) || !bytes.Contains(out, []byte(`!"branch_weights"`)) {
			t.Errorf("%s: clang-14 -fprofile-sample-use output lacks %s or branch weights", filepath.Base(profPath), wantEntry)
		}
	}
}

// encoded is prof as write encodes it.
func encoded(t *testing.T, write func(io.Writer, *sampleprof.Profile) error, prof *sampleprof.Profile) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b, prof); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
