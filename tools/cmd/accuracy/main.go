// Command accuracy scores profd's sampled profiles against the oracle's exact counts and
// prints one markdown table row per workload (docs/accuracy.md).
//
//	accuracy -exact out/accuracy -sampled out/accuracy/sampled sort sieve
//
// For each workload W it reads EXACT/W.json (bin/oracle) and SAMPLED/W.profd (a profd
// capture of the same IR), joins the functions by name and code, and prints the block
// overlap of raw block averages and of reestimate's repair, the repair's edge overlap and,
// with -profi, LLVM profi's block overlap. With -parts it also scores split runs
// (PARTS=4 scripts/sample.sh): each part repaired alone, the parts merged with capmerge and
// repaired once, and the whole run. The cost flags override reestimate's defaults.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var cfg Config
	flag.StringVar(&cfg.ExactDir, "exact", "out/accuracy", "directory of the oracle's NAME.json exact profiles")
	flag.StringVar(&cfg.SampledDir, "sampled", "out/accuracy/sampled", "directory of profd's NAME.profd captures")
	flag.Int64Var(&cfg.Repair.IncreaseCost, "inc", 0, "reestimate increase cost c⁺ (0: default)")
	flag.Int64Var(&cfg.Repair.DecreaseCost, "dec", 0, "reestimate decrease cost c⁻ (0: default, -1: none)")
	flag.Int64Var(&cfg.Repair.EdgeCost, "edge", 0, "edge cost outside loops (0: default, -1: zero)")
	flag.Int64Var(&cfg.Repair.LoopEdgeCost, "loop-edge", 0, "back/in-loop edge cost (0: default, -1: zero)")
	flag.Int64Var(&cfg.Repair.LoopExitCost, "loop-exit", 0, "loop-exit edge cost (0: default, -1: zero)")
	flag.BoolVar(&cfg.Repair.PerInstruction, "per-inst", false, "multiply each block's increase and decrease costs by its instruction count")
	flag.BoolVar(&cfg.PerFunction, "v", false, "also print a row per function")
	flag.BoolVar(&cfg.Blocks, "blocks", false, "print each block's exact, raw and repaired shares")
	flag.BoolVar(&cfg.Insts, "insts", false, "with -blocks, also each instruction's samples and disassembly (where a stall's samples land)")
	flag.BoolVar(&cfg.NoPool, "no-pool", false, "repair each block's own samples per instruction, not its equivalence class's (blocks that always run equally often)")
	flag.BoolVar(&cfg.NoIndirect, "no-indirect", false, "do not link indirect jumps to the blocks only they reach")
	flag.StringVar(&cfg.IRDir, "profi", "", "directory of the workloads' IR (NAME.ll): also run LLVM's profi (opt-14) on the raw sample profile and compare on the blocks that map")
	flag.BoolVar(&cfg.Parts, "parts", false, "also score each workload's split run: the parts in SAMPLED/NAME.parts/*.profd each repaired alone, merged (capmerge) and repaired once, against the whole run's SAMPLED/NAME.profd")
	flag.Parse()
	cfg.Workloads = flag.Args()
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "accuracy:", err)
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "accuracy:", err)
		os.Exit(1)
	}
}
