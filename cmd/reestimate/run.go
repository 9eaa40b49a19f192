package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/cfgjson"
)

// Run reads cfg.Inputs (profd captures, merged into one, or one file of the JSON
// interchange format), repairs every function and writes the result. It stops between
// functions when ctx is cancelled.
func Run(ctx context.Context, cfg *Config) error {
	sources, err := expandInputs(cfg.Inputs, cfg.Weights)
	if err != nil {
		return err
	}
	opt := reestimate.Options{Solver: solvers[cfg.Solver]()}
	first, err := sources[0].open(nil)
	if err != nil {
		return err
	}
	head, _ := first.r.Peek(inputHeadBytes)
	if profileio.IsCapture(head) || len(sources) > 1 {
		if cfg.Format == "" {
			cfg.Format = formatLLVMText
		}
		return runCaptures(ctx, cfg, sources, first, opt)
	}
	defer first.close()
	if !isJSONObject(head) {
		return fmt.Errorf("reestimate: %s is not a profd capture, nor JSON input (docs/reestimate-json.md)%s", first.name(), colon(looksLike(head)))
	}
	if cfg.Format == "" {
		cfg.Format = formatJSON
	}
	if cfg.Format == formatLLVMText || cfg.Format == formatLLVMExtBinary {
		return fmt.Errorf("reestimate: --format %s needs a profd capture as input (it carries the line tables); %s is JSON", cfg.Format, first.path)
	}
	if cfg.Pprof != "" {
		return fmt.Errorf("reestimate: --pprof needs profd captures as input; %s is JSON", first.path)
	}
	funcs, err := cfgjson.Read(first.r)
	if err != nil {
		return fmt.Errorf("%s: %w", first.path, err)
	}
	return repairFunctions(ctx, cfg, funcs, false, opt)
}

// repairFunctions repairs each function and writes block and edge counts (json or text),
// and the Graphviz files when asked. With fromCapture, functions whose code the repair
// cannot take are left out (repairAll).
func repairFunctions(ctx context.Context, cfg *Config, funcs []cfgjson.Function, fromCapture bool, opt reestimate.Options) error {
	out, err := repairAll(ctx, cfg.DotDir, funcs, fromCapture, opt)
	if err != nil {
		return err
	}
	return writeOutput(cfg.Output, cfg.Format, out)
}

// repairAll repairs each function and returns the counts, writing one Graphviz file per
// function into dotDir unless it is "". A function whose code the repair cannot take (a
// *cfg.CodeError: undecodable, or larger than a repair may be) is an error, unless
// fromCapture: a capture's JIT code is what its runtime made, and such a function is left
// out with one line on standard error, as the LLVM profile keeps its raw samples.
func repairAll(ctx context.Context, dotDir string, funcs []cfgjson.Function, fromCapture bool, opt reestimate.Options) (*countsFile, error) {
	if dotDir != "" {
		if err := os.MkdirAll(dotDir, 0o755); err != nil {
			return nil, fmt.Errorf("reestimate: --dot: %w", err)
		}
	}
	out := countsFile{Version: 1, Functions: make([]functionCounts, 0, len(funcs))}
	var leftOut int
	var firstLeftOut error
	for i := range funcs {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reestimate: stopped before function %d of %d: %w", i, len(funcs), err)
		}
		fn := &funcs[i]
		r, err := repair(fn, opt)
		var ce *cfg.CodeError
		if fromCapture && errors.As(err, &ce) {
			leftOut++
			if firstLeftOut == nil {
				firstLeftOut = fmt.Errorf("%q: %w", fn.Name, err)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reestimate: function %q: %w", fn.Name, err)
		}
		out.Functions = append(out.Functions, newFunctionCounts(fn, r))
		if dotDir != "" {
			if err := writeDotFile(dotDir, i, fn.Name, r.Graph, r.Weights, r.Result); err != nil {
				return nil, err
			}
		}
	}
	if leftOut > 0 {
		fmt.Fprintf(os.Stderr, "reestimate: %d of the capture's functions left out: the repair cannot take their code (the first, %v)\n", leftOut, firstLeftOut)
	}
	return &out, nil
}

// repair repairs fn through reestimate's entry points, as profgen does for the LLVM profile:
// from its code, or from its explicit CFG.
func repair(fn *cfgjson.Function, opt reestimate.Options) (*reestimate.Repaired, error) {
	if fn.Given != nil {
		return reestimate.RepairSamples(fn.Given.CFG, fn.Given.Attribution(), opt)
	}
	return reestimate.RepairCode(fn.Code, fn.Addr, fn.Samples, opt)
}

func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return exitFailure
}
