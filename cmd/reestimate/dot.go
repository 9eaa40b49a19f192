package main

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
)

// writeDot writes g as a Graphviz digraph with two clusters side by side: "before", each block
// coloured by its sampled weight, and "after", coloured by res's repaired count with edges
// labelled by their counts. Colours run from white (zero) to red (the cluster's maximum).
// res may be nil (only "before" is drawn); weights has one entry per block.
func writeDot(w io.Writer, name string, g *cfg.Graph, weights []float64, res *reestimate.Result) error {
	if len(weights) != len(g.Blocks) || res != nil && (len(res.Blocks) != len(g.Blocks) || len(res.Edges) != len(g.Edges)) {
		return fmt.Errorf("reestimate: dot %q: counts do not match the CFG's %d blocks and %d edges", name, len(g.Blocks), len(g.Edges))
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "digraph %s {\n\tlabel=%s;\n\tnode [shape=box, style=filled, fontname=monospace];\n", dotQuote(name), dotQuote(name))
	writeCluster(bw, g, "b", "before: samples / instruction", weights, nil)
	if res != nil {
		after := make([]float64, len(g.Blocks))
		for b := range after {
			after[b] = res.BlockCount(b)
		}
		edges := make([]float64, len(g.Edges))
		for e := range edges {
			edges[e] = res.EdgeCount(e)
		}
		writeCluster(bw, g, "a", "after: repaired counts", after, edges)
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// writeDotFile writes function index's CFG (see writeDot) to dir/NNN-NAME.dot.
func writeDotFile(dir string, index int, name string, g *cfg.Graph, weights []float64, res *reestimate.Result) error {
	path := filepath.Join(dir, fmt.Sprintf("%03d-%s.dot", index, outfile.SafeName(name, 100)))
	err := outfile.Write(path, 0o644, func(w io.Writer) error { return writeDot(w, name, g, weights, res) })
	if err != nil {
		return fmt.Errorf("reestimate: --dot %s: %w", path, err)
	}
	return nil
}

func writeCluster(w *bufio.Writer, g *cfg.Graph, prefix, label string, blocks, edges []float64) {
	peak := 0.0
	for _, c := range blocks {
		peak = max(peak, c)
	}
	fmt.Fprintf(w, "\tsubgraph cluster_%s {\n\t\tlabel=%s;\n", prefix, dotQuote(label))
	for i, b := range g.Blocks {
		shade := 0.0
		if peak > 0 {
			shade = blocks[i] / peak
		}
		extra := ""
		if i == g.Entry {
			extra += ", penwidth=2"
		}
		if b.Exit {
			extra += ", peripheries=2"
		}
		fmt.Fprintf(w, "\t\t%s%d [label=\"%#x\\n%d insts\\n%.4g\", fillcolor=\"0.000 %.3f 1.000\"%s];\n",
			prefix, i, b.Start, len(b.Insts), blocks[i], shade, extra)
	}
	for i, e := range g.Edges {
		label := e.Kind.String()
		if edges != nil {
			label = fmt.Sprintf("%.4g", edges[i])
		}
		fmt.Fprintf(w, "\t\t%s%d -> %s%d [label=%s];\n", prefix, e.From, prefix, e.To, dotQuote(label))
	}
	w.WriteString("\t}\n")
}

// dotQuote makes a DOT string literal: only printable characters, quotes and backslashes escaped.
func dotQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
