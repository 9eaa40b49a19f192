package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/cfgjson"
	"github.com/profd/profd/sampleprof"
)

// writeExampleCapture turns the bundled example (real llc-14 code with perf samples) into a
// capture, with a line table that gives every block its own source line, 10 + block index.
func writeExampleCapture(t testing.TB, path string) (cfgjson.Function, *cfg.Graph) {
	t.Helper()
	return writeExampleCaptureLines(t, path, func(b int) uint32 { return uint32(10 + b) })
}

// writeExampleCaptureLines is writeExampleCapture with block b's code on source line line(b).
func writeExampleCaptureLines(t testing.TB, path string, line func(b int) uint32) (cfgjson.Function, *cfg.Graph) {
	t.Helper()
	return writeExampleCaptureOf(t, path, profileio.CaptureMeta{Event: "cpu-clock", FrequencyHz: 999, Host: "test", StartTime: time.Unix(1700000000, 0)}, 0, line)
}

// writeExampleCaptureOf is writeExampleCaptureLines with the capture's meta, and the code
// moved by shift bytes.
func writeExampleCaptureOf(t testing.TB, path string, meta profileio.CaptureMeta, shift uint64, line func(b int) uint32) (cfgjson.Function, *cfg.Graph) {
	t.Helper()
	f, err := os.Open("../../examples/reestimate/score.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	funcs, err := cfgjson.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	fn := funcs[0]
	if shift != 0 {
		moved := make(map[uint64]uint64, len(fn.Samples))
		for addr, n := range fn.Samples {
			moved[addr+shift] = n
		}
		fn.Addr, fn.Samples = fn.Addr+shift, moved
	}
	g, err := cfg.Build(fn.Code, fn.Addr)
	if err != nil {
		t.Fatal(err)
	}
	obj := codeobj.Object{Name: fn.Name, Addr: fn.Addr, Size: uint64(len(fn.Code)), Code: fn.Code, LoadNs: 1}
	for i, b := range g.Blocks {
		obj.Lines = append(obj.Lines, codeobj.LineEntry{Addr: b.Start, File: "score.c", Line: line(i)})
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cw, err := profileio.NewCaptureWriter(out, meta)
	if err != nil {
		t.Fatal(err)
	}
	id, err := cw.AddCodeObject(1234, &obj)
	if err != nil {
		t.Fatal(err)
	}
	var recs []profileio.SampleRecord
	for addr, n := range fn.Samples {
		recs = append(recs, profileio.SampleRecord{Object: id, Offset: addr - fn.Addr, Count: n})
	}
	if err := cw.AddSamples(recs); err != nil {
		t.Fatal(err)
	}
	if err := cw.Close(profileio.CaptureEnd{EndNs: 2}); err != nil {
		t.Fatal(err)
	}
	return fn, g
}

// runToProfile validates and runs conf and reads its LLVM text output back.
func runToProfile(t *testing.T, conf *Config) *sampleprof.Profile {
	t.Helper()
	if err := conf.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), conf); err != nil {
		t.Fatal(err)
	}
	pf, err := os.Open(conf.Output)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	prof, err := profileio.ReadText(pf)
	if err != nil {
		t.Fatalf("our LLVM text does not read back: %v", err)
	}
	return prof
}

// runToCounts runs `reestimate CAPTURE --format json -o output` and reads its output back.
func runToCounts(t *testing.T, capture, output string) countsFile {
	t.Helper()
	conf := &Config{Inputs: []string{capture}, Output: output, Solver: "fast", Format: formatJSON}
	if err := conf.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), conf); err != nil {
		t.Fatalf("--format json: %v", err)
	}
	raw, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	var out countsFile
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRunCaptureLLVM runs `reestimate run.profd -o prof.txt` and checks the LLVM profile
// against the repair done directly: each block's line carries the block's repaired count.
func TestRunCaptureLLVM(t *testing.T) {
	dir := t.TempDir()
	capPath, outPath := filepath.Join(dir, "run.profd"), filepath.Join(dir, "prof.txt")
	fn, g := writeExampleCapture(t, capPath)

	conf, err := parseFlags([]string{capPath, "-o", outPath}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	prof := runToProfile(t, conf)
	got := prof.Functions[fn.Name]
	if got == nil {
		t.Fatalf("no profile for %s in %v", fn.Name, prof.Functions)
	}

	w, err := cfg.PooledBlockWeights(g, fn.Samples)
	if err != nil {
		t.Fatal(err)
	}
	res, err := reestimate.Repair(g, w, reestimate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var nonzero int
	for b := range g.Blocks {
		want := uint64(math.Round(res.BlockCount(b) * profgen.DefaultCountScale))
		loc := sampleprof.LineLocation{LineOffset: uint32(b)}
		if n := got.Body[loc]; n != want {
			t.Errorf("block %d (line offset %d): count %d, want the repaired %d", b, b, n, want)
		}
		if want > 0 {
			nonzero++
		}
	}
	if nonzero == 0 {
		t.Fatal("every repaired block count is zero: the example exercises nothing")
	}
	if want := uint64(math.Round(res.BlockCount(g.Entry) * profgen.DefaultCountScale)); want == 0 || got.HeadSamples != want {
		t.Errorf("head samples %d, want the entry block's %d", got.HeadSamples, want)
	}
}

// TestRunCaptureRaw checks that --raw keeps the samples as they fell: the line totals add up
// to the capture's samples.
func TestRunCaptureRaw(t *testing.T) {
	dir := t.TempDir()
	capPath, outPath := filepath.Join(dir, "run.profd"), filepath.Join(dir, "raw.txt")
	fn, _ := writeExampleCapture(t, capPath)
	conf := &Config{Inputs: []string{capPath}, Output: outPath, Solver: "fast", Raw: true}
	prof := runToProfile(t, conf)
	var want uint64
	for _, n := range fn.Samples {
		want += n
	}
	if got := prof.Functions[fn.Name].TotalSamples; got != want {
		t.Errorf("raw total %d, want the capture's %d samples", got, want)
	}
}

// TestRunJSONRefusesLLVMFormat: the LLVM formats need line tables, which JSON input lacks.
func TestRunJSONRefusesLLVMFormat(t *testing.T) {
	conf := &Config{Inputs: []string{"../../examples/reestimate/score.json"}, Output: filepath.Join(t.TempDir(), "x"), Solver: "fast", Format: formatLLVMText}
	if err := Run(context.Background(), conf); err == nil {
		t.Fatal("llvm-text from JSON input: no error")
	}
}

// TestRunCaptureDamaged: a capture with a damaged section is an error, not an empty profile
// with a warning; --salvage uses the sections before the damage.
func TestRunCaptureDamaged(t *testing.T) {
	dir := t.TempDir()
	capPath := filepath.Join(dir, "run.profd")
	writeExampleCapture(t, capPath)
	b, err := os.ReadFile(capPath)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-3] ^= 0x40 // in the end section: every sample comes before the damage
	if err := os.WriteFile(capPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := &Config{Inputs: []string{capPath}, Output: filepath.Join(dir, "prof.txt"), Solver: "fast"}
	if err := Run(context.Background(), conf); err == nil || !strings.Contains(err.Error(), "--salvage") {
		t.Fatalf("a damaged capture: %v, want an error pointing at --salvage", err)
	}
	if code := exitCode(Run(context.Background(), conf)); code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	conf.Salvage = true
	if prof := runToProfile(t, conf); len(prof.Functions) == 0 {
		t.Errorf("--salvage: no function in the profile of the sections before the damage")
	}
	// Damage before any sample leaves --salvage nothing to profile: an error, no empty profile.
	b[len(b)-3] ^= 0x40
	b[40] ^= 0x40
	if err := os.WriteFile(capPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	conf.Output = filepath.Join(dir, "prof2.txt")
	if err := Run(context.Background(), conf); err == nil || !strings.Contains(err.Error(), "no LLVM profile written") {
		t.Errorf("--salvage with nothing sampled before the damage: %v, want no LLVM profile", err)
	}
}

// TestRunCaptureDot: --dot with a capture writes a Graphviz file per sampled code object
// besides the LLVM profile.
func TestRunCaptureDot(t *testing.T) {
	dir := t.TempDir()
	capPath, dotDir := filepath.Join(dir, "run.profd"), filepath.Join(dir, "dot")
	fn, _ := writeExampleCapture(t, capPath)
	conf := &Config{Inputs: []string{capPath}, Output: filepath.Join(dir, "prof.txt"), Solver: "fast", DotDir: dotDir}
	runToProfile(t, conf)
	dots, _ := filepath.Glob(filepath.Join(dotDir, "*.dot"))
	if len(dots) != 1 {
		t.Fatalf("Graphviz files %v, want one", dots)
	}
	b, _ := os.ReadFile(dots[0])
	if !strings.Contains(string(b), "digraph") || !strings.Contains(string(b), fn.Name) {
		t.Errorf("%s is not a graph of %s:\n%s", dots[0], fn.Name, b)
	}
}

// TestRunCaptureJSONAgreesWithLLVM runs the command on one capture twice, --format json and
// --format llvm-text: the JSON's block counts, projected onto the code object's lines as
// profgen projects them, are the LLVM profile's body counts. Blocks share lines two by two,
// so the projection's maximum over a line's blocks is exercised too.
func TestRunCaptureJSONAgreesWithLLVM(t *testing.T) {
	dir := t.TempDir()
	capPath := filepath.Join(dir, "run.profd")
	fn, _ := writeExampleCaptureLines(t, capPath, func(b int) uint32 { return uint32(10 + b/2) })
	out := runToCounts(t, capPath, filepath.Join(dir, "counts.json"))
	prof := runToProfile(t, &Config{Inputs: []string{capPath}, Output: filepath.Join(dir, "prof.txt"), Solver: "fast", Format: formatLLVMText})
	want := prof.Functions[fn.Name]
	if want == nil || len(want.Body) == 0 {
		t.Fatalf("no body counts for %s in the LLVM profile", fn.Name)
	}
	if len(out.Functions) != 1 || out.Functions[0].Name != fn.Name {
		t.Fatalf("JSON functions %+v, want %s alone", out.Functions, fn.Name)
	}
	c := readCaptureFile(t, capPath)
	obj := &c.Objects[0].Object
	fc := profgen.FunctionCounts{Object: obj}
	for _, b := range out.Functions[0].Blocks {
		start, end := parseHex(t, b.Start), parseHex(t, b.End)
		fc.Blocks = append(fc.Blocks, profgen.BlockCount{Start: start - obj.Addr, End: end - obj.Addr,
			Count: uint64(math.Round(b.Count * profgen.DefaultCountScale))})
	}
	got := profgen.Project(fc).Profile
	if !reflect.DeepEqual(got.Body, want.Body) {
		t.Errorf("the JSON's block counts projected onto lines:\n%v\nthe LLVM profile's body:\n%v", got.Body, want.Body)
	}
}

// TestRunCaptureLeavesOutUnrepairable: a capture one of whose functions has code the repair
// cannot take (undecodable here; too large alike) gives, with --format json and with --dot,
// the other functions' counts and graphs, and an LLVM profile with that function's raw
// samples; JSON input with such a function is an error.
func TestRunCaptureLeavesOutUnrepairable(t *testing.T) {
	dir := t.TempDir()
	capPath := filepath.Join(dir, "run.profd")
	fn, g := writeExampleCapture(t, capPath)
	c := readCaptureFile(t, capPath)
	bad := c.Objects[0].Object
	bad.Name, bad.Addr, bad.Code = "undecodable", bad.Addr+1<<20, bytes.Repeat([]byte{0x06}, len(bad.Code)) // push es: invalid in 64-bit mode
	for i := range bad.Lines {
		bad.Lines[i].Addr += 1 << 20
	}
	f, err := os.Create(capPath)
	if err != nil {
		t.Fatal(err)
	}
	cw, err := profileio.NewCaptureWriter(f, c.Meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []*codeobj.Object{&c.Objects[0].Object, &bad} {
		id, err := cw.AddCodeObject(1234, obj)
		if err != nil {
			t.Fatal(err)
		}
		var recs []profileio.SampleRecord
		for _, s := range c.Objects[0].Samples {
			recs = append(recs, profileio.SampleRecord{Object: id, Offset: s.Offset, Count: s.Count})
		}
		if err := cw.AddSamples(recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.Close(profileio.CaptureEnd{EndNs: 2}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	out := runToCounts(t, capPath, filepath.Join(dir, "counts.json"))
	if len(out.Functions) != 1 || out.Functions[0].Name != fn.Name || len(out.Functions[0].Blocks) != len(g.Blocks) {
		t.Errorf("JSON functions %+v, want %s alone, with its %d blocks", out.Functions, fn.Name, len(g.Blocks))
	}

	dotDir := filepath.Join(dir, "dot")
	prof := runToProfile(t, &Config{Inputs: []string{capPath}, Output: filepath.Join(dir, "prof.txt"), Solver: "fast", DotDir: dotDir})
	if dots, _ := filepath.Glob(filepath.Join(dotDir, "*.dot")); len(dots) != 1 {
		t.Errorf("Graphviz files %v, want one", dots)
	}
	var samples uint64
	for _, n := range fn.Samples {
		samples += n
	}
	if f := prof.Functions["undecodable"]; f == nil || f.TotalSamples != samples {
		t.Errorf("undecodable: %+v, want its raw %d samples", f, samples)
	}
	if prof.Functions[fn.Name] == nil {
		t.Errorf("no profile of %s", fn.Name)
	}

	// The same functions as JSON input: the user's own, so an error names the function.
	funcs := captureFunctions(readCaptureFile(t, capPath))
	if _, err := repairAll(context.Background(), "", funcs, false, reestimate.Options{}); err == nil || !strings.Contains(err.Error(), `"undecodable"`) {
		t.Errorf("JSON input: %v, want an error naming the function", err)
	}
}

func parseHex(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRunCaptureCutOrJoined: a capture cut after its header is an error, and with --salvage
// gives no profile and an error (an empty LLVM profile is one llvm-profdata refuses and a
// compiler would read as "nothing ran"); a capture joined to itself with cat is refused as
// the same capture twice, and bytes after a capture that are not one are an error.
func TestRunCaptureCutOrJoined(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "run.profd")
	writeExampleCapture(t, whole)
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		bytes   []byte
		salvage bool
		want    string
	}{
		{"header only", b[:16], false, "without its end section (its writer was killed, or is still writing): --salvage"},
		{"header only salvaged", b[:16], true, "no JIT code drew a sample in the part of the capture that was written"},
		{"two captures", append(append([]byte(nil), b...), b...), false, "(capture 2, at byte " + strconv.Itoa(len(b)) + "): the same capture twice"},
		{"trailing bytes", append(append([]byte(nil), b...), "junk"...), false, "bytes that are not a capture follow the end of its capture 1, at byte " + strconv.Itoa(len(b))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, out := filepath.Join(dir, tc.name+".profd"), filepath.Join(dir, tc.name+".txt")
			if err := os.WriteFile(in, tc.bytes, 0o644); err != nil {
				t.Fatal(err)
			}
			conf := &Config{Inputs: []string{in}, Output: out, Solver: "ssp", Salvage: tc.salvage}
			if err := conf.Validate(); err != nil {
				t.Fatal(err)
			}
			err := Run(context.Background(), conf)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
			if exitCode(err) != exitFailure {
				t.Errorf("exit %d, want %d", exitCode(err), exitFailure)
			}
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Errorf("an output was written (%v)", serr)
			}
		})
	}
}

// readCaptureFile reads the capture at path.
func readCaptureFile(t *testing.T, path string) *profileio.Capture {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := profileio.ReadCapture(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// TestRunRefusesProfdOutputs: the files reestimate and profd write beside a capture (the
// LLVM profiles, the pprof profile), given as input, are refused with a message that says
// what they are and which file to give instead, alone and among captures.
func TestRunRefusesProfdOutputs(t *testing.T) {
	dir := t.TempDir()
	capture := filepath.Join(dir, "run.profd")
	writeExampleCapture(t, capture)
	text, ext, pprof := filepath.Join(dir, "run.prof.txt"), filepath.Join(dir, "run.prof.extbinary"), filepath.Join(dir, "run.pb.gz")
	runToProfile(t, &Config{Inputs: []string{capture}, Output: text, Solver: "ssp", Pprof: pprof})
	if err := Run(context.Background(), &Config{Inputs: []string{capture}, Output: ext, Solver: "ssp", Format: formatLLVMExtBinary}); err != nil {
		t.Fatal(err)
	}
	empty, commented := filepath.Join(dir, "empty.profd"), filepath.Join(dir, "commented.prof.txt")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	long := "# profd: no line table, total and head samples only: " + strings.Repeat("x", 200) + "\n"
	if err := os.WriteFile(commented, []byte(long+long+strings.Repeat("x", 200)+":12:3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const instead = "give reestimate the capture (.profd) profd wrote beside it"
	for _, tc := range []struct {
		path string
		want []string
	}{
		{text, []string{"an LLVM sample profile (text)", instead}},
		{commented, []string{"an LLVM sample profile (text)", instead}},
		{ext, []string{"an LLVM sample profile (ext-binary)", instead}},
		{pprof, []string{"pprof profiles (.pb.gz)", instead}},
		{empty, []string{"it is empty"}},
	} {
		for _, inputs := range [][]string{{tc.path}, {capture, tc.path}} {
			err := Run(context.Background(), &Config{Inputs: inputs, Output: filepath.Join(dir, "out.txt"), Solver: "ssp"})
			want := append([]string{tc.path, "not a profd capture"}, tc.want...)
			if len(inputs) > 1 {
				want = append(want, "merging reads captures only")
			}
			for _, w := range want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("%v: error %v, want one saying %q", inputs, err, w)
				}
			}
		}
	}
}
