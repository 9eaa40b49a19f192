package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfgjson"
)

// runCapture reestimates a profd capture: into an LLVM sample profile (llvm-text,
// llvm-extbinary), or into block and edge counts per sampled code object (json, text).
func runCapture(ctx context.Context, cfg *Config, r *bufio.Reader, opt reestimate.Options) error {
	cr := &countingReader{r: r}
	c, err := profileio.ReadCapture(cr)
	if err == nil && c.End != nil {
		if next, perr := r.Peek(profileio.CaptureMagicBytes); len(next) > 0 {
			what := "bytes that are not part of it"
			if perr == nil && profileio.IsCapture(next) {
				what = "a second capture (captures joined with cat?)"
			}
			return fmt.Errorf("%s: %s follow the capture's end at byte %d: reestimate reads one capture; give each its own run", cfg.Input, what, cr.n)
		}
	}
	switch {
	case err != nil && c == nil:
		return fmt.Errorf("%s: %w", cfg.Input, err)
	case err != nil && !cfg.Salvage:
		return fmt.Errorf("%s: %w (--salvage uses the sections before the damage)", cfg.Input, err)
	case err != nil:
		fmt.Fprintf(os.Stderr, "reestimate: %s: %v; using the sections before it (--salvage)\n", cfg.Input, err)
	}
	if c.Truncated {
		fmt.Fprintf(os.Stderr, "reestimate: %s: the capture ends inside the section at byte %d (its writer was killed?); using the sections before it\n", cfg.Input, c.TruncatedAt)
	}
	if len(cfg.Symbols) > 0 {
		named, left, err := nameUnnamed(c, cfg.Symbols)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "reestimate: --symbols named %d of the capture's unnamed samples; %d stay unnamed\n", named, left)
	} else if n := c.UnnamedSamples(); n > 0 {
		fmt.Fprintf(os.Stderr, "reestimate: %d samples of the capture fell in JIT code no symbol named; --symbols FILE (a jitdump or perf map) can name them\n", n)
	}
	switch cfg.Format {
	case formatJSON, formatText:
		return repairFunctions(ctx, cfg, captureFunctions(c), opt)
	}
	if cfg.DotDir != "" {
		// The LLVM profile is made per source line; the graphs are of each sampled code
		// object, repaired as the profile's counts are (reestimate.RepairCode).
		funcs := captureFunctions(c)
		if _, err := repairAll(ctx, cfg.DotDir, funcs, opt); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "reestimate: %d Graphviz files in %s\n", len(funcs), cfg.DotDir)
	}
	lopt := profgen.Options{Raw: cfg.Raw, Repair: opt}
	if cfg.IR != "" {
		f, err := os.Open(cfg.IR)
		if err != nil {
			return err
		}
		lopt.Subprograms, err = profgen.Subprograms(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.IR, err)
		}
	}
	prof, st := profgen.FromCapture(c, lopt)
	if st.Objects == 0 {
		// An empty LLVM profile is no profile: llvm-profdata refuses it, and a compiler would
		// read it as "nothing ran".
		why := "no JIT code drew a sample"
		if c.Truncated || c.End == nil {
			why += " in the part of the capture that was written (its writer stopped early)"
		}
		return fmt.Errorf("%s: %s: no LLVM profile written", cfg.Input, why)
	}
	fmt.Fprintf(os.Stderr, "reestimate: %d sampled code objects: %d reestimated, %d without code bytes, %d whose code could not be analysed, %d without a line table\n",
		st.Objects, st.Reestimated, st.RawNoCode, st.RawCFGError, st.NoLineTable)
	if st.FirstError != nil {
		fmt.Fprintf(os.Stderr, "reestimate: first analysis error: %v\n", st.FirstError)
	}
	return writeTo(cfg.Output, func(w io.Writer) error {
		if cfg.Format == formatLLVMExtBinary {
			return profileio.WriteExtBinary(w, prof)
		}
		return profileio.WriteText(w, prof)
	})
}

// captureFunctions lists the capture's sampled code objects that have code bytes, as
// reestimate functions.
func captureFunctions(c *profileio.Capture) []cfgjson.Function {
	var funcs []cfgjson.Function
	for _, o := range c.Objects {
		if len(o.Samples) == 0 || len(o.Object.Code) == 0 {
			continue
		}
		f := cfgjson.Function{Name: o.Object.Name, Addr: o.Object.Addr, Code: o.Object.Code,
			Samples: make(map[uint64]uint64, len(o.Samples))}
		for _, s := range o.Samples {
			f.Samples[o.Object.Addr+s.Offset] += s.Count
		}
		funcs = append(funcs, f)
	}
	return funcs
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
