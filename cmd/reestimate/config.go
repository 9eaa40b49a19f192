package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
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
	// Inputs are profd captures, directories of them (every *.profd directly inside), or
	// one JSON interchange input; "-" is standard input.
	Inputs []string
	// Weights, one per input when given, multiply each input's sample counts.
	Weights []float64
	// ForceMix merges captures sampled with different events, periods or frequencies.
	ForceMix bool
	// Pprof is where to write, besides the output, a pprof profile of every input's
	// samples, their processes apart; "" writes none.
	Pprof  string
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
	if len(c.Inputs) == 0 {
		return errors.New("no input: give profd captures, directories of them, or a JSON file, or - for standard input")
	}
	stdin := 0
	for _, in := range c.Inputs {
		if in == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return errors.New("- (standard input) given twice: it can be read once (captures joined with cat are read one after another)")
	}
	if len(c.Weights) > 0 && len(c.Weights) != len(c.Inputs) {
		return fmt.Errorf("--weights has %d weights for %d inputs: give one per input, in order", len(c.Weights), len(c.Inputs))
	}
	for i, w := range c.Weights {
		if !(w > 0) || math.IsInf(w, 0) {
			return fmt.Errorf("--weights: weight %d (%v, of %s) must be a number above 0", i+1, w, c.Inputs[i])
		}
	}
	if c.Pprof != "" && c.Pprof == c.Output {
		return fmt.Errorf("--pprof %s is also the output (-o)", c.Pprof)
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
  reestimate [flags] CAPTURE.profd|DIR|- ...
  reestimate [flags] INPUT.json

For each sampled function of the input (captures profd wrote, docs/capture-format.md, or the
JSON interchange format, docs/reestimate-json.md; - reads standard input) reestimate
recovers the control-flow graph from the function's x86-64 machine code (or takes the explicit
CFG given), pools the samples over blocks that run equally often into block weights, and
repairs them into counts that obey flow conservation (minimum-cost circulation). From
captures it writes an LLVM sample profile (the repaired block counts projected onto the JIT's
line tables) or, with --format json or text, the same block and edge counts; from JSON,
block and edge counts.

Merging: give any number of captures, directories (every *.profd directly inside, in name
order: profd's per-process or --group-by image outputs, or its --out/intervals, a file
linked under two names, as each output's latest interval is, read once) and - once (standard input may hold
captures joined with cat). They are merged before the one repair, so it sees the sum of
their samples: a JIT function is one function wherever it ran when its name matches and its
code matches outside the fields a JIT relocates (PC-relative targets outside the function,
64-bit address immediates, absolute addresses; docs/llvm-sample-profile.md, "Merging
captures"), its samples summed by offset; a name with several codes keeps each code apart
(each repaired on its own, summed by source line in the LLVM profile) and is listed on
standard error. Captures of different sampling (event, period, frequency) are refused unless
--force-mix, as are captures of different format versions and the same capture twice. A
capture cut short (its writer was killed) is an error unless --salvage; nothing is written
unless every input was read. A capture none of whose JIT code drew a sample gives no LLVM
profile and an error, never an empty file.

Examples:
  reestimate run.profd -o prof.txt                        # LLVM sample profile (text)
  reestimate --format llvm-extbinary run.profd -o prof.extbinary
  reestimate runs/ -o prof.extbinary --format llvm-extbinary  # every runs/*.profd, merged
  reestimate a.profd b.profd --weights 1,3 -o prof.txt    # b's samples count three times
  cat host1.profd host2.profd | reestimate - -o prof.txt  # captures joined, read one by one
  reestimate runs/ --pprof all.pb.gz -o prof.txt          # also a pprof of every process
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
	fs.StringVar(&cfg.Format, "format", "", "output `format`: llvm-text or llvm-extbinary (LLVM sample profile; captures only), json (docs/reestimate-json.md) or text (a table for people); default llvm-text for captures, json for JSON input")
	fs.StringVar(&cfg.IR, "ir", "", "LLVM IR text (`FILE`, clang -g -S -emit-llvm) the JIT ran: functions' first source lines, from which LLVM counts line offsets")
	fs.Func("symbols", "a jitdump or perf map (`FILE`, repeatable) naming the capture's samples that no symbol named while profd ran, each by the code at its address at its time, as perf inject --jit does (with several inputs, in the process the file names: perf-PID.map, the jitdump's records); e.g. --symbols /tmp/perf-1234.map", func(s string) error {
		cfg.Symbols = append(cfg.Symbols, s)
		return nil
	})
	fs.BoolVar(&cfg.Salvage, "salvage", false, "use the sections of a damaged capture (a bad checksum) or one cut short (its writer was killed) before the damage or the cut, instead of failing; what they hold is all the output says")
	fs.Func("weights", "multiply each input's sample counts by its `W1,W2,...` (one number above 0 per input, in order; a directory's applies to every capture in it; counts are rounded), e.g. --weights 1,3", func(s string) error {
		cfg.Weights = cfg.Weights[:0]
		for _, f := range strings.Split(s, ",") {
			w, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return fmt.Errorf("%q is not a number", f)
			}
			cfg.Weights = append(cfg.Weights, w)
		}
		return nil
	})
	fs.BoolVar(&cfg.ForceMix, "force-mix", false, "merge captures sampled with different events, periods or frequencies, their samples summed as they are (--weights can even them out)")
	fs.StringVar(&cfg.Pprof, "pprof", "", "also write a gzipped pprof profile of every input's samples to this `file`, each process apart by its \"pid\" label and the \"input\" label of the capture it came from, e.g. --pprof all.pb.gz")
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
	cfg.Inputs = inputs
	return cfg, nil
}
