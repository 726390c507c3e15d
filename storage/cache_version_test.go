package storage

import "testing"

func TestProgressVersionOK(t *testing.T) {
	for v, want := range map[string]bool{
		"3.4.23": false, "3.4.30": false, "3.4.31": true, "3.4.40": true,
		"3.5.12": false, "3.5.13": true, "3.5.21": true,
		"3.6.0": true, "3.6.16": true, "3.7.0": true, "4.0.0": true,
		"2.3.8": false, "": false, "garbage": false,
	} {
		if got := progressVersionOK(v); got != want {
			t.Errorf("progressVersionOK(%q) = %v, want %v", v, got, want)
		}
	}
}
