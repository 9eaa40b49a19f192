package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"golang.org/x/arch/x86/x86asm"

	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/tools/accuracy/compare"
	"github.com/profd/profd/tools/accuracy/oracle"
)

// Run scores every workload and prints the table.
func Run(ctx context.Context, cfg Config, w io.Writer) error {
	fmt.Fprintln(w, "| workload | functions | samples | raw block | repaired block | repaired edge |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	var sumRaw, sumRep, sumEdge float64
	for _, name := range cfg.Workloads {
		if err := ctx.Err(); err != nil {
			return err
		}
		funcs, skipped, _, err := load(cfg, name)
		if err != nil {
			return err
		}
		if cfg.Blocks {
			dumpBlocks(w, funcs, cfg)
		}
		raw := compare.Score(funcs, compare.Raw)
		rep := compare.Score(funcs, cfg.repaired())
		var samples uint64
		for _, f := range rep.Functions {
			samples += f.Samples
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s |\n", name, len(funcs), samples, num(raw.Blocks), num(rep.Blocks), num(rep.Edges))
		sumRaw += raw.Blocks
		sumRep += rep.Blocks
		sumEdge += rep.Edges
		if cfg.PerFunction {
			for i, f := range rep.Functions {
				fmt.Fprintf(w, "| · %s | %d instrs | %d | %s | %s | %s |\n", f.Name, f.Instructions, f.Samples, num(raw.Functions[i].Blocks), num(f.Blocks), num(f.Edges))
				if f.Err != nil {
					fmt.Fprintf(os.Stderr, "accuracy: %s %s: %v\n", name, f.Name, f.Err)
				}
			}
			for _, s := range skipped {
				fmt.Fprintf(w, "| · %s (left out: %s) | %d instrs | | | | |\n", s.Name, s.Reason, s.Instructions)
			}
		}
	}
	n := float64(len(cfg.Workloads))
	fmt.Fprintf(w, "| **mean** | | | **%s** | **%s** | **%s** |\n", num(sumRaw/n), num(sumRep/n), num(sumEdge/n))
	if cfg.IRDir != "" {
		if err := runProfi(ctx, cfg, w); err != nil {
			return err
		}
	}
	if cfg.Parts {
		return runParts(ctx, cfg, w)
	}
	return nil
}

// readExact reads the workload's exact profile, EXACT/NAME.json.
func readExact(cfg Config, name string) (*oracle.Result, error) {
	ef, err := os.Open(filepath.Join(cfg.ExactDir, name+".json"))
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	exact, err := oracle.ReadJSON(ef)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ef.Name(), err)
	}
	return exact, nil
}

func load(cfg Config, name string) ([]compare.Function, []compare.Unjoined, *profileio.Capture, error) {
	exact, err := readExact(cfg, name)
	if err != nil {
		return nil, nil, nil, err
	}
	cf, err := os.Open(filepath.Join(cfg.SampledDir, name+".profd"))
	if err != nil {
		return nil, nil, nil, err
	}
	defer cf.Close()
	c, err := profileio.ReadCapture(cf)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", cf.Name(), err)
	}
	funcs, skipped := compare.Join(exact, c, cfg.repair())
	return funcs, skipped, c, nil
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.3f", x)
}

// dumpBlocks prints, per block of each function, the exact share and the raw and repaired
// shares: where an estimate goes wrong.
func dumpBlocks(w io.Writer, funcs []compare.Function, cfg Config) {
	for i := range funcs {
		f := &funcs[i]
		raw, _ := compare.Raw(f)
		rep, err := cfg.repaired()(f)
		if err != nil {
			fmt.Fprintf(w, "%s: %v\n", f.Name, err)
			continue
		}
		fmt.Fprintf(w, "%s (%d blocks, %d indirect jumps)\n", f.Name, len(f.CFG.Blocks), f.CFG.IndirectJumps)
		ts, rs, ps := sum(f.TrueBlocks), sum(raw.Blocks), sum(rep.Blocks)
		for b, bl := range f.CFG.Blocks {
			if f.TrueBlocks[b] == 0 && raw.Blocks[b] == 0 && rep.Blocks[b] == 0 {
				continue
			}
			fmt.Fprintf(w, "  %#5x-%#5x %2d insts  exact %.4f  raw %.4f (%6.1f)  repaired %.4f\n", bl.Start, bl.End, len(bl.Insts),
				f.TrueBlocks[b]/ts, raw.Blocks[b]/rs, raw.Blocks[b], rep.Blocks[b]/ps)
			if cfg.Insts {
				dumpInsts(w, f, bl)
			}
		}
	}
}

// dumpInsts prints each instruction of block bl with its samples: where in a block the
// samples land (the instruction after a load that missed the cache, after a mispredicted
// branch) shows why a block's samples per instruction misstate how often it ran.
func dumpInsts(w io.Writer, f *compare.Function, bl cfg.Block) {
	for k, a := range bl.Insts {
		end := bl.End
		if k+1 < len(bl.Insts) {
			end = bl.Insts[k+1]
		}
		text := "(not decodable)"
		if end <= uint64(len(f.Sampled.Code)) {
			if in, err := x86asm.Decode(f.Sampled.Code[a:end], 64); err == nil {
				text = x86asm.IntelSyntax(in, a, nil)
			}
		}
		fmt.Fprintf(w, "        %#5x %6d  %s\n", a, f.Samples[a], text)
	}
}

func sum(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s
}
