package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/profd/profd/reestimate"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1 // the input could not be read or repaired
	exitUsage       = 2 // bad flags
	exitInterrupted = 130
)

// solvers are the --solver choices.
var solvers = map[string]func() reestimate.Solver{
	"fast":      reestimate.FastSolver,
	"simplex":   reestimate.SimplexSolver,
	"reference": reestimate.ReferenceSolver,
}

// Config is everything a run needs, from the command line.
type Config struct {
	Input  string // JSON input path; "-" is standard input
	Output string // JSON output path; "-" is standard output
	DotDir string // where to write one Graphviz file per function; "" writes none
	Solver string // a key of solvers
	Format string // "json" or "text"
}

// Validate checks the Config before anything runs.
func (c *Config) Validate() error {
	if c.Input == "" {
		return errors.New("no input: give a JSON file, or - for standard input")
	}
	if _, ok := solvers[c.Solver]; !ok {
		return fmt.Errorf("--solver %q: want fast, simplex or reference", c.Solver)
	}
	if c.Format != "json" && c.Format != "text" {
		return fmt.Errorf("--format %q: want json or text", c.Format)
	}
	if c.DotDir != "" {
		if st, err := os.Stat(c.DotDir); err == nil && !st.IsDir() {
			return fmt.Errorf("--dot %s: not a directory", c.DotDir)
		}
	}
	return nil
}

const usage = `reestimate: repair sampled block counts of JIT-compiled functions.

Usage:
  reestimate [flags] INPUT.json

For each function of INPUT.json (format: docs/reestimate-json.md; - reads standard input)
reestimate recovers the control-flow graph from the function's x86-64 machine code (or takes
the explicit CFG given), averages the samples over each basic block, and repairs the block
weights into counts that obey flow conservation (minimum-cost circulation). It writes block
and edge counts as JSON.

Examples:
  reestimate examples/reestimate/score.json               # counts to standard output
  reestimate -o counts.json examples/reestimate/score.json
  reestimate --dot out/dot examples/reestimate/score.json # plus out/dot/NNN-NAME.dot per function
  dot -Tsvg out/dot/000-score.dot > cfg.svg      # draw one (Graphviz)
  reestimate --format text examples/reestimate/score.json  # a table instead of JSON
  reestimate --solver reference in.json                  # the paper's slow solver, to compare

Flags:
`

// parseFlags reads args into a Config; help goes to out.
func parseFlags(args []string, out io.Writer) (*Config, error) {
	cfg := &Config{}
	fs := flag.NewFlagSet("reestimate", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.Output, "o", "-", "write the JSON counts to this `file` (- is standard output), e.g. -o counts.json")
	fs.StringVar(&cfg.DotDir, "dot", "", "write a Graphviz CFG per function, coloured by count before and after repair, into this `dir`, e.g. --dot out/dot")
	fs.StringVar(&cfg.Solver, "solver", "fast", "min-cost-flow `solver`: fast (successive shortest paths), simplex (network simplex) or reference (Edmonds-Karp + Klein, slow), e.g. --solver simplex")
	fs.StringVar(&cfg.Format, "format", "json", "output `format`: json (docs/reestimate-json.md) or text (a table for people), e.g. --format text")
	fs.Usage = func() {
		fmt.Fprint(out, usage)
		fs.PrintDefaults()
		fmt.Fprintln(out, "\nExit status: 0 done, 1 bad input or repair error, 2 bad flags, 130 interrupted.")
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch fs.NArg() {
	case 0:
	case 1:
		cfg.Input = fs.Arg(0)
	default:
		return nil, fmt.Errorf("one input file, not %d: %s", fs.NArg(), strings.Join(fs.Args(), " "))
	}
	return cfg, nil
}
