package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/profd/profd/reestimate/mcf"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1 // the input could not be read or repaired
	exitUsage       = 2 // bad flags
	exitInterrupted = 130
)

// Output formats.
const (
	formatJSON          = "json"
	formatText          = "text"
	formatLLVMText      = "llvm-text"
	formatLLVMExtBinary = "llvm-extbinary"
)

// solvers are the --solver choices; "fast" is the default's older name.
var solvers = map[string]func() mcf.Solver{
	"ssp":       mcf.SSPSolver,
	"fast":      mcf.SSPSolver,
	"simplex":   mcf.SimplexSolver,
	"reference": mcf.ReferenceSolver,
}

// Config is everything a run needs, from the command line.
type Config struct {
	Input  string // a profd capture or JSON interchange input; "-" is standard input
	Output string // output path; "-" is standard output
	DotDir string // where to write one Graphviz file per function; "" writes none
	Solver string // a key of solvers
	Format string // json, text, llvm-text or llvm-extbinary; "" picks by input kind
	Raw    bool   // LLVM output without reestimation: raw samples summed per line
	// Salvage uses the sections of a capture before a damaged one instead of failing.
	Salvage bool
	IR      string // LLVM IR text of the JIT'd module: functions' first lines for LLVM output
	// Symbols are jitdump or perf-map files that name a capture's samples no symbol named
	// while profd ran.
	Symbols []string
}

// Validate checks the Config before anything runs.
func (c *Config) Validate() error {
	if c.Input == "" {
		return errors.New("no input: give a profd capture or a JSON file, or - for standard input")
	}
	if _, ok := solvers[c.Solver]; !ok {
		return fmt.Errorf("--solver %q: want ssp, simplex or reference", c.Solver)
	}
	switch c.Format {
	case "", formatJSON, formatText, formatLLVMText, formatLLVMExtBinary:
	default:
		return fmt.Errorf("--format %q: want json, text, llvm-text or llvm-extbinary", c.Format)
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
  reestimate [flags] CAPTURE.profd
  reestimate [flags] INPUT.json

For each sampled function of the input (a capture profd wrote, docs/capture-format.md, or the
JSON interchange format, docs/reestimate-json.md; - reads standard input) reestimate
recovers the control-flow graph from the function's x86-64 machine code (or takes the explicit
CFG given), pools the samples over blocks that run equally often into block weights, and
repairs them into counts that obey flow conservation (minimum-cost circulation). From a
capture it writes an LLVM sample profile (the repaired block counts projected onto the JIT's
line tables) or, with --format json or text, the same block and edge counts; from JSON,
block and edge counts. It reads one capture: bytes after its end (captures joined with cat)
are an error, and a capture none of whose JIT code drew a sample (one cut after its header)
gives no LLVM profile and an error, never an empty file.

Examples:
  reestimate run.profd -o prof.txt                        # LLVM sample profile (text)
  reestimate --format llvm-extbinary run.profd -o prof.extbinary
  llvm-profdata-14 show --sample prof.txt                 # LLVM reads either
  reestimate --raw run.profd -o raw.txt                   # without repair, to compare
  reestimate --symbols /tmp/perf-1234.map run.profd -o prof.txt  # name what was unnamed
  reestimate --format text run.profd                      # block counts of a capture
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
	fs.StringVar(&cfg.Output, "o", "-", "write the output to this `file` (- is standard output); it is replaced only once the output is complete, e.g. -o prof.txt")
	fs.StringVar(&cfg.DotDir, "dot", "", "write a Graphviz CFG per function, coloured by count before and after repair, into this `dir`, e.g. --dot out/dot")
	fs.StringVar(&cfg.Solver, "solver", "ssp", "min-cost-flow `solver`: ssp (successive shortest paths, the fastest; also called fast), simplex (network simplex) or reference (Edmonds-Karp + Klein, slow), e.g. --solver simplex")
	fs.StringVar(&cfg.Format, "format", "", "output `format`: llvm-text or llvm-extbinary (LLVM sample profile; captures only), json (docs/reestimate-json.md) or text (a table for people); default llvm-text for a capture, json for JSON input")
	fs.StringVar(&cfg.IR, "ir", "", "LLVM IR text (`FILE`, clang -g -S -emit-llvm) the JIT ran: functions' first source lines, from which LLVM counts line offsets")
	fs.Func("symbols", "a jitdump or perf map (`FILE`, repeatable) naming the capture's samples that no symbol named while profd ran, each by the code at its address at its time, as perf inject --jit does; e.g. --symbols /tmp/perf-1234.map", func(s string) error {
		cfg.Symbols = append(cfg.Symbols, s)
		return nil
	})
	fs.BoolVar(&cfg.Salvage, "salvage", false, "use the sections of a damaged capture before the damage (a bad checksum) instead of failing; what they hold is all the output says")
	fs.BoolVar(&cfg.Raw, "raw", false, "LLVM output without reestimation: each line gets the raw samples that fell on it")
	fs.Usage = func() {
		fmt.Fprint(out, usage)
		fs.PrintDefaults()
		fmt.Fprintln(out, "\nExit status: 0 done, 1 bad input or repair error, 2 bad flags, 130 interrupted.")
	}
	// Flags may come before or after the input: `reestimate run.profd -o prof.txt`.
	var inputs []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		inputs = append(inputs, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch len(inputs) {
	case 0:
	case 1:
		cfg.Input = inputs[0]
	default:
		return nil, fmt.Errorf("one input file, not %d: %s", len(inputs), strings.Join(inputs, " "))
	}
	return cfg, nil
}
