// goleaf spends its time in mix, a leaf whose frame is empty (Go gives such a function no
// frame pointer of its own), called through outer from main, for the seconds its argument
// gives.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

//go:noinline
func mix(n int) int {
	x := 0
	for i := 0; i < n; i++ {
		x = x*31 + i ^ (x >> 7)
	}
	return x
}

//go:noinline
func outer(n int) int { return mix(n) + 1 }

func main() {
	secs, err := strconv.ParseFloat(os.Args[1], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: goleaf SECONDS")
		os.Exit(2)
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	s := 0
	for time.Now().Before(end) {
		s += outer(100000)
	}
	fmt.Println(s)
}
