// Command profd samples JIT-compiled code of target processes and writes LLVM sample
// profiles, pprof profiles and captures. See `profd --help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/profd/profd/daemon"
	"github.com/profd/profd/symsource/fifo"
)

// Exit codes (listed in --help).
const (
	exitOK       = 0
	exitFailure  = 1 // a run that started went wrong
	exitUsage    = 2 // bad flags or configuration, including an --out that cannot be written
	exitNoTarget = 3 // a --pid names no running process
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, opts, err := parseFlags(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "profd: %v\n(see profd --help)\n", err)
		return exitUsage
	}
	if cfg == nil { // --version
		return exitOK
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "profd: %v\n(see profd --help)\n", err)
		return exitUsage
	}
	logger := newLogger(stderr, opts.logOptions)
	if opts.configUnsafe != nil {
		logger.Warn("profd: --config may be changed by other users: they choose what profd profiles, where it writes and where it sends, with its rights; give it a file only profd's user (or root) may write",
			opts.configUnsafe...)
	}
	exp, err := startExport(opts.otlp, cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "profd: export: %v\n(see profd --help: --otlp-endpoint and the OTEL_EXPORTER_OTLP_* variables)\n", err)
		return exitUsage
	}
	if exp == nil {
		warnUnsentLeft(filepath.Join(cfg.OutDir, daemon.IntervalDir), logger)
	}
	var exportStats func() daemon.ExportStats
	if exp != nil {
		exportStats = exp.stats
		// A run that fails before its stop leaves the exporter to this: it gives up at once.
		defer func() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			exp.Close(ctx)
		}()
	}
	srv, err := startMetrics(opts.metrics, cfg, exportStats, logger, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "profd: --metrics-addr: %v\n(give a free port with --metrics-addr HOST:PORT, or leave the flag out)\n", err)
		return exitUsage
	}
	if srv != nil {
		defer srv.Close()
	}
	// A hang-up (the terminal or ssh session profd runs in went away) stops it as SIGTERM
	// does: with its final flush, its FIFOs and pid file removed.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	// A closed stdout (profd ... | head) fails the summary's writes; it does not kill profd
	// before its final flush.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if err := daemon.Run(ctx, *cfg, logger); err != nil {
		fmt.Fprintf(stderr, "profd: %v\n", err)
		switch {
		case errors.Is(err, fifo.ErrDirInUse):
			fmt.Fprintln(stderr, "(another profd runs with it; give this one its own with --fifo-dir DIR, and its JITs PROFD_DIR=DIR)")
		case errors.Is(err, fifo.ErrUnsafeDir), errors.Is(err, fifo.ErrUnusableDir):
			fmt.Fprintln(stderr, "(--fifo-dir DIR picks another directory for profd.pid and the FIFOs; JITs find it through PROFD_DIR=DIR)")
		}
		switch {
		case errors.Is(err, daemon.ErrNoTarget):
			return exitNoTarget
		case errors.Is(err, daemon.ErrConfig), errors.Is(err, fifo.ErrUnsafeDir), errors.Is(err, fifo.ErrUnusableDir), errors.Is(err, fifo.ErrDirInUse):
			return exitUsage
		}
		return exitFailure
	}
	return exitOK
}

// cmdOptions are the flags that configure profd's command rather than its run.
type cmdOptions struct {
	logOptions
	metrics metricsOptions
	otlp    otlpOptions
	// configUnsafe says who besides profd's user may change its --config file, if anyone.
	configUnsafe []any
}

type logOptions struct {
	json  bool
	level slog.Level
}

func newLogger(w io.Writer, o logOptions) *slog.Logger {
	var level slog.LevelVar
	level.Set(o.level)
	opts := &slog.HandlerOptions{Level: &level}
	if o.json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

const usageText = `profd samples the JIT-compiled code of target processes and writes profiles LLVM reads.

Usage:
  profd --pid PID[,PID...] [flags]
  profd --jit-image NAME [flags]
  profd --all [--cgroup PATH] [--container ID] [--uid UID] [--jit-image NAME] [--exclude-image NAME] [flags]

Examples:
  profd --pid 1234 --out /tmp/prof                  # profile one process until Ctrl-C
  profd --jit-image lli-14 --duration 30s           # every lli-14 process, now and later
  profd --pid 1234 --format llvm-text,pprof --flush-interval 10s
  profd --jit-image java --java-perfmap 30s         # every JVM, its methods named while it runs
  kill -USR1 $(cat /run/profd/profd.pid)            # ask for a flush (what a JIT runtime does)
  profd --config /etc/profd.conf --duration 1m      # flags from a file; the command line wins
  profd --all --cgroup /system.slice/myapp.service  # every process of a systemd service
  profd --all --uid 1000 --exclude-image bash       # every process of user 1000 but its shells
  profd --all --container 3f2a9c81d0e4 --group-by container   # one container, one output

Exit status: 0 done (every target exited, --duration passed, or SIGTERM/SIGINT), 1 a run
that started failed (also one whose final flush could not write an output: --out keeps an
earlier flush's, if any), 2 bad flags or configuration (also an --out that cannot be made or
written or that another profd writes, a --fifo-dir that is unsafe, cannot be made or is
another profd's, a --pid that is a kernel thread, a --cgroup that does not exist,
a --metrics-addr profd cannot listen on), 3 a --pid names no running process.

Flags:
`

const usageFooter = `
Outputs (in --out, replaced atomically at each flush):
  <image>-<pid>.prof.txt        LLVM sample profile, text  (llvm-profdata-14 show --sample FILE)
  <image>-<pid>.prof.extbinary  LLVM sample profile, ext-binary (clang-14 -fprofile-sample-use=FILE)
  <image>-<pid>.pb.gz           pprof profile               (go tool pprof -top FILE)
  <image>-<pid>.profd           capture, for offline work   (reestimate FILE -o prof.txt)
One profd writes an --out (it holds .profd.lock there) and at start removes the
temporary files of a flush a killed profd left.
A target that exits gets its final profile at once (with --group-by image, in its image's
next flush, at the latest the final one); the other targets' outputs are not written then.
Each output is mode 0600 and owned by its target's user (with --group-by image
--all-users, by the image's processes' user when they share one, else by root), from its
first byte: the JIT reads its own profiles (the paths a flush request is answered with),
no other user can.
An --out profd makes is mode 0711; an existing one keeps its mode (profd warns when it
is world-writable without the sticky bit).
A later process that reuses a pid during the run writes <image>-<pid>.2.<ext>, then .3, ...,
so no process's final profile replaces another's.
With --group-by image: <image>.<ext>, every process of the image profiled in the run that
runs as root, and <image>-uid<UID>.<ext> those of user UID: one user's processes never share
an output with another's (--all-users: <image>.<ext> for all).
With --group-by container: container-<ID12>.<ext>, every process of the container (and
user, as for images: container-<ID12>-uid<UID>.<ext>) profiled in the run; a process in no
container is grouped by its image.
With --all, every process but kernel threads and profd is a target (as root), narrowed by
--cgroup, --container, --uid, --jit-image (a process must pass each kind given, any value
of a kind) and --exclude-image; processes are checked as they fork and exec and at each scan
of /proc, and one that leaves the filters is retired as an exited one is.
With --flush-interval, each interval of each output is kept as well, named by its start
(UTC), in --out/intervals (made mode 0711), each file mode 0600 and owned as its output's:
  intervals/<base>.<YYYYMMDDTHHMMSS.mmmZ>.pb.gz  the interval's samples only (pprof, if in --format)
  intervals/<base>.<YYYYMMDDTHHMMSS.mmmZ>.profd  the same as a capture (if in --format)
  intervals/<base>.latest.pb.gz, .latest.profd   the output's latest interval (hard links)
where <base> is an output's name without its extension. An interval ends at each
--flush-interval flush, at the final flush and at its process's exit; SIGUSR1 and a JIT's
request rewrite the cumulative files only (with --reset-on-flush every flush ends one).
The LLVM profiles have no interval files: they stay cumulative (per flush with
--reset-on-flush).
Every sample is in exactly one interval. --keep deletes the oldest past its limits (default
24h,1GiB); nothing else in the directory is touched. The cumulative files keep a function
whose code ended for --keep-ended (default 10 intervals, at least 1m); after that its
interval files alone name it, and the cumulative files count its samples as
"[ended JIT code, in the intervals]", and a call chain not sampled as long keeps its leaf
alone, its callers "[callers in the intervals]": a JIT that keeps loading new code and
unloading it costs profd what it ran lately, not all it ever ran.
The pprof profile has each sample's call chain (go tool pprof -traces FILE) and its pid,
tid, comm, event and cgroup labels, and container_id for a process in a container
(Docker, containerd, CRI-O, Podman) (go tool pprof -tagfocus comm=NAME FILE). The capture
also keeps each process's command line and OpenTelemetry service name.

Config file (--config FILE): a line per flag, its name without dashes as the key:
  # /etc/profd.conf
  jit-image = lli-14
  jit-image = postgres          # a list flag's key may repeat, as the flag may
  out = /var/lib/profd
  format = pprof,capture
  flush-interval = 30s
  kernel-stacks = true          # booleans: true or false
  jitdump-dir = "/srv/jit #2"   # a value with " #" in it is quoted, Go style
A flag on the command line wins over the file's key of that name; a list flag given
there (--pid, --jit-image, --format) replaces the file's list. An unknown key is an error
(exit 2) naming its line and the closest flag; a file other users may write is warned about.

Signals:
  SIGUSR1                  flush now (requests during a flush are coalesced into one more)
  SIGTERM, SIGINT, SIGHUP  final flush, remove the FIFOs and pid file, exit
  SIGPIPE                  ignored: a closed stdout or stderr does not stop profd
`

func parseFlags(args []string, stdout, stderr io.Writer) (*daemon.Config, cmdOptions, error) {
	var cfg daemon.Config
	var lo cmdOptions
	fs := flag.NewFlagSet("profd", flag.ContinueOnError)
	// Errors are reported once, by the caller; the usage text only on --help.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.Func("pid", "target process ids, comma-separated or repeated (`PIDS`, e.g. 1234,5678). profd stops once every one has exited (but with --jit-image). One that execs another program (a launcher script's exec java) is a target anew from the exec, with outputs named for its new image (<image>-<pid>.<ext>); what it ran before keeps its own", func(s string) error {
		for _, f := range strings.Split(s, ",") {
			pid, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil {
				return fmt.Errorf("not a pid: %q", f)
			}
			if pid <= 0 || pid > math.MaxInt32 {
				return fmt.Errorf("--pid %d: not a process id", pid)
			}
			cfg.Pids = append(cfg.Pids, uint32(pid))
		}
		return nil
	})
	fs.Func("jit-image", "profile every process running the executable `NAME` (a name looked up in PATH at start, e.g. lli-14, or an absolute path), running now or started later; comma-separated or repeated. A process matches by the file it runs, never by the name it gives itself; a name PATH lacks, or resolves to a script (a shim), matches executables of that name; in a container, a root-owned executable of the name matches", func(s string) error {
		for _, f := range strings.Split(s, ",") {
			cfg.JITImages = append(cfg.JITImages, strings.TrimSpace(f))
		}
		return nil
	})
	fs.StringVar(&cfg.Event, "event", "cycles", "perf `EVENT` to sample: cycles, instructions, branch-misses, cache-misses, cpu-clock, task-clock or a raw r<hex>; without a hardware PMU profd falls back to cpu-clock and says so")
	fs.BoolVar(&cfg.StrictEvent, "strict-event", false, "fail instead of falling back to cpu-clock when --event is unavailable")
	fs.Uint64Var(&cfg.FreqHz, "freq", 0, "samples per second per CPU (`HZ`; default 999)")
	fs.Uint64Var(&cfg.PeriodEvents, "period", 0, "sample every `N` events instead of --freq (e.g. 100003 with --event instructions; at least 10000, and for cpu-clock, in ns, no shorter than the kernel's maximum rate allows)")
	fs.BoolVar(&cfg.FixedInterval, "fixed-interval", false, "keep cpu-clock's and task-clock's interval fixed, as perf does; by default profd draws a new one every 200 ms, its rate within ±25 % of --freq (the mean rate stays --freq), so that a program whose phases change on the sampler's rhythm is not seen in some phases only")
	fs.StringVar((*string)(&cfg.Backend), "backend", "auto", "how samples are collected: auto (BPF where it loads, else perf ring buffers), bpf (counted in the kernel) or ring (perf ring buffers read by profd)")
	fs.StringVar(&cfg.OutDir, "out", ".", "`DIR` for the profiles, named <image>-<pid>.<ext>")
	fs.Func("format", "outputs to write, comma-separated (`LIST`): llvm-text, llvm-extbinary, pprof, capture (default all)", func(s string) error {
		for _, f := range strings.Split(s, ",") {
			cfg.Formats = append(cfg.Formats, daemon.Format(strings.TrimSpace(f)))
		}
		return nil
	})
	fs.StringVar(&cfg.FifoDir, "fifo-dir", "", "private `DIR` for profd.pid and the <pid>.map FIFOs JITs write symbols to (default /run/profd as root, else $XDG_RUNTIME_DIR/profd)")
	fs.StringVar(&cfg.JitdumpDir, "jitdump-dir", "", "also look for jitdump files under `DIR`/.debug/jit/ (profd already looks where each target's JITDUMPDIR and HOME say, in /tmp, and at the dumps it maps, inside its mount namespace)")
	fs.DurationVar(&cfg.JavaPerfMapEvery, "java-perfmap", 0, "every `D` (e.g. 30s), ask each target that runs HotSpot (JDK 17 or later) to write its perf map, as jcmd PID Compiler.perfmap does (a JVM that starts during the run, at 2, 4, 8, ... seconds of age until that is D, while it compiles most of its code; also 4 s after the last ask while samples wait on code its maps have not described, or went without their caller for it), and once more as profd stops, so that its compiled methods are named while it runs (HotSpot writes its map only when asked); a JVM without an attach listener is sent SIGQUIT once to start it, never one that does not catch the signal. 0, the default, never asks")
	fs.DurationVar(&cfg.FlushInterval, "flush-interval", 0, "also flush every `D` (e.g. 30s; at least 1s), each such flush ending an interval whose pprof profile and capture are kept in --out/"+daemon.IntervalDir+" (see --keep); 0 flushes only on request, SIGUSR1 and at exit")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop after `D` (e.g. 1m); 0 runs until SIGTERM/SIGINT or every target has exited")
	fs.StringVar((*string)(&cfg.GroupBy), "group-by", "", "what one output covers: process (<image>-<pid>.<ext>), image (every process of the image and user profiled in the run, e.g. all backends of a server, exited ones included: <image>.<ext> for root's processes, <image>-uid<UID>.<ext> for another user's) or container (every process of a container and user: container-<ID12>.<ext>, container-<ID12>-uid<UID>.<ext>; a process in no container is grouped by its image) (default process; image with --all, whose short-lived processes would each leave files of their own)")
	fs.BoolVar(&cfg.AllUsers, "all-users", false, "with --group-by image or container, one output per image or container whatever users its processes run as (<image>.<ext>, owned by root when they differ)")
	fs.BoolVar(&cfg.Stacks, "stacks", true, "sample each sample's call chain by frame pointers, as perf record -g: pprof profiles get stacks and tid and comm labels, LLVM profiles call sites with their targets (code built without frame pointers gives chains cut short; profd says so once; the caller of a function sampled where it has not set the frame pointer, which frame pointers skip, is kept from the first words at the stack pointer where the file's .eh_frame, what the JIT registered or wrote in its jitdump, the JIT code's instructions or Go's function table say its return address lies there); --stacks=false samples leaves only")
	fs.StringVar((*string)(&cfg.Unwind), "unwind", "fp", "how --stacks walks user call chains: fp (by frame pointers, in the kernel, as perf record -g) or dwarf (by each library's and executable's .eh_frame from a 16 KiB copy of the stack per sample, as perf record --call-graph dwarf: chains go on through code built without frame pointers, most distributions' libraries and interpreters among it; Go's code by the frame depths its function table holds; on past where the copy ends by the kernel's frame-pointer chain; JIT code by the frame information its JIT registers with the GDB JIT interface or writes in its jitdump, as lli and CPython 3.13's -X perf_jit do, else by its instructions where they tell its frames (CPython's -X perf trampolines, HotSpot's compiled methods without -XX:+PreserveFramePointer, V8's prologues and epilogues), else by its frame pointers; a sample whose chain meets code not described yet, such as a JVM's methods before its next perf map, is held until it is, 10 s at most). dwarf samples with the ring back end, holds up to 256 MB of frame information, and costs profd more CPU per sample (see docs/benchmarks.md)")
	fs.BoolVar(&cfg.KernelStacks, "kernel-stacks", false, "with --stacks, also sample the targets in kernel mode, kernel frames named from /proc/kallsyms")
	fs.BoolVar(&cfg.ResetOnFlush, "reset-on-flush", false, "start a new interval at each flush (SIGUSR1's and a JIT's request's too) instead of writing cumulative profiles: every output, the LLVM profiles included, holds the last flush's interval only; a flush whose interval ran no sampled JIT function writes no LLVM profile and removes the earlier interval's, so an output's files are always one flush's. Without it the files in --out are cumulative, the LLVM profiles too (a JIT re-optimising wants everything so far; with --flush-interval, but for code that ended longer ago than --keep-ended), and only --flush-interval's interval files are per interval")
	fs.IntVar(&cfg.MaxSymbols, "max-symbols", daemon.DefaultMaxSymbols, "per target, the live JIT functions profd holds (`N`); past it the target's code loads are dropped and counted, with one warning")
	fs.Func("max-symbol-mb", fmt.Sprintf("per target, the memory its functions' names, code bytes and line tables may hold (`MB`, default %d); code that ended is let go first (of code that drew samples, the code bytes of the least sampled: their samples stay), then loads are dropped and counted", daemon.DefaultMaxSymbolBytes>>20), func(s string) error {
		mb, err := strconv.ParseInt(s, 10, 64)
		if err != nil || mb <= 0 || mb > 1<<30 {
			return fmt.Errorf("want a number of megabytes, such as 512")
		}
		cfg.MaxSymbolBytes = mb << 20
		return nil
	})
	fs.Func("max-memory-mb", fmt.Sprintf("for all targets together, the memory their functions' names, code bytes and line tables may hold (`MB`, default an eighth of the host's memory between 256 and 2048: %d here); past it the targets that hold the most, beyond their share, have their code loads dropped and counted, with one warning naming each", daemon.DefaultMaxMemory()>>20), func(s string) error {
		mb, err := strconv.ParseInt(s, 10, 64)
		if err != nil || mb <= 0 || mb > 1<<30 {
			return fmt.Errorf("want a number of megabytes, such as 1024")
		}
		cfg.MaxMemoryBytes = mb << 20
		return nil
	})
	fs.IntVar(&cfg.MaxTargets, "max-targets", 0, "with --all or --jit-image, the processes profiled at once (`N`, default one for each 64 KB of --max-memory-mb and four descriptors profd may open: "+strconv.Itoa(daemon.DefaultMaxTargets(daemon.DefaultMaxMemory()))+" here); each costs profd 20 to 40 kB. Past it further processes wait, unsampled, and are profiled, oldest first, as profiled ones exit; one warning says so and the counters line counts them. --pid targets are not counted")
	fs.IntVar(&cfg.MaxTargetsPerUser, "max-targets-per-user", 0, "with --all or --jit-image, the processes of one (real) user profiled at once (`N`, default a quarter of --max-targets), so that no user's processes crowd out the others'; past it the user's further processes wait, as past --max-targets, with one warning for each user")
	fs.IntVar(&cfg.MaxRecordRate, "max-record-rate", daemon.DefaultMaxRecordRate, "per target, the symbol records per second profd applies (`N`; 10 s worth may come at once); the excess is dropped and counted, with one warning (perf maps and jitdump files are read at that pace instead, nothing dropped)")
	fs.DurationVar(&cfg.StopTimeout, "stop-timeout", daemon.DefaultStopTimeout, "when stopping, write the final profiles within `D` whatever targets still send: a flush already running makes LLVM profiles until 40% of it, symbols not read by 60% of it are counted and logged, and the final LLVM profiles not made by 90% of it are left out and named (their captures are written: reestimate makes them); with --otlp-endpoint, intervals are sent until D ends (or until the endpoint, tried once more on a new connection, fails again), and those left are sent by the next profd with this --out")
	fs.BoolVar(&lo.json, "log-json", false, "write logs as JSON lines instead of text")
	fs.Func("log-level", "log `LEVEL`: debug, info, warn or error (default info)", func(s string) error {
		return lo.level.UnmarshalText([]byte(s))
	})
	registerIntervalFlags(fs, &cfg)
	addMetricsFlags(fs, &lo.metrics)
	addOTLPFlags(fs, &lo.otlp)
	registerAllFlags(fs, &cfg)
	showVersion := fs.Bool("version", false, "print the version, the commit it was built from and exit")
	configPath := registerConfigFlag(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usageText)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			fmt.Fprint(stderr, usageFooter)
		}
		return nil, lo, err
	}
	if fs.NArg() > 0 {
		return nil, lo, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *configPath != "" {
		unsafe, err := applyConfigFile(fs, *configPath)
		if err != nil {
			return nil, lo, err
		}
		lo.configUnsafe = unsafe
	}
	var zeroFreq bool
	fs.Visit(func(f *flag.Flag) { zeroFreq = zeroFreq || f.Name == "freq" && cfg.FreqHz == 0 })
	if zeroFreq {
		return nil, lo, fmt.Errorf("--freq 0: want samples per second, 1 or more (or --period N to sample by event count)")
	}
	if *showVersion {
		fmt.Fprintln(stdout, buildVersionLine())
		return nil, lo, nil
	}
	return &cfg, lo, nil
}
