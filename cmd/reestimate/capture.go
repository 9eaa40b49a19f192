package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/profd/profd/capmerge"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/cfgjson"
)

// runCaptures merges the captures of sources (first already open) into one and
// reestimates it: into an LLVM sample profile (llvm-text, llvm-extbinary), or into block and
// edge counts per sampled code object (json, text); with cfg.Pprof, a pprof profile of every
// capture besides. Nothing is written unless every source was read.
func runCaptures(ctx context.Context, cfg *Config, sources []*source, first *source, opt reestimate.Options) error {
	m := capmerge.New(capmerge.Options{ForceMix: cfg.ForceMix})
	var pp *pprofMerger
	if cfg.Pprof != "" {
		pp = &pprofMerger{}
	}
	var cut int
	var named, left uint64
	warn := &warnings{w: os.Stderr, max: maxInputWarnings}
	buf := first.r // one read buffer for every source, each read to its end before the next
	for i, s := range sources {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reestimate: stopped before %s: %w", s.name(), err)
		}
		if i > 0 {
			if _, err := s.open(buf); err != nil {
				return err
			}
		}
		n, err := readCaptures(s, cfg.Salvage, warn, func(c *profileio.Capture, name string) error {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("reestimate: stopped at %s: %w", name, err)
			}
			if len(cfg.Symbols) > 0 {
				nn, nl, err := nameUnnamed(c, cfg.Symbols, len(sources) > 1)
				if err != nil {
					return err
				}
				named, left = named+nn, left+nl
			}
			if pp != nil {
				if err := pp.add(c, name); err != nil {
					return fmt.Errorf("%s: --pprof: %w", name, err)
				}
			}
			return m.Add(c, name, s.weight)
		})
		s.close()
		if err != nil {
			return err
		}
		cut += n
	}
	warn.summary(fmt.Sprintf("%d captures in all were damaged or cut short, each used up to there (--salvage)", cut))
	c, sum := m.Result()
	reportMerge(sum)
	if len(cfg.Symbols) > 0 {
		fmt.Fprintf(os.Stderr, "reestimate: --symbols named %d of the capture's unnamed samples; %d stay unnamed\n", named, left)
	} else if sum.UnnamedSamples > 0 {
		fmt.Fprintf(os.Stderr, "reestimate: %d samples of the capture fell in JIT code no symbol named; --symbols FILE (a jitdump or perf map) can name them\n", sum.UnnamedSamples)
	}
	inputName := first.name()
	if sum.Captures > 1 {
		inputName = fmt.Sprintf("%d merged captures", sum.Captures)
	}
	if err := repairCapture(ctx, cfg, c, inputName, cut > 0, opt); err != nil {
		return err
	}
	if pp != nil {
		return writeTo(cfg.Pprof, pp.write)
	}
	return nil
}

// repairCapture reestimates the (merged) capture c and writes the output.
func repairCapture(ctx context.Context, cfg *Config, c *profileio.Capture, inputName string, cut bool, opt reestimate.Options) error {
	switch cfg.Format {
	case formatJSON, formatText:
		return repairFunctions(ctx, cfg, captureFunctions(c), true, opt)
	}
	if cfg.DotDir != "" {
		// The LLVM profile is made per source line; the graphs are of each sampled code
		// object, repaired as the profile's counts are (reestimate.RepairCode).
		out, err := repairAll(ctx, cfg.DotDir, captureFunctions(c), true, opt)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "reestimate: %d Graphviz files in %s\n", len(out.Functions), cfg.DotDir)
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
		if cut {
			why += " in the part of the capture that was written (its writer stopped early)"
		}
		return fmt.Errorf("%s: %s: no LLVM profile written", inputName, why)
	}
	fmt.Fprintf(os.Stderr, "reestimate: %d sampled code objects: %d reestimated, %d without code bytes, %d whose code could not be analysed, %d too large to repair, %d without a line table\n",
		st.Objects, st.Reestimated, st.RawNoCode, st.RawCFGError, st.RawTooLarge, st.NoLineTable)
	if st.FirstError != nil {
		fmt.Fprintf(os.Stderr, "reestimate: first analysis error: %v\n", st.FirstError)
	}
	if st.RawTooLarge > 0 {
		fmt.Fprintln(os.Stderr, tooLarge(st.FirstTooLarge))
	}
	fit, write := profileio.FitText, profileio.WriteText
	if cfg.Format == formatLLVMExtBinary {
		fit, write = profileio.FitExtBinary, profileio.WriteExtBinary
	}
	prof, left := fit(prof)
	if left.Any() {
		fmt.Fprintf(os.Stderr, "reestimate: the %s profile leaves out names it cannot hold: %d functions, %d call targets, %d inlined callees (the least of them, %q)\n",
			cfg.Format, left.Functions, left.CallTargets, left.Inlined, left.Least)
	}
	if len(prof.Functions) == 0 {
		return fmt.Errorf("%s: the name of every sampled function is one the %s format cannot hold: no LLVM profile written", inputName, cfg.Format)
	}
	return writeTo(cfg.Output, func(w io.Writer) error { return write(w, prof) })
}

// tooLarge says that function, the first of a capture's functions too large to repair,
// keeps its raw samples.
func tooLarge(function string) string {
	return fmt.Sprintf("reestimate: %s is the first function too large to repair (more than %d bytes of code or %d blocks): its raw samples per line are kept",
		function, cfg.MaxCodeBytes, cfg.MaxCodeBlocks)
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

// reportMerge says on standard error what merging several captures did, and lists the
// functions with more than one code (at most maxVariantNames of them).
func reportMerge(s capmerge.Summary) {
	if s.Captures < 2 && s.Objects == s.InputObjects {
		return
	}
	names := 0
	for i, v := range s.Variants {
		if i == 0 || s.Variants[i-1].Name != v.Name {
			names++
		}
	}
	variants := ""
	if names > 0 {
		variants = fmt.Sprintf("; %d functions with more than one code (%d codes), each code repaired on its own and summed by source line", names, len(s.Variants))
	}
	fmt.Fprintf(os.Stderr, "reestimate: merged %d captures: %d code objects into %d (%d functions)%s\n",
		s.Captures, s.InputObjects, s.Objects, s.Functions, variants)
	if s.NamedLate > 0 {
		fmt.Fprintf(os.Stderr, "reestimate: named %d samples a capture held unnamed by the code another capture of the same process has at their address (its JIT's records came after that capture's interval)\n", s.NamedLate)
	}
	for i, pair := range s.SameRun {
		if i == maxSameRunPairs {
			fmt.Fprintf(os.Stderr, "reestimate: … and %d more such pairs\n", len(s.SameRun)-i)
			break
		}
		fmt.Fprintf(os.Stderr, "reestimate: %s and %s are captures of the same processes of one profd run with other samples: intervals of --reset-on-flush add up, but successive flushes of a cumulative run count samples twice (give only the last)\n", pair[0], pair[1])
	}
	shown := 0
	for i, v := range s.Variants {
		if i == 0 || s.Variants[i-1].Name != v.Name {
			if shown == maxVariantNames {
				fmt.Fprintf(os.Stderr, "reestimate: … and %d more functions with more than one code\n", names-shown)
				break
			}
			shown++
		}
		fmt.Fprintf(os.Stderr, "reestimate: code of %s: %d bytes, %d samples, from %s\n", v.Name, v.Size, v.Samples, listInputs(v.Inputs))
	}
}

// maxSameRunPairs bounds the pairs of captures of one run reportMerge lists.
const maxSameRunPairs = 5

// maxVariantNames bounds the functions reportMerge lists one line per code.
const maxVariantNames = 20

// listInputs names inputs, the first three and a count of the rest.
func listInputs(in []string) string {
	if len(in) <= 3 {
		return strings.Join(in, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(in[:3], ", "), len(in)-3)
}
