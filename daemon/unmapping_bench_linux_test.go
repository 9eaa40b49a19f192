package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
)

// unmappingSource makes as many small mappings as its first argument says (a large
// /proc/PID/maps), then for as many seconds as its second says maps a page of code at a
// random address, runs it for some 30 µs and unmaps it: its samples fall at thousands of
// addresses that no mapping holds by the drain.
const unmappingSource = `
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv) {
	int nmaps = atoi(argv[1]);
	for (int i = 0; i < nmaps; i++)
		mmap(NULL, 4096, (i & 1) ? PROT_READ : PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* mov ecx, 0x10000; 1: dec ecx; jnz 1b; ret */
	static const unsigned char code[] = {0xb9, 0x00, 0x00, 0x01, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xc3};
	time_t end = time(NULL) + atol(argv[2]);
	while (time(NULL) < end) {
		void *hint = (void *)(0x100000000000ul + (uintptr_t)(rand() % 1000000) * 65536);
		unsigned char *p = mmap(hint, 65536, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return 1;
		size_t off = (size_t)(rand() % (65536 - 64)) & ~15ul;
		memcpy(p + off, code, sizeof code);
		((void (*)(void))(p + off))();
		munmap(p, 65536);
	}
	return 0;
}
`

// BenchmarkUnmappingTarget is profd --pid (in process, BPF back end, 999 Hz, with stacks) on
// a target of 30 000 mappings that maps code, runs it and unmaps it, again and again:
// cpu-cores is the process's CPU (profd's, as good as all) per second over
// PROFD_BENCH_SECONDS (default 5), from a second after the start. Each sample in code
// unmapped by the drain misses the cached mappings; they are read again once a drain.
func BenchmarkUnmappingTarget(b *testing.B) {
	testenv.Requires(b, testenv.Root, testenv.Tool("gcc"), testenv.PerfEvent("cpu-clock"))
	seconds := envInt(b, "PROFD_BENCH_SECONDS", 5, 1)
	dir := b.TempDir()
	src, bin := filepath.Join(dir, "unmapping.c"), filepath.Join(dir, "unmapping")
	if err := os.WriteFile(src, []byte(unmappingSource), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := runAll([]string{"gcc", "-O1", "-o", bin, src}); err != nil {
		b.Fatal(err)
	}
	var cores float64
	for range b.N {
		target := startChild(b, nil, bin, "30000", strconv.Itoa(seconds+3))
		d := newDirs(b)
		r := startRun(b, Config{Pids: []uint32{uint32(target.pid())}, Event: "cpu-clock", FreqHz: 999, FifoDir: d.fifo,
			OutDir: d.out, Formats: []Format{FormatPprof}, Stacks: true})
		time.Sleep(time.Second)
		var before, after unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &before)
		began := time.Now()
		time.Sleep(time.Duration(seconds) * time.Second)
		unix.Getrusage(unix.RUSAGE_SELF, &after)
		cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
		cores += cpu.Seconds() / time.Since(began).Seconds()
		r.stop(b)
		target.wait(b, 10*time.Second)
	}
	b.ReportMetric(cores/float64(b.N), "cpu-cores")
}
