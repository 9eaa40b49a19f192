package profileio

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/sampleprof"
)

// manyFunctionsProfile has enough functions for several chunks (so both writers encode on
// several goroutines), call targets that are not functions of the profile, inlined callees,
// and bodies whose lines are sorted by the counting sort (dense offsets, some sharing an
// offset) and by the comparison sort (sparse offsets).
func manyFunctionsProfile() *sampleprof.Profile {
	p := sampleprof.NewProfile()
	for i := 0; i < 5*chunkFunctions+7; i++ {
		f := &sampleprof.FunctionProfile{Name: fmt.Sprintf("jit_fn_%03d", i), HeadSamples: uint64(i % 5)}
		lines := 1 + i%40
		for l := 0; l < lines; l++ {
			loc := sampleprof.LineLocation{LineOffset: uint32(l), Discriminator: uint32(l % 4 / 3 * (1 + i%3))}
			if i%3 == 0 {
				loc.LineOffset = uint32(l * l * 37 % 65000) // sparse
			}
			n := uint64((i*7 + l*13) % 50)
			f.AddBody(loc, n)
			f.TotalSamples += n
			if l%7 == 1 {
				f.AddCall(loc, fmt.Sprintf("external_%d", (i+l)%23), uint64(l))
				f.AddCall(loc, fmt.Sprintf("jit_fn_%03d", (i*3+l)%100), uint64(i%4))
			}
		}
		if i%11 == 0 {
			c := f.InlinedAt(sampleprof.LineLocation{LineOffset: 3}, fmt.Sprintf("inlined_%d", i%5))
			c.AddBody(sampleprof.LineLocation{LineOffset: 1}, 9)
			c.TotalSamples = 9
			f.TotalSamples += 9
		}
		p.Add(f)
	}
	return p
}

// TestWritersChunkedAgreeWithLLVM: with several chunks on several goroutines, the output
// does not depend on GOMAXPROCS, and llvm-profdata-14 converts our text into our ext-binary
// byte for byte and back.
func TestWritersChunkedAgreeWithLLVM(t *testing.T) {
	testenv.Requires(t, testenv.Tool("llvm-profdata-14"))
	text, bin := textOf(t, manyFunctionsProfile()), extBinaryOf(t, manyFunctionsProfile())
	prev := runtime.GOMAXPROCS(1)
	serialText, serialBin := textOf(t, manyFunctionsProfile()), extBinaryOf(t, manyFunctionsProfile())
	runtime.GOMAXPROCS(4)
	text4, bin4 := textOf(t, manyFunctionsProfile()), extBinaryOf(t, manyFunctionsProfile())
	runtime.GOMAXPROCS(prev)
	if !bytes.Equal(text, serialText) || !bytes.Equal(text, text4) {
		t.Errorf("text differs between GOMAXPROCS 1, 4 and %d", prev)
	}
	if !bytes.Equal(bin, serialBin) || !bytes.Equal(bin, bin4) {
		t.Errorf("ext-binary differs between GOMAXPROCS 1, 4 and %d", prev)
	}

	dir := t.TempDir()
	txtPath, binPath := filepath.Join(dir, "p.txt"), filepath.Join(dir, "p.extbin")
	if err := os.WriteFile(txtPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(binPath, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	profdata(t, "merge", "--sample", "--extbinary", txtPath, "-o", filepath.Join(dir, "llvm.extbin"))
	if got, err := os.ReadFile(filepath.Join(dir, "llvm.extbin")); err != nil || !bytes.Equal(got, bin) {
		t.Errorf("merge --extbinary of our text differs from our ext-binary (%v)", err)
	}
	if got := profdata(t, "merge", "--sample", "--text", binPath, "-o", "-"); !bytes.Equal(got, text) {
		t.Errorf("merge --text of our ext-binary differs from our text")
	}
}

// TestWritersReportFirstBadFunction: with bad functions in several chunks, both writers
// return the error of the first one in writing order, whatever the schedule.
func TestWritersReportFirstBadFunction(t *testing.T) {
	for run := 0; run < 5; run++ {
		p := manyFunctionsProfile()
		for _, i := range []int{300, 70, 200} { // jit_fn_070 is written first of the three
			f := p.Functions[fmt.Sprintf("jit_fn_%03d", i)]
			f.AddBody(sampleprof.LineLocation{LineOffset: sampleprof.MaxLineOffset + 1}, 1)
			f.AddCall(sampleprof.LineLocation{LineOffset: 2}, "bad\x00name", 1)
		}
		var bad []string
		for _, f := range p.SortedFunctions() {
			if _, ok := f.Body[sampleprof.LineLocation{LineOffset: sampleprof.MaxLineOffset + 1}]; ok {
				bad = append(bad, f.Name)
			}
		}
		err := WriteText(&bytes.Buffer{}, p)
		if !errors.Is(err, ErrName) || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad[0])) {
			t.Fatalf("WriteText: %v, want ErrName naming %s", err, bad[0])
		}
		_, err = AppendExtBinary(nil, p)
		if !errors.Is(err, ErrName) || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad[0])) {
			t.Fatalf("AppendExtBinary: %v, want ErrName naming %s", err, bad[0])
		}
	}
}
