// Command oracle records an LLVM IR program under valgrind's callgrind with lli-14's MCJIT
// and writes the exact per-instruction and per-edge counts of its JIT code as JSON
// (docs/accuracy.md).
//
//	oracle -ir out/accuracy/ir/sieve.ll -name sieve -o out/accuracy/sieve.json -- 200000 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var cfg Config
	flag.StringVar(&cfg.IR, "ir", "", "LLVM IR file to run under lli-14 (required)")
	flag.StringVar(&cfg.Name, "name", "", "workload name recorded in the output (default: the IR file's base name)")
	flag.StringVar(&cfg.Out, "o", "", "exact-profile JSON to write (required)")
	flag.StringVar(&cfg.ReestimateOut, "reestimate-json", "", "also write the counts as reestimate's JSON input")
	flag.StringVar(&cfg.WorkDir, "dir", "", "directory for callgrind.out.PID and the jitdump (default: beside -o)")
	flag.Parse()
	cfg.Args = flag.Args()
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}
