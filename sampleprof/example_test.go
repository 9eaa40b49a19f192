package sampleprof_test

import (
	"fmt"

	"github.com/profd/profd/sampleprof"
)

// Two profiles of one function, say from two processes, merge into one.
func ExampleProfile_Add() {
	p := sampleprof.NewProfile()
	for _, samples := range []uint64{100, 40} {
		f := &sampleprof.FunctionProfile{Name: "sieve", TotalSamples: samples + 10, HeadSamples: 1}
		base, _ := sampleprof.DecodeDiscriminator(2) // the line's second block
		f.AddBody(sampleprof.LineLocation{LineOffset: 3, Discriminator: base}, samples)
		f.AddCall(sampleprof.LineLocation{LineOffset: 5}, "mark", 10)
		p.Add(f)
	}
	for _, f := range p.SortedFunctions() {
		fmt.Println(f.Name, f.TotalSamples, f.HeadSamples)
		for _, loc := range f.SortedLines() {
			fmt.Printf(" %d.%d: %d", loc.LineOffset, loc.Discriminator, f.Body[loc])
			for _, c := range sampleprof.SortedCalls(nil, f.Calls[loc]) {
				fmt.Printf(" %s:%d", c.Name, c.Count)
			}
			fmt.Println()
		}
	}
	// Output:
	// sieve 160 2
	//  3.1: 140
	//  5.0: 0 mark:20
}
