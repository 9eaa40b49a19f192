package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/profd/profd/tools/accuracy/oracle"
)

// Run records the workload, joins its callgrind profile with its jitdump and writes the JSON.
func Run(ctx context.Context, cfg Config) error {
	rc := oracle.RecordOptions{IR: cfg.IR, Args: cfg.Args, Dir: cfg.WorkDir, Stdout: os.Stdout}
	var vglog strings.Builder
	rc.Stderr = &vglog
	res, err := oracle.Run(ctx, rc, oracle.JoinOptions{})
	if err != nil {
		return fmt.Errorf("oracle: %s: %w\n%s", cfg.Name, err, vglog.String())
	}
	res.Workload = cfg.Name
	if err := writeFile(cfg.Out, res.WriteJSON); err != nil {
		return err
	}
	if cfg.ReestimateOut != "" {
		if err := writeFile(cfg.ReestimateOut, res.WriteReestimateJSON); err != nil {
			return err
		}
	}
	var imbalanced, unaligned int
	for _, f := range res.Functions {
		imbalanced += len(f.Imbalances)
		if f.Unaligned > 0 {
			unaligned++
		}
	}
	fmt.Fprintf(os.Stderr, "oracle: %s: %d functions, %d JIT instructions executed, %d unattributed, %d imbalanced instructions, %d functions with unaligned counts -> %s\n",
		cfg.Name, len(res.Functions), res.JITInstructions, res.Unattributed, imbalanced, unaligned, cfg.Out)
	return nil
}

func writeFile(path string, write func(w io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("oracle: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("oracle: %w", err)
	}
	return nil
}
