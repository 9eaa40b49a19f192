// A CPU-bound Go workload for profd's tests: two functions of different cost, called from
// run in a loop for the seconds of CPU time given (default 3; the process's, so a busy
// machine takes longer and is sampled as often as an idle one). mixInts keeps its locals in
// registers and calls nothing: Go gives it no frame of its own, and no frame pointer. Each
// function runs 25 times in a row, so that the program's phases do not keep step with a
// sampler firing every millisecond.
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

//go:noinline
func mixInts(n int) uint32 {
	h := uint32(0x12345678)
	for i := 0; i < n; i++ {
		h = (h^uint32(i))*31 + 7
		h ^= h >> 15
	}
	return h
}

//go:noinline
func sumSquares(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += (i % 7) * (i % 11)
	}
	return s
}

// cpuTime is the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

//go:noinline
func run(seconds float64) uint32 {
	end := cpuTime() + time.Duration(seconds*float64(time.Second))
	var acc uint32
	for cpuTime() < end {
		for range 25 {
			acc ^= mixInts(20000)
		}
		for range 25 {
			acc ^= uint32(sumSquares(20000))
		}
	}
	return acc
}

func main() {
	seconds := 3.0
	if len(os.Args) > 1 {
		s, err := strconv.ParseFloat(os.Args[1], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "usage: hot [SECONDS]")
			os.Exit(2)
		}
		seconds = s
	}
	fmt.Println("done", run(seconds))
}
