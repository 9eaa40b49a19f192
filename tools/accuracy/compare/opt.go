package compare

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// attributeGroupRE finds IR attribute groups, to which RunProfi adds "use-sample-profile"
// (clang adds it under -fprofile-sample-use; opt's sample loader skips functions without
// it).
var attributeGroupRE = regexp.MustCompile(`(?m)^(attributes #\d+ = \{ )`)

// RunProfi runs LLVM's sample loader with profi on ir (IR text) and a sample profile
// (LLVM text format):
//
//	opt-14 -passes='sample-profile,print<block-freq>' -sample-profile-use-profi \
//	    -sample-profile-file=PROFILE -S -o OUT.ll IN.ll
//
// in dir, and returns the annotated IR's functions and the block frequencies opt printed,
// in the same block order.
func RunProfi(ctx context.Context, dir string, ir, profile []byte) (map[string]*IRFunction, map[string][]float64, error) {
	in, prof, out := filepath.Join(dir, "profi.in.ll"), filepath.Join(dir, "profi.prof.txt"), filepath.Join(dir, "profi.out.ll")
	if err := os.WriteFile(in, attributeGroupRE.ReplaceAll(ir, []byte(`$1"use-sample-profile" `)), 0o644); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(prof, profile, 0o644); err != nil {
		return nil, nil, err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "opt-14", "-passes=sample-profile,print<block-freq>",
		"-sample-profile-use-profi", "-sample-profile-file="+prof, "-S", "-o", out, in)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, nil, fmt.Errorf("compare: opt-14: %w: %s", err, stderr.Bytes())
	}
	freqs, err := ParseBlockFrequencies(&stderr)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.Open(out)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	funcs, err := ParseIR(f)
	if err != nil {
		return nil, nil, err
	}
	for name, fn := range funcs {
		if n := len(freqs[name]); n != 0 && n != len(fn.Blocks) {
			return nil, nil, fmt.Errorf("compare: opt-14 printed %d block frequencies for %s, which has %d blocks", n, name, len(fn.Blocks))
		}
	}
	return funcs, freqs, nil
}
