package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/tools/accuracy/compare"
)

// runProfi prints the second table: on the machine blocks that map onto IR blocks, the
// block overlap of raw averages, of the repair and of LLVM's profi fed profd's raw line
// profile.
func runProfi(ctx context.Context, cfg Config, w io.Writer) error {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| workload | mapped blocks | exact counts covered | raw block | repaired block | profi block |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	dir, err := os.MkdirTemp("", "profd-profi-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var sums [4]float64
	for _, name := range cfg.Workloads {
		funcs, _, c, err := load(cfg, name)
		if err != nil {
			return err
		}
		ir, err := os.ReadFile(filepath.Join(cfg.IRDir, name+".ll"))
		if err != nil {
			return err
		}
		subs, err := profgen.Subprograms(bytes.NewReader(ir))
		if err != nil {
			return err
		}
		first := map[string]uint32{}
		for _, sp := range subs {
			first[sp.Name] = sp.Line
		}
		// Inlined code goes to its own function's lines (Subprograms), then under its
		// callsite in the caller (NestInlined), where the loader looks for it in this IR.
		prof, _ := profgen.FromCapture(c, profgen.Options{Raw: true, Subprograms: subs})
		calls, err := compare.ParseCallsites(bytes.NewReader(ir))
		if err != nil {
			return err
		}
		compare.NestInlined(prof, calls, first)
		var text bytes.Buffer
		if err := profileio.WriteText(&text, prof); err != nil {
			return err
		}
		irFuncs, freqs, err := compare.RunProfi(ctx, dir, ir, text.Bytes())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		maps := map[string][]int{}
		var restricted []compare.Function
		var mapped, blocks int
		var cover, weight float64
		for _, f := range funcs {
			irf := irFuncs[f.Name]
			if irf == nil {
				continue
			}
			m := compare.MapBlocks(&f, irf)
			maps[f.Name] = m
			for _, k := range m {
				blocks++
				if k >= 0 {
					mapped++
				}
			}
			rf, cov := compare.Restricted(f, m)
			restricted = append(restricted, rf)
			cover += cov * float64(f.Instructions)
			weight += float64(f.Instructions)
		}
		raw := compare.Score(restricted, compare.Restrict(compare.Raw, maps))
		rep := compare.Score(restricted, compare.Restrict(cfg.repaired(), maps))
		profi := compare.Score(restricted, compare.Profi(maps, freqs))
		fmt.Fprintf(w, "| %s | %d of %d | %s | %s | %s | %s |\n", name, mapped, blocks, num(cover/weight), num(raw.Blocks), num(rep.Blocks), num(profi.Blocks))
		for i, v := range []float64{cover / weight, raw.Blocks, rep.Blocks, profi.Blocks} {
			sums[i] += v
		}
	}
	n := float64(len(cfg.Workloads))
	fmt.Fprintf(w, "| **mean** | | %s | **%s** | **%s** | **%s** |\n", num(sums[0]/n), num(sums[1]/n), num(sums[2]/n), num(sums[3]/n))
	return nil
}
