package oracle

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// RecordOptions says what to run under callgrind.
type RecordOptions struct {
	IR   string   // LLVM IR (.ll or .bc) for lli-14
	Args []string // the program's arguments
	Dir  string   // where the callgrind file and the jitdump go; created if missing

	Valgrind string // default "valgrind"
	Lli      string // default "lli-14"
	// Stdout and Stderr receive the program's and valgrind's output; nil discards it.
	Stdout, Stderr io.Writer
}

// Recording names the files a recorded run left.
type Recording struct {
	Pid       int    // valgrind's process, which is the program's: callgrind runs in-process
	Callgrind string // Dir/callgrind.out.PID
	Jitdump   string // Dir/jitdump/.debug/jit/*/jit-PID.dump
}

// Command is the command line Record runs (for logs and docs).
func (c RecordOptions) Command() []string {
	vg, lli := c.Valgrind, c.Lli
	if vg == "" {
		vg = "valgrind"
	}
	if lli == "" {
		lli = "lli-14"
	}
	cmd := []string{vg, "--tool=callgrind", "--dump-instr=yes", "--collect-jumps=yes",
		// JIT code is written to anonymous memory and then run: have valgrind check it
		// for modification (the amd64 default, spelled out).
		"--smc-check=all-non-file",
		"--callgrind-out-file=" + filepath.Join(c.Dir, "callgrind.out.%p"),
		lli, "-jit-kind=mcjit", "-mcpu=x86-64", c.IR}
	return append(cmd, c.Args...)
}

// Record runs the IR under lli-14's MCJIT inside callgrind, with JITDUMPDIR set so lli-14
// writes a jitdump of the same run.
func Record(ctx context.Context, c RecordOptions) (*Recording, error) {
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("oracle: record: %w", err)
	}
	c.Dir = dir
	jd := filepath.Join(dir, "jitdump")
	if err := os.MkdirAll(jd, 0o755); err != nil {
		return nil, fmt.Errorf("oracle: record: %w", err)
	}
	argv := c.Command()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "JITDUMPDIR="+jd) // lli-14 ignores a relative JITDUMPDIR
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("oracle: record %s: %w", c.IR, err)
	}
	rec := &Recording{Pid: cmd.Process.Pid}
	rec.Callgrind = filepath.Join(dir, "callgrind.out."+strconv.Itoa(rec.Pid))
	if _, err := os.Stat(rec.Callgrind); err != nil {
		return nil, fmt.Errorf("oracle: record %s: %w: %w", c.IR, ErrNoOutput, err)
	}
	dumps, _ := filepath.Glob(filepath.Join(jd, ".debug", "jit", "*", "jit-"+strconv.Itoa(rec.Pid)+".dump"))
	if len(dumps) != 1 {
		return nil, fmt.Errorf("oracle: record %s: %d jitdumps for pid %d: %w", c.IR, len(dumps), rec.Pid, ErrNoOutput)
	}
	rec.Jitdump = dumps[0]
	return rec, nil
}
