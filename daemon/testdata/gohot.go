// gohot spends its time in mixInts, called through outer from main, for the seconds its
// argument gives, once it reads a byte on stdin: a Go program profd names from its own
// function table when it is built stripped (go build -ldflags=-s). The compiler inlines
// step, mixInts' loop body, into it. With a second argument, Go's own profiler writes a
// CPU profile of the loop there.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"time"
)

// step is inlined into mixInts.
func step(x, i int) int { return x*31 + i ^ (x >> 7) }

//go:noinline
func mixInts(n int) int {
	x := 0
	for i := 0; i < n; i++ {
		x = step(x, i)
		if x == 42 { // a call keeps mixInts from being a frameless leaf
			fmt.Fprint(os.Stderr, "")
		}
	}
	return x
}

//go:noinline
func outer(n int) int { return mixInts(n) + 1 }

func main() {
	secs, err := strconv.ParseFloat(os.Args[1], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: gohot SECONDS [CPUPROFILE]")
		os.Exit(2)
	}
	os.Stdin.Read(make([]byte, 1))
	if len(os.Args) > 2 {
		f, err := os.Create(os.Args[2])
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	s := 0
	for time.Now().Before(end) {
		s += outer(100000)
	}
	fmt.Println(s)
}
