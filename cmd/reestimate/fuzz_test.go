package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/profd/profd/profileio"
)

// FuzzRunCapture runs what reestimate does with a capture (read, name, repair, fit, write
// each format and the pprof profile) on bytes a capture's reader takes: a capture comes from
// another host as often as from this one, and none of it may crash reestimate. An LLVM
// text profile it writes must read back.
func FuzzRunCapture(f *testing.F) {
	dir := f.TempDir()
	example := filepath.Join(dir, "example.profd")
	writeExampleCapture(f, example)
	for _, path := range []string{example, "../../profileio/testdata/capture.profd.golden", "../../profileio/testdata/capture-before-native.profd"} {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		dir := t.TempDir()
		input := filepath.Join(dir, "in.profd")
		if err := os.WriteFile(input, in, 0o600); err != nil {
			t.Fatal(err)
		}
		text := filepath.Join(dir, "out.prof.txt")
		for _, conf := range []*Config{
			{Inputs: []string{input}, Output: text, Solver: "ssp", Salvage: true, Pprof: filepath.Join(dir, "out.pb.gz")},
			{Inputs: []string{input}, Output: filepath.Join(dir, "out.extbinary"), Solver: "fast", Salvage: true, Format: formatLLVMExtBinary},
			{Inputs: []string{input}, Output: filepath.Join(dir, "out.json"), Solver: "ssp", Format: formatJSON},
			{Inputs: []string{input}, Output: filepath.Join(dir, "raw.txt"), Solver: "ssp", Salvage: true, Raw: true},
		} {
			if err := conf.Validate(); err != nil {
				t.Fatal(err)
			}
			err := Run(context.Background(), conf)
			if err != nil || conf.Output != text {
				continue
			}
			pf, err := os.Open(text)
			if err != nil {
				t.Fatal(err)
			}
			_, err = profileio.ReadText(pf)
			pf.Close()
			if err != nil {
				t.Fatalf("the LLVM text profile written does not read back: %v", err)
			}
		}
	})
}
