package main

import "testing"

func TestConfigValidate(t *testing.T) {
	if err := (&Config{Out: "x.json"}).Validate(); err == nil {
		t.Error("missing -ir accepted")
	}
	if err := (&Config{IR: "a.ll"}).Validate(); err == nil {
		t.Error("missing -o accepted")
	}
	c := Config{IR: "ir/sieve.ll", Out: "out/accuracy/sieve.json"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Name != "sieve" || c.WorkDir != "out/accuracy/sieve.run" {
		t.Errorf("defaults: name %q, dir %q", c.Name, c.WorkDir)
	}
}
