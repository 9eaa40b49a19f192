package main

import (
	"errors"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/tools/accuracy/compare"
)

// Config is the command line.
type Config struct {
	ExactDir, SampledDir string
	Workloads            []string
	Repair               reestimate.Options
	PerFunction          bool
	IRDir                string // with it, also score LLVM's profi on NAME.ll
	Parts                bool   // also score the split runs' parts, their merge and the whole run
	NoIndirect           bool   // leave indirect jumps' targets unreachable
	NoPool               bool   // repair each block's own sample average, not its equivalence class's
	Blocks               bool   // print every block's shares
	Insts                bool   // with Blocks, every instruction's samples
}

// Validate rejects what cannot run.
func (c *Config) Validate() error {
	if len(c.Workloads) == 0 {
		return errors.New("no workloads named")
	}
	if c.ExactDir == "" || c.SampledDir == "" {
		return errors.New("-exact and -sampled must name directories")
	}
	return nil
}

// repair is the repair's options the flags ask for.
func (c *Config) repair() reestimate.Options {
	opt := c.Repair
	if c.NoPool {
		opt.Weighting = reestimate.BlockAverages
	}
	opt.UnlinkedIndirectJumps = c.NoIndirect
	return opt
}

// repaired is the repair estimator the flags ask for.
func (c *Config) repaired() compare.Estimator { return compare.Repaired(c.repair()) }
