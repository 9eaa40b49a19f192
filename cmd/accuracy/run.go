package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/profd/profd/accuracy/compare"
	"github.com/profd/profd/accuracy/oracle"
	"github.com/profd/profd/profileio"
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
		funcs, skipped, err := load(cfg, name)
		if err != nil {
			return err
		}
		raw := compare.Score(funcs, compare.Raw)
		rep := compare.Score(funcs, compare.Repaired(cfg.Repair))
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
	return nil
}

func load(cfg Config, name string) ([]compare.Function, []compare.Unjoined, error) {
	ef, err := os.Open(filepath.Join(cfg.ExactDir, name+".json"))
	if err != nil {
		return nil, nil, err
	}
	defer ef.Close()
	exact, err := oracle.ReadJSON(ef)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ef.Name(), err)
	}
	cf, err := os.Open(filepath.Join(cfg.SampledDir, name+".profd"))
	if err != nil {
		return nil, nil, err
	}
	defer cf.Close()
	c, err := profileio.ReadCapture(cf)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", cf.Name(), err)
	}
	funcs, skipped := compare.Join(exact, c)
	return funcs, skipped, nil
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.3f", x)
}
